"""A throwaway self-signed certificate for tests of the TLS paths (the openssl CLI)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["self_signed"]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """``(cert, key)`` for ``localhost`` and 127.0.0.1 in ``folder``; the test skips where
    the openssl CLI is missing."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is missing")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
