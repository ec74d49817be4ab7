"""Start the real server for end-to-end tests: a subprocess on free loopback ports.

``server`` is one shared server (with ``--test-clock``) for the whole session; tests
that need their own options, or that stop the server, call ``start_server(*args)``.
Tests that share ``server`` keep to their own queue prefixes and cache keys.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@dataclass
class ServerProcess:
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

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def launch(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start ``python -m cubequeue.server`` on free ports and wait until both accept."""
    host = "127.0.0.1"
    port, http_port = free_port(), free_port()
    fd, log_name = tempfile.mkstemp(prefix="cubequeue-", suffix=".log")
    os.close(fd)
    log_path = Path(log_name)
    cmd = [
        sys.executable, "-m", "cubequeue.server",
        "--host", host, "--port", str(port), "--http-port", str(http_port), *args,
    ]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("CUBEQUEUE_", "CUBESTORE_"))}
    full_env.update(env or {})
    with log_path.open("wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=ROOT)
    server = ServerProcess(host, port, http_port, process, log_path, tuple(args))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log()}")
        if _accepts(host, port) and _accepts(host, http_port):
            return server
        time.sleep(0.05)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"server did not start within {START_TIMEOUT_S} s:\n{server.log()}")


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    proc = launch("--test-clock")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def launcher() -> Iterator[Callable[..., ServerProcess]]:
    """``launch`` for module- or session-scoped fixtures; every server stops at the end."""
    started: list[ServerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        proc = launch(*args, env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def start_server() -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        proc = launch(*args, env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
