"""The ``cubequeue_server`` fixture, used the way another project would use it.

A throwaway project in a temporary directory, with its own top-level ``server`` package
(the name cubequeue must never claim), runs pytest in a subprocess. The plugin is found
through the ``pytest11`` entry point alone: no ``-p``, no conftest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

PROJECT_TESTS = '''
import psycopg
import pytest
from websockets.sync.client import connect as ws_connect

from server import NAME
from cubequeue.server.pgclient import PgError


def test_their_server_package_is_theirs(cubequeue_server):
    assert NAME == "theirs"
    assert cubequeue_server.dsn == f"postgresql://cube@127.0.0.1:{cubequeue_server.port}/cube"
    assert cubequeue_server.ws_url == f"ws://127.0.0.1:{cubequeue_server.http_port}/ws"


def test_dsn_with_a_driver_and_advance(cubequeue_server):
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        conn.execute("QUEUE ADD PRIORITY 1 'jobs:1' '{}'")
        before = conn.execute("SYS CLOCK").fetchone()
        cubequeue_server.advance(120_001)
        after = conn.execute("SYS CLOCK").fetchone()
    assert after[1] - before[1] == 120_001


def test_each_test_gets_a_fresh_server(cubequeue_server):
    assert cubequeue_server.query("QUEUE LIST 'jobs'") == []
    with ws_connect(cubequeue_server.ws_url, open_timeout=10):
        pass


@pytest.mark.cubequeue_args("--max-items", "1")
def test_marker_passes_flags(cubequeue_server):
    cubequeue_server.query("QUEUE ADD PRIORITY 1 'jobs:1' '{}'")
    with pytest.raises(PgError) as info:
        cubequeue_server.query("QUEUE ADD PRIORITY 1 'jobs:2' '{}'")
    assert info.value.sqlstate == "54000"


def test_a_failure_shows_the_server_log(cubequeue_server):
    cubequeue_server.query("QUEUE ADD PRIORITY 1 'jobs:1' '{}'")
    assert False, "deliberate"
'''


def _project(root: Path) -> Path:
    (root / "server").mkdir(parents=True)
    (root / "server" / "__init__.py").write_text('NAME = "theirs"\n')
    (root / "tests").mkdir()
    (root / "tests" / "test_with_cubequeue.py").write_text(textwrap.dedent(PROJECT_TESTS))
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n")
    return root


def test_fixture_from_a_throwaway_project(tmp_path: Path) -> None:
    project = _project(tmp_path / "their-project")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "CUBEQUEUE_", "CUBESTORE_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:randomly", "tests"],
        cwd=project, env=env, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    summary = re.findall(r"(PASSED|FAILED) tests/test_with_cubequeue.py::(\w+)", out)
    assert sorted(summary) == sorted([
        ("PASSED", "test_their_server_package_is_theirs"),
        ("PASSED", "test_dsn_with_a_driver_and_advance"),
        ("PASSED", "test_each_test_gets_a_fresh_server"),
        ("PASSED", "test_marker_passes_flags"),
        ("FAILED", "test_a_failure_shows_the_server_log"),
    ]), out
    assert proc.returncode == 1, out
    # the failing test's report carries the server's log, the passing ones' do not
    assert out.count("cubequeue server log") == 1, out
    assert "listening" in out.split("cubequeue server log", 1)[1]
