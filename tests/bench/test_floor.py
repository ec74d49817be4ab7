"""The floor server (bench/floor.py) and the round trip measured against it.

The floor must answer what the benchmark's clients send, exactly as PostgreSQL would:
asyncpg's ``SELECT 1`` in the simple protocol (``execute``), the extended one
(``fetchval``: Parse, Describe, Bind with binary results, Execute, Sync) and a prepared
statement; anything else is an error, never a wrong answer. A short pgbench run against
the floor and cubequeue must come out in the report as a ratio to the floor.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

# the repository root holds the ``bench`` package; pytest puts only tests/ on the path
from bench import peers
from bench.floor import SELECT_ONE, is_select_one, result_format
from bench.results import Report, ratio_lines, write_results
from bench.wire import PGBENCH, Workload, run_pgbench


@pytest.fixture(scope="module")
def floor() -> Iterator[peers.Peer]:
    peer = peers.start_floor()
    try:
        yield peer
    finally:
        peer.stop()


def test_select_one_spellings() -> None:
    assert b"SELECT 1\n\x00" in SELECT_ONE  # pgbench sends its script's line
    assert is_select_one(b"  select   1 ;\n\x00")
    assert not is_select_one(b"SELECT 10\x00")
    assert not is_select_one(b"SELECT 1; SELECT 1\x00")


def test_result_format_of_a_bind() -> None:
    # portal "", statement "s", no parameter formats, no parameters, results: none / binary
    assert result_format(b"\x00s\x00\x00\x00\x00\x00\x00\x00") == 0
    assert result_format(b"\x00s\x00\x00\x00\x00\x00\x00\x01\x00\x01") == 1
    # one text parameter "ab" before the result formats
    bind = b"p\x00s\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x02ab\x00\x01\x00\x00"
    assert result_format(bind) == 0


@pytest.mark.timeout(60)
def test_floor_answers_asyncpg_select_one(floor: peers.Peer) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(floor.dsn)
        uncached = await asyncpg.connect(floor.dsn, statement_cache_size=0)
        try:
            assert await conn.execute("SELECT 1") == "SELECT 1"  # simple protocol
            assert await conn.fetchval("SELECT 1") == 1  # extended, binary results
            assert await conn.fetchval("SELECT 1") == 1  # the cached statement again
            assert await uncached.fetchval("SELECT 1") == 1  # unnamed statement
            prepared = await conn.prepare("SELECT 1")
            assert [await prepared.fetchval() for _ in range(3)] == [1, 1, 1]
            assert [tuple(r) for r in await prepared.fetch()] == [(1,)]
            with pytest.raises(asyncpg.FeatureNotSupportedError, match="SELECT 1 only"):
                await conn.fetchval("SELECT 2")
            with pytest.raises(asyncpg.FeatureNotSupportedError):
                await conn.execute("SELECT 2")
            assert await conn.fetchval("SELECT 1") == 1  # the connection goes on after errors
        finally:
            await conn.close()
            await uncached.close()

    asyncio.run(run())


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists(PGBENCH), reason="pgbench is not installed")
def test_report_shows_the_round_trip_as_a_ratio_to_the_floor(floor: peers.Peer,
                                                            tmp_path: Path) -> None:  # fmt: skip
    server = peers.start_cubequeue()
    try:
        report = Report(dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), True, 1,
                        ("cubequeue",), {})  # fmt: skip
        for peer in (server, floor):
            w = Workload(peer.name, "SELECT 1", "SELECT 1", "SELECT 1")
            run = run_pgbench(peer, w, "extended", 1, 3)
            assert run.ok, run.errors
            report.wire[(peer.name, "SELECT 1", "extended", 1)] = [run]
    finally:
        server.stop()
    lines = [ln for ln in ratio_lines(report) if "÷ the floor" in ln]
    assert len(lines) == 1 and lines[0].startswith("SELECT 1 round trip at 1 client")
    assert "target ≤ 1.25×" in lines[0]
    out = tmp_path / "RESULTS.md"
    write_results(report, out)
    text = out.read_text()
    assert "## Round trip against the floor (bench/floor.py)" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| 1 | extended |"))
    assert "×" in row and ("MET" in row or "MISSED" in row)
    print("\n".join(lines))


def test_floor_reads_messages_split_across_reads(floor: peers.Peer) -> None:
    """A start-up message and a query that arrive a few bytes at a time are answered once
    whole (and not read as tagged messages before the start-up is complete)."""
    import socket
    import struct
    import time

    startup = b"\x00\x03\x00\x00user\x00cube\x00database\x00cube\x00\x00"
    query = b"Q" + struct.pack("!I", 13) + b"SELECT 1\x00"
    with socket.create_connection(("127.0.0.1", floor.port), 10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for data in (struct.pack("!I", len(startup) + 4) + startup, query):
            for i in range(0, len(data), 3):
                s.sendall(data[i : i + 3])
                time.sleep(0.01)
        s.sendall(b"X\x00\x00\x00\x04")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"R\x00\x00\x00\x08\x00\x00\x00\x00")
    assert answer.count(b"Z\x00\x00\x00\x05I") == 2  # after the start-up and the query
    assert b"D\x00\x00\x00\x0b\x00\x01\x00\x00\x00\x011" in answer  # the row, in text
    assert b"E\x00" not in answer
