"""Plain SQL over system tables, over the wire, from stores that answer reads later.

* durable (``--data-dir``, ``--fsync always``): a read that saw a write not yet fsynced
  waits for it, so ``SELECT count(*) FROM system.queue`` while other connections ADD, and
  right after a restart, must wait instead of failing with XX000 "can only be read
  asynchronously"; psycopg sends the simple protocol without parameters and the extended
  one with them; the WebSocket runs an ADD and a SELECT sent back to back concurrently;
* ``--store postgresql://…``: every read of a system table is an awaitable (skipped when
  no PostgreSQL is installed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pgstore_servers import wait_serving
from wsclient import WsClient

from cubequeue.server.cubews.messages import HttpResultSet
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

TIMEOUT_S = 60.0
WRITERS, ADDS = 3, 20
COUNT = "SELECT count(*) FROM system.queue"


async def _writer(dsn: str, n: int) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for i in range(ADDS):
            await conn.execute(f"QUEUE ADD PRIORITY 1 'pw{n}:{i}' '{{}}'")


async def _reader(dsn: str, done: asyncio.Event) -> list[tuple[int, int]]:
    """(all, one prefix) counts read while the writers go: simple, then extended."""
    seen: list[tuple[int, int]] = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while not done.is_set():
            total = await (await conn.execute(COUNT)).fetchone()  # simple protocol
            ours = await (await conn.execute(COUNT + " WHERE prefix = %s", ["pw0"])).fetchone()
            assert total is not None and ours is not None
            seen.append((total[0], ours[0]))
    return seen


def _load_and_count(server: CubequeueServer) -> None:
    async def main() -> None:
        done = asyncio.Event()
        reader = asyncio.create_task(_reader(server.dsn, done))
        await asyncio.gather(*(_writer(server.dsn, n) for n in range(WRITERS)))
        done.set()
        seen = await reader
        assert seen, "the reader read"
        assert all(0 <= ours <= ADDS and total <= WRITERS * ADDS for total, ours in seen)
        assert [t for t, _ in seen] == sorted(t for t, _ in seen)  # ADDs only add

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
    _counts_now(server, WRITERS * ADDS, WRITERS * ADDS)


def _counts_now(server: CubequeueServer, total: int, loaded: int) -> None:
    """The counts over simple Query, Parse/Bind/Execute and COPY (``loaded``: pw* items)."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        assert conn.execute(COUNT).fetchone() == (total,)
        assert conn.execute(COUNT + " WHERE prefix LIKE %s", ["pw%"]).fetchone() == (loaded,)
        with conn.cursor() as cur, cur.copy(f"COPY ({COUNT}) TO STDOUT") as copy:
            assert b"".join(bytes(block) for block in copy) == f"{total}\n".encode()


def _websocket_add_then_select(server: CubequeueServer, before: int) -> None:
    """ADD and SELECT sent back to back on one socket: they run concurrently, so the
    SELECT reads while the ADD's record waits for its fsync."""

    async def main() -> None:
        async with WsClient(server.ws_url) as client:
            for i in range(10):
                add = client.send(f"QUEUE ADD PRIORITY 1 'ws{before}:{i}' '{{}}'")
                count = client.send(COUNT)
                added, answer = await asyncio.wait_for(asyncio.gather(add, count), TIMEOUT_S)
                assert isinstance(added, HttpResultSet), added
                assert isinstance(answer, HttpResultSet), answer
                assert before + i <= int(answer.rows[0][0] or "-1") <= before + i + 1
            final = await client.query(COUNT, timeout=TIMEOUT_S)
            assert isinstance(final, HttpResultSet) and final.rows == ((str(before + 10),),)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[tuple[Path, list[CubequeueServer]]]:
    started: list[CubequeueServer] = []
    yield tmp_path, started
    for server in started:
        server.stop()


def test_durable_plain_sql_waits_for_unsynced_reads_and_after_a_restart(
    durable: tuple[Path, list[CubequeueServer]],
) -> None:
    data_dir, started = durable
    args = ("--data-dir", str(data_dir), "--fsync", "always")
    server = start_cubequeue(*args)
    started.append(server)
    wait_serving(server)
    _load_and_count(server)
    _websocket_add_then_select(server, WRITERS * ADDS)
    assert server.stop() == 0
    again = start_cubequeue(*args)
    started.append(again)
    wait_serving(again)
    _counts_now(again, WRITERS * ADDS + 10, WRITERS * ADDS)  # the first reads after it
    _websocket_add_then_select(again, WRITERS * ADDS + 10)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from pgcluster import find_bin, start_cluster

    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs it)")
    cluster = start_cluster()
    try:
        yield cluster.create_database("plainwait")
    finally:
        cluster.stop()


def test_postgresql_store_plain_sql_over_both_wires(pg_dsn: str) -> None:
    server = start_cubequeue("--store", pg_dsn)
    try:
        wait_serving(server)
        _load_and_count(server)
        _websocket_add_then_select(server, WRITERS * ADDS)
    finally:
        server.stop()
