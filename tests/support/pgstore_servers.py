"""Real cubequeue servers over one PostgreSQL database, for the front-end tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

READY_TIMEOUT_S = 60.0


def wait_serving(server: CubequeueServer, timeout: float = READY_TIMEOUT_S) -> None:
    """Until a dialect statement stops answering 57P03 (the store is attached)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(server.dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute("CACHE GET 'readiness:probe'")
                return
        except psycopg.errors.CannotConnectNow:
            if time.monotonic() > deadline:
                raise AssertionError(f"never served:\n{server.log()}") from None
            time.sleep(0.05)


@contextmanager
def front_ends(dsn: str, n: int, *args: str) -> Iterator[list[CubequeueServer]]:
    """``n`` servers with ``--store dsn`` (and ``--test-clock``), serving."""
    servers: list[CubequeueServer] = []
    try:
        for _ in range(n):
            servers.append(start_cubequeue("--store", dsn, *args))
        for server in servers:
            wait_serving(server)
        yield servers
    finally:
        for server in servers:
            server.stop()
