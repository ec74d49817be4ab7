"""Reading payloads and ages over the wire (issue 27): psql prints them as PostgreSQL
does, psycopg reads the text forms and asyncpg the binary ones (interval OID 1186, numeric
1700, json 114, jsonb 3802), on a server whose clock is frozen."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import asyncpg
import psycopg
import pytest
from wsclient import WsClient

from cubequeue.server.pytest_plugin import CubequeueServer

PAYLOAD = '{"sql":["SELECT 1",[]],"n":1.50}'
AGES = ("SELECT now() - created AS waited, value::json->'sql'->>0 AS sql, "
        "value::jsonb->'n' AS n, extract(epoch FROM now() - created) AS secs, "
        "substr(value, 1, 8) AS head, interval '1 day 02:00:00' AS iv "
        "FROM system.queue WHERE prefix = 'w'")


@pytest.fixture(scope="module")
def frozen(launcher) -> Iterator[CubequeueServer]:
    server = launcher("--test-clock")
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("SYS CLOCK FREEZE")
        conn.execute(f"QUEUE ADD 'w:a' $${PAYLOAD}$$")
        conn.execute("SYS CLOCK ADVANCE 90500")
    yield server


def test_psycopg_reads_the_text_forms(frozen: CubequeueServer) -> None:
    with psycopg.connect(frozen.dsn, autocommit=True) as conn:
        cur = conn.execute(AGES)
        assert [d.type_code for d in cur.description] == [1186, 25, 3802, 1700, 25, 1186]
        assert cur.fetchall() == [(timedelta(seconds=90.5), "SELECT 1", 1.5,
                                   Decimal("90.500000"), '{"sql":[', timedelta(hours=26))]
        value = conn.execute("SELECT value::json FROM system.queue WHERE prefix = 'w'")
        assert value.fetchone() == ({"sql": ["SELECT 1", []], "n": 1.5},)
        with pytest.raises(psycopg.errors.UndefinedFunction) as e:
            conn.execute("SELECT md5(value) FROM system.queue")
        assert "substr" in (e.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            conn.execute("SELECT 'not json'::json")
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_asyncpg_reads_the_binary_forms(frozen: CubequeueServer) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(frozen.dsn)
        try:
            row = await conn.fetchrow(AGES)
            assert row is not None
            assert dict(row) == {"waited": timedelta(seconds=90.5), "sql": "SELECT 1",
                                 "n": "1.50", "secs": Decimal("90.500000"),
                                 "head": '{"sql":[', "iv": timedelta(days=1, hours=2)}
            months = await conn.fetchval("SELECT interval '1 year 2 mons -3 days'")
            assert months == timedelta(days=365 + 2 * 30 - 3)  # asyncpg: a year 365 days, a month 30
        finally:
            await conn.close()

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_prints_what_postgresql_prints(frozen: CubequeueServer) -> None:
    cmd = ["psql", "-X", "-A", "-t", "-h", frozen.host, "-p", str(frozen.port), "-U", "cube",
           "-d", "cube", "-c", AGES + ";", "-c",
           "SELECT age(timestamptz '2024-03-01', timestamptz '2024-01-15'), "
           "date_trunc('hour', timestamptz '2024-05-06 07:08:09+00'), "
           "interval '-1 day +02:00:00', left('payload', 3) || right('payload', 2)"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PGCONNECT_TIMEOUT": "10", "PGTZ": "UTC"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        '00:01:30.5|SELECT 1|1.50|90.500000|{"sql":[|1 day 02:00:00',
        "1 mon 17 days|2024-05-06 07:00:00+00|-1 days +02:00:00|payad",
    ]


def test_websocket_sends_the_same_text(frozen: CubequeueServer) -> None:
    async def main() -> None:
        async with WsClient(frozen.ws_url) as client:
            rows = await client.rows(
                "SELECT now() - created AS waited, extract(epoch FROM now() - created) AS secs, "
                "value::json->>'n' AS n FROM system.queue WHERE prefix = 'w'")
            assert rows == [{"waited": "00:01:30.5", "secs": "90.500000", "n": "1.50"}]

    asyncio.run(asyncio.wait_for(main(), 30))


def test_interval_parameters_text_and_binary(frozen: CubequeueServer) -> None:
    sql = "SELECT count(*) FROM system.queue WHERE prefix = 'w' AND now() - created > {}"
    with psycopg.connect(frozen.dsn, autocommit=True) as conn:  # a timedelta goes binary
        assert conn.execute(sql.format("%s"), [timedelta(seconds=90)]).fetchone() == (1,)
        assert conn.execute(sql.format("%s"), [timedelta(seconds=91)]).fetchone() == (0,)
        assert conn.execute(sql.format("%s::interval"), ["1 min"]).fetchone() == (1,)

    async def main() -> None:
        conn = await asyncpg.connect(frozen.dsn)
        try:
            assert await conn.fetchval(sql.format("$1"), timedelta(days=1, hours=2)) == 0
            assert await conn.fetchval(sql.format("$1"), timedelta(seconds=90.4994)) == 1  # 90.499 s
        finally:
            await conn.close()

    asyncio.run(asyncio.wait_for(main(), 30))
