"""Debian's Chromium for the browser tests (driven by Playwright for Python, whose own
browser download cannot work here, so the system browser is launched by path)."""

from __future__ import annotations

import os

import pytest

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "skip_without_browser"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def skip_without_browser(have_playwright: bool, tests: str) -> None:
    """Skip the calling test module when Playwright or Chromium is missing, except under
    CI, where ``make test`` installs both and a skip would hide a failure: there ``tests``
    (what the module tests, for the message) fails to import instead."""
    if have_playwright and os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{tests} need playwright and Debian's chromium "
                           "(make test installs them)")
    pytest.skip("playwright or /usr/bin/chromium is missing", allow_module_level=True)
