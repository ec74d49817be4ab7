"""node-postgres and pgjdbc run Cube's two QueryQueue flows (scripts in tests/server/pgwire/clients/)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parent / "clients"
JDBC_JAR = Path("/usr/share/java/postgresql.jar")


def prefix() -> str:
    return "c" + uuid.uuid4().hex[:10]


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node/npm missing"
)
def test_node_postgres(server):
    node_dir = CLIENTS / "node"
    if not (node_dir / "node_modules" / "pg").is_dir():
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund"], cwd=node_dir, check=True, timeout=300
        )
    out = subprocess.run(
        ["node", "flow.js", server.host, str(server.port), str(server.http_port), prefix()],
        cwd=node_dir, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "OK"


@pytest.mark.skipif(
    shutil.which("javac") is None or not JDBC_JAR.exists(), reason="javac or pgjdbc missing"
)
def test_pgjdbc(server, tmp_path):
    subprocess.run(
        ["javac", "-d", str(tmp_path), str(CLIENTS / "java" / "QueueFlow.java")],
        check=True, timeout=120,
    )  # fmt: skip
    out = subprocess.run(
        ["java", "-cp", f"{JDBC_JAR}:{tmp_path}", "QueueFlow", server.host, str(server.port),
         prefix()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "OK"
