"""pytest plugin (entry point ``pytest11``): cubequeue as a test double in one line.

Any project that installs cubequeue gets the ``cubequeue_server`` fixture::

    def test_orphans(cubequeue_server):
        conn = psycopg.connect(cubequeue_server.dsn)
        ...
        cubequeue_server.advance(120_001)   # SYS CLOCK ADVANCE, no sleeping

Each test gets a fresh server process (``python -m cubequeue.server --test-clock``) on
free loopback ports, so a test sees an empty store and its own clock; the server is
stopped with SIGTERM at teardown. Extra server flags come from a marker::

    @pytest.mark.cubequeue_args("--max-items", "10")

The server runs with ``CUBEQUEUE_*`` and ``CUBESTORE_*`` removed from its environment, so
the developer's shell cannot change what a test sees. Only ``cubequeue.*`` modules are
imported (never a bare ``server``), so a project with its own ``server`` package is fine.
``advance`` and ``query`` use the standard-library client of :mod:`.pgclient`, so the
project needs no PostgreSQL driver.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["CubequeueServer", "cubequeue_server", "start_cubequeue"]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
_PORT_ATTEMPTS = 3
_MARKER = "cubequeue_args"


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _accepts(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@dataclass
class CubequeueServer:
    """A running cubequeue process; ``dsn`` and ``ws_url`` are what a client needs."""

    host: str
    port: int
    http_port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    args: tuple[str, ...] = field(default=())

    @property
    def dsn(self) -> str:
        return f"postgresql://cube@{self.host}:{self.port}/cube"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.http_port}/ws"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run ``sql`` over the PostgreSQL wire; the last statement's rows, as text."""
        from cubequeue.server.pgclient import connect

        with connect(self.host, self.port, application_name="cubequeue-pytest") as client:
            results = client.query(sql)
        return results[-1].rows if results else []

    def advance(self, ms: int) -> None:
        """Move the server's clock forward by ``ms`` (``SYS CLOCK ADVANCE``)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError(f"advance() takes a non-negative int of ms, not {ms!r}")
        self.query(f"SYS CLOCK ADVANCE {ms}")

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` s; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def _launch(args: Sequence[str], host: str, log_path: Path, test_clock: bool,
            extra_env: Mapping[str, str] | None) -> CubequeueServer:
    port, http_port = _free_port(host), _free_port(host)
    while http_port == port:
        http_port = _free_port(host)
    clock = ["--test-clock"] if test_clock else []
    cmd = [sys.executable, "-m", "cubequeue.server", *clock, "--port", str(port),
           "--http-port", str(http_port), "--host", host, *args]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUBEQUEUE_", "CUBESTORE_"))}
    env.update(extra_env or {})
    with log_path.open("wb") as log:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, env=env)
    return CubequeueServer(host, port, http_port, process, log_path, tuple(args))


def start_cubequeue(
    *args: str,
    host: str = "127.0.0.1",
    test_clock: bool = True,
    env: Mapping[str, str] | None = None,
) -> CubequeueServer:
    """Start a server and wait until both ports accept; the caller must ``stop()`` it.

    ``test_clock=False`` starts it without ``--test-clock``; ``env`` adds environment
    variables (``CUBEQUEUE_*`` ones included) on top of the cleaned environment.

    Free ports are picked by binding port 0 and closing, which can race with another
    process; a start that fails with "address in use" is retried on new ports.
    """
    fd, name = tempfile.mkstemp(prefix="cubequeue-", suffix=".log")
    os.close(fd)
    log_path = Path(name)
    for attempt in range(_PORT_ATTEMPTS):
        server = _launch(args, host, log_path, test_clock, env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                break
            if _accepts(host, server.port) and _accepts(host, server.http_port):
                return server
            time.sleep(0.02)
        else:
            server.stop()
            raise RuntimeError(f"cubequeue did not start within {START_TIMEOUT_S:g} s:\n"
                               f"{server.log()}")
        output = server.log()
        if "in use" not in output.lower() or attempt == _PORT_ATTEMPTS - 1:
            raise RuntimeError(f"cubequeue exited with code {server.process.returncode}:\n"
                               f"{output}")
    raise AssertionError("unreachable")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{_MARKER}(*args): extra command-line flags for the "
                            "cubequeue_server fixture")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether the test failed, so the fixture can attach the server's log."""
    report: pytest.TestReport = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def cubequeue_server(request: pytest.FixtureRequest) -> Iterator[CubequeueServer]:
    """A fresh cubequeue server with ``--test-clock`` on free ports, for one test.

    When the test fails, the server's log is added to the report as a
    "cubequeue server log" section.
    """
    marker = request.node.get_closest_marker(_MARKER)
    args = tuple(str(a) for a in marker.args) if marker else ()
    server = start_cubequeue(*args)
    try:
        yield server
    finally:
        server.stop()
        if request.node.stash.get(_FAILED, False):
            request.node.add_report_section("teardown", "cubequeue server log", server.log())
        with contextlib.suppress(OSError):
            server.log_path.unlink()
