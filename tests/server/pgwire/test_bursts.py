"""A connection burst waits instead of failing; sockets that only squat cannot lock a real
client out, neither by holding ``--max-unauthenticated-connections`` nor by holding the
descriptors; the Unix socket file goes with the server.

Each test runs a real server process and real clients (asyncpg, psycopg, bare sockets)
with small limits, so the numbers of the issue (300 clients against a cap of 100, 600
silent sockets against 512 descriptors) are scaled down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import psycopg
import pytest
from server_process import server

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

WAIT_S = 60.0


@contextlib.contextmanager
def silent_sockets(host: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that never send a byte (the kernel completes them even while
    the server does not accept)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            socks.append(socket.create_connection((host, port), timeout=WAIT_S))
        yield socks
    finally:
        for sock in socks:
            sock.close()


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.0)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _dsn(srv: CubequeueServer) -> str:
    return f"host={srv.host} port={srv.port} user=cube dbname=cube connect_timeout={int(WAIT_S)}"


def test_a_burst_past_the_unauthenticated_cap_all_log_in() -> None:
    async def burst(port: int, clients: int) -> list[object]:
        async def one() -> object:
            conn = await asyncpg.connect(host="127.0.0.1", port=port, user="cube",
                                         database="cube", timeout=WAIT_S)
            try:
                return await conn.fetchval("SELECT 1")
            finally:
                await conn.close()

        return await asyncio.gather(*(one() for _ in range(clients)), return_exceptions=True)

    with server("--max-unauthenticated-connections", "5") as srv:
        results = asyncio.run(burst(srv.port, 40))
        assert results == [1] * 40, [r for r in results if r != 1][:3]
        assert "53300" not in srv.log()


def test_silent_sockets_holding_the_cap_do_not_lock_a_client_out() -> None:
    with server("--max-unauthenticated-connections", "5", "--max-connections", "10",
                "--startup-timeout", "600") as srv:
        idle = [psycopg.connect(_dsn(srv), autocommit=True) for _ in range(5)]
        try:
            with silent_sockets(srv.host, srv.port, 5) as socks:
                with psycopg.connect(_dsn(srv), autocommit=True) as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
                assert _closed_by_server(socks[0])  # the oldest silent one made room
                assert not any(_closed_by_server(s) for s in socks[2:])
            assert "closing the oldest silent connection" in srv.log()
            assert all(c.execute("SELECT 1").fetchone() == (1,) for c in idle)
        finally:
            for c in idle:
                c.close()


def test_the_cap_of_authenticated_sessions_is_still_53300() -> None:
    with (server("--max-connections", "2") as srv, psycopg.connect(_dsn(srv)),
          psycopg.connect(_dsn(srv)),
          pytest.raises(psycopg.OperationalError, match="--max-connections")):
        psycopg.connect(_dsn(srv))


# --- descriptors ------------------------------------------------------------------------


def _limited(soft: int, hard: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return preexec


@contextlib.contextmanager
def limited_server(soft: int, hard: int, *args: str) -> Iterator[CubequeueServer]:
    """A server process started under ``RLIMIT_NOFILE`` (soft, hard)."""
    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    fd, name = tempfile.mkstemp(prefix="cubequeue-", suffix=".log")
    os.close(fd)
    log = Path(name)
    cmd = [sys.executable, "-m", "cubequeue.server", "--host", "127.0.0.1",
           "--port", str(ports[0]), "--http-port", str(ports[1]), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUBEQUEUE_", "CUBESTORE_"))}
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, env=env,
                                   preexec_fn=_limited(soft, hard))
    srv = CubequeueServer("127.0.0.1", ports[0], ports[1], process, log, tuple(args))
    try:
        deadline = time.monotonic() + WAIT_S
        while "listening" not in srv.log():
            assert process.poll() is None, srv.log()
            assert time.monotonic() < deadline, srv.log()
            time.sleep(0.05)  # waiting for the start, not timing it
        yield srv
    finally:
        srv.stop()
        log.unlink(missing_ok=True)


def test_more_silent_sockets_than_descriptors_do_not_lock_a_client_out() -> None:
    # 600 silent sockets against 512 descriptors, scaled: 150 against 128; the soft limit
    # starts at 64 and is raised to the hard one at start
    with limited_server(64, 128, "--startup-timeout", "600",
                        "--max-unauthenticated-connections", "1000") as srv:
        assert "raised from 64 to the hard limit" in srv.log()
        assert "file descriptors allow" in srv.log()
        with silent_sockets(srv.host, srv.port, 150) as socks:
            with psycopg.connect(_dsn(srv), autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            assert _closed_by_server(socks[0])
        assert "out of file descriptors" in srv.log()
        assert "closing the oldest silent connection" in srv.log()
        assert srv.process.poll() is None


def test_too_few_descriptors_for_the_caps_are_named_at_start() -> None:
    with limited_server(128, 128) as srv:
        log = srv.log()
        assert "file descriptors allow only" in log and "--max-connections (1000)" in log


# --- the Unix socket ------------------------------------------------------------------


def test_the_unix_socket_is_named_at_start_and_removed_at_shutdown(tmp_path: Path) -> None:
    srv = start_cubequeue("--unix-socket-dir", str(tmp_path))
    path = tmp_path / f".s.PGSQL.{srv.port}"
    try:
        assert path.is_socket()
        with psycopg.connect(f"host={tmp_path} port={srv.port} user=cube dbname=cube",
                             autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        listening = next(line for line in srv.log().splitlines() if "listening" in line)
        assert str(path) in listening
        srv.process.send_signal(signal.SIGTERM)
        assert srv.process.wait(WAIT_S) == 0
    finally:
        srv.stop()
    assert not path.exists(), "the socket file outlived a clean shutdown"
