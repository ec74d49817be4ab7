"""What an operator sees when the server cannot start listening, and how the
healthcheck finds the server it checks: its port from the server's own command line
(``docker run cubequeue --port 6000``) and a plain answer when the port holds something
that is not PostgreSQL."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cubequeue.server.cli import running_server_flags, server_flags
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

RUN_TIMEOUT_S = 60


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUBEQUEUE_", "CUBESTORE_"))}
    env.update(extra)
    return env


def _cubequeue(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", *args],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env=_clean_env(**env), check=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _occupied() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# --- a port already in use ---------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--port", "--http-port"])
def test_port_in_use_is_one_line_naming_port_and_flag(flag: str) -> None:
    with _occupied() as busy:
        ports = {"--port": str(_free_port()), "--http-port": str(_free_port()), flag: str(busy)}
        proc = _cubequeue("--host", "127.0.0.1", "--port", ports["--port"],
                          "--http-port", ports["--http-port"])
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"cubequeue: cannot listen on 127.0.0.1 port {busy} ({flag}): address already in use"]


def test_port_in_use_from_the_variable_names_the_flag() -> None:
    with _occupied() as busy:
        proc = _cubequeue("--host", "127.0.0.1", "--http-port", str(_free_port()),
                          CUBEQUEUE_PORT=str(busy))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"cubequeue: cannot listen on 127.0.0.1 port {busy} "
                                   "(--port): address already in use")
    assert "Traceback" not in proc.stderr


# --- the healthcheck against something that is not PostgreSQL ----------------------------


def _healthcheck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", "healthcheck",
                           "--server-pid", "0", *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=_clean_env(**env), check=False)


@contextmanager
def _answering(answer: bytes) -> Iterator[int]:
    """A loopback server for one client: it reads what comes, answers ``answer`` and
    closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(RUN_TIMEOUT_S)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(10)


HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("answer", [
    HTTP_400,
    random.Random(13).randbytes(300),
    random.Random(14).randbytes(7),
    b"R\xff\xff\xff\xf0" + random.Random(15).randbytes(40),  # a first byte PostgreSQL
    b"E\x00\x00\x00\x02garbage",                             # could send, then no frame
], ids=["http", "random-300", "random-7", "R-bad-length", "E-bad-length"])
def test_healthcheck_names_a_server_that_is_not_postgresql(answer: bytes) -> None:
    with _answering(answer) as port:
        proc = _healthcheck("--port", str(port))
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"unhealthy: the server at 127.0.0.1:{port} does not speak "
                               "the PostgreSQL protocol (it sent b")



def test_healthcheck_on_the_http_port_says_it_reached_http(
        cubequeue_server: CubequeueServer) -> None:
    """An HTTP server waits for a request line that a PostgreSQL startup packet never ends,
    so the handshake only times out; the healthcheck then asks in HTTP and names the port
    it reached (``--http-port``) and the one it wants (``--port``)."""
    proc = _healthcheck("--port", str(cubequeue_server.http_port), "--timeout", "1")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"unhealthy: 127.0.0.1:{cubequeue_server.http_port} is not "
                               "the PostgreSQL wire: it answered HTTP ('HTTP/1.1 ")
    assert "--http-port" in lines[0] and "(--port, CUBEQUEUE_PORT)" in lines[0]


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag(flag: str) -> None:
    from cubequeue.server import __version__

    proc = _cubequeue(flag)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"cubequeue {__version__}"


# --- the healthcheck reads the running server's command line --------------------------


@pytest.mark.parametrize(("argv", "expected"), [
    (["cubequeue", "--port", "6000"], {"port": "6000"}),
    (["/usr/local/bin/python3.12", "/usr/local/bin/cubequeue", "--port=6000",
      "--host", "0.0.0.0", "--log-level", "debug"], {"port": "6000", "host": "0.0.0.0"}),
    (["python", "-m", "cubequeue.server", "--password-file", "/run/secrets/pw"],
     {"password_file": "/run/secrets/pw"}),
    (["cubequeue"], {}),
    (["cubequeue", "healthcheck", "--port", "1"], {}),
    (["/sbin/init", "--port", "6000"], {}),
    (["/usr/bin/python3", "other.py", "cubequeue", "--port", "6000"], {}),
    (["cubequeue", "--port"], {}),  # argparse would exit: ignored, not fatal
])
def test_server_flags(argv: list[str], expected: dict[str, object]) -> None:
    assert server_flags(argv) == expected


def test_healthcheck_finds_the_port_the_server_was_started_with(tmp_path: Path) -> None:
    """As in ``docker run cubequeue --port 6000``: the port is a flag of the server's
    command line, in no variable; the healthcheck reads it from the server process."""
    password = tmp_path / "pw"
    password.write_text("hc-s3cret\n")
    server = start_cubequeue("--ws-auth", "none", "--auth", "scram-sha-256", "--password-file", str(password))
    try:
        found = _healthcheck_of(server)
        assert found.returncode == 0, found.stderr
        assert found.stdout.startswith(f"healthy: 127.0.0.1:{server.port} answered")
        # without the server's command line the same call checks the default port
        blind = _healthcheck()
        assert f"127.0.0.1:{server.port}" not in blind.stdout + blind.stderr
    finally:
        server.stop()


def _healthcheck_of(server: CubequeueServer) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", "healthcheck",
                           "--server-pid", str(server.process.pid)], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, env=_clean_env(), check=False)


def test_own_flags_win_over_the_server_s(cubequeue_server: CubequeueServer) -> None:
    with _answering(HTTP_400) as port:
        proc = subprocess.run(
            [sys.executable, "-m", "cubequeue.server", "healthcheck", "--server-pid",
             str(cubequeue_server.process.pid), "--port", str(port)],
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=_clean_env(),
            check=False)
    assert proc.returncode == 1
    assert f"127.0.0.1:{port} does not speak" in proc.stderr


def _fake_proc(root: Path, processes: dict[int, list[str]], children: list[int]) -> Path:
    for pid, argv in processes.items():
        (root / str(pid) / "task" / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    (root / "1" / "task" / "1" / "children").write_text(" ".join(map(str, children)) + " ")
    return root


SERVER_ARGV = ["/usr/local/bin/python3.12", "/usr/local/bin/cubequeue", "--port", "6000"]


@pytest.mark.parametrize("init", ["/sbin/docker-init", "/usr/bin/tini", "dumb-init"])
def test_behind_a_container_init_the_child_is_read(tmp_path: Path, init: str) -> None:
    proc = _fake_proc(tmp_path, {1: [init, "--", "cubequeue", "--port", "6000"],
                                 7: ["/bin/sh"], 8: SERVER_ARGV}, [7, 8])
    assert running_server_flags(1, proc) == {"port": "6000"}


def test_children_of_any_other_pid_1_are_ignored(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, {1: ["/sbin/init"], 8: SERVER_ARGV}, [8])
    assert running_server_flags(1, proc) == {}
    assert running_server_flags(0, proc) == {}
    assert running_server_flags(99, proc) == {}  # no such process
