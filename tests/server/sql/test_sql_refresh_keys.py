"""The refresh-key SQL Cube generates in Cube Store's dialect, over both wires.

Every shape comes from Cube's schema compiler (``BaseQuery.everyRefreshKeySql``,
``incrementalRefreshKey``, ``CubeStoreQuery``'s ``unixTimestampSql``/``timeStampCast``/
``convertTz``/``addInterval``, 0.35 and 1.x). The server runs with ``--test-clock`` and
a frozen clock; each expected value is computed from the server's own ``SYS CLOCK``
reading, and ``SYS CLOCK ADVANCE`` must move the keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from wsclient import WsClient, rows

from cubequeue.server.pytest_plugin import CubequeueServer

OID_INT8 = 20
HOUR = 3600


@pytest.fixture(scope="module")
def clocked(launcher: Callable[..., CubequeueServer]) -> Iterator[CubequeueServer]:
    """A server of this module's own, its test clock frozen (the tests move it)."""
    server = launcher("--test-clock")
    server.query("SYS CLOCK FREEZE")
    yield server


def now_s(server: CubequeueServer) -> int:
    """The server clock in whole seconds, read from ``SYS CLOCK`` (not from the SQL under test)."""
    ((now, _offset, frozen),) = server.query("SYS CLOCK")
    assert frozen in ("t", "true")
    assert now is not None
    return int(datetime.fromisoformat(now).timestamp()) if not now.isdigit() else int(now) // 1000


def iso(seconds: int) -> str:
    """A timestamp as Cube's ``timeStampCast`` parameter looks (``YYYY-MM-DDTHH:mm:ss.SSS``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.000")


def trunc_div(a: int, b: int) -> int:
    """Integer division as Cube Store and PostgreSQL do it (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# (id, SQL template given now in seconds, expected value given now in seconds)
Shape = tuple[str, Callable[[int], str], Callable[[int], int | None]]
SHAPES: list[Shape] = [
    ("every-10s", lambda n: "SELECT FLOOR((UNIX_TIMESTAMP()) / 10) as refresh_key",
     lambda n: n // 10),
    ("every-1h", lambda n: "SELECT FLOOR((UNIX_TIMESTAMP()) / 3600) as refresh_key",
     lambda n: n // HOUR),
    ("every-day-tz-offset", lambda n: "SELECT FLOOR((3600 + UNIX_TIMESTAMP()) / 86400) as refresh_key",
     lambda n: (HOUR + n) // 86400),
    ("every-day-negative-tz", lambda n: "SELECT FLOOR((-18000 + UNIX_TIMESTAMP()) / 86400) as refresh_key",
     lambda n: trunc_div(n - 18000, 86400)),
    ("cron-0-8-daily", lambda n: "SELECT FLOOR((0 + UNIX_TIMESTAMP() - 28800) / 86400) as refresh_key",
     lambda n: trunc_div(n - 28800, 86400)),
    ("cron-negative-offsets",
     lambda n: "SELECT FLOOR((-25200 + UNIX_TIMESTAMP() - 345600) / 604800) as refresh_key",
     lambda n: trunc_div(-25200 + n - 345600, 604800)),
    ("cron-0.35-variant", lambda n: "SELECT FLOOR((7200 + 0 + UNIX_TIMESTAMP() - 0) / 3600) as refresh_key",
     lambda n: (7200 + n) // HOUR),
    ("incremental-open-window",
     lambda n: "SELECT CASE\n    WHEN NOW() < DATE_ADD(CAST('" + iso(n - HOUR) + "' as TIMESTAMP), "
     "INTERVAL '1 DAY') THEN FLOOR((UNIX_TIMESTAMP()) / 3600) END as refresh_key",
     lambda n: n // HOUR),
    ("incremental-closed-window",
     lambda n: "SELECT CASE\n    WHEN NOW() < DATE_ADD(CAST('" + iso(n - 2 * 86400) + "' as TIMESTAMP), "
     "INTERVAL '1 DAY') THEN FLOOR((UNIX_TIMESTAMP()) / 3600) END as refresh_key",
     lambda n: None),
    ("incremental-no-window",
     lambda n: "SELECT CASE\n    WHEN NOW() < CAST('" + iso(n + 60) + "' as TIMESTAMP) "
     "THEN FLOOR((UNIX_TIMESTAMP()) / 10) END as refresh_key",
     lambda n: n // 10),
    ("date-sub-month-before",
     lambda n: "SELECT CASE WHEN DATE_SUB(NOW(), INTERVAL '1 MONTH') < CAST('" + iso(n - 20 * 86400)
     + "' as TIMESTAMP) THEN 1 ELSE 0 END as refresh_key",
     lambda n: 1),
    ("date-sub-month-after",
     lambda n: "SELECT CASE WHEN DATE_SUB(NOW(), INTERVAL '1 MONTH') < CAST('" + iso(n - 40 * 86400)
     + "' as TIMESTAMP) THEN 1 ELSE 0 END as refresh_key",
     lambda n: 0),
    ("convert-tz", lambda n: "SELECT UNIX_TIMESTAMP(CONVERT_TZ(NOW(), '+03:00')) - UNIX_TIMESTAMP() "
     "as refresh_key", lambda n: 3 * HOUR),
    ("convert-tz-negative", lambda n: "SELECT UNIX_TIMESTAMP(CONVERT_TZ(NOW(), '-05:30')) as refresh_key",
     lambda n: n - 5 * HOUR - 1800),
    ("now", lambda n: "SELECT UNIX_TIMESTAMP(NOW()) as refresh_key", lambda n: n),
]
IDS = [s[0] for s in SHAPES]


def ws_rows(server: CubequeueServer, sql: str) -> list[dict[str, str | None]]:
    async def main() -> list[dict[str, str | None]]:
        async with WsClient(server.ws_url) as client:
            return rows(await client.query(sql))

    return asyncio.run(asyncio.wait_for(main(), 30))


def text(value: int | None) -> str | None:
    return None if value is None else str(value)


@pytest.mark.parametrize(("name", "sql", "expected"), SHAPES, ids=IDS)
def test_pg_wire_text(clocked: CubequeueServer, name: str, sql: Callable[[int], str],
                      expected: Callable[[int], int | None]) -> None:
    n = now_s(clocked)
    assert clocked.query(sql(n)) == [(text(expected(n)),)]


@pytest.mark.parametrize(("name", "sql", "expected"), SHAPES, ids=IDS)
def test_websocket(clocked: CubequeueServer, name: str, sql: Callable[[int], str],
                   expected: Callable[[int], int | None]) -> None:
    n = now_s(clocked)
    assert ws_rows(clocked, sql(n)) == [{"refresh_key": text(expected(n))}]


def test_column_is_named_by_alias_and_typed_int8(clocked: CubequeueServer) -> None:
    n = now_s(clocked)
    with psycopg.connect(clocked.dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT FLOOR((3600 + UNIX_TIMESTAMP()) / 86400) as refresh_key")
        assert cur.description is not None
        (column,) = cur.description
        assert (column.name, column.type_code) == ("refresh_key", OID_INT8)
        assert cur.fetchall() == [((HOUR + n) // 86400,)]


def test_clock_advance_moves_the_keys_on_both_wires(clocked: CubequeueServer) -> None:
    sql = "SELECT FLOOR((UNIX_TIMESTAMP()) / 10) as refresh_key"
    before = now_s(clocked)
    clocked.advance(10_000)
    after = now_s(clocked)
    assert after == before + 10
    assert clocked.query(sql) == [(str(after // 10),)]
    assert ws_rows(clocked, sql) == [{"refresh_key": str(after // 10)}]
    assert after // 10 == before // 10 + 1


def test_incremental_window_closes_when_the_clock_passes_it(clocked: CubequeueServer) -> None:
    n = now_s(clocked)
    sql = ("SELECT CASE WHEN NOW() < DATE_ADD(CAST('" + iso(n) + "' as TIMESTAMP), "
           "INTERVAL '1 HOUR') THEN FLOOR((UNIX_TIMESTAMP()) / 10) END as refresh_key")
    assert clocked.query(sql) == [(str(n // 10),)]
    clocked.advance(HOUR * 1000)
    assert clocked.query(sql) == [(None,)]
    assert ws_rows(clocked, sql) == [{"refresh_key": None}]


def test_now_is_the_store_clock(clocked: CubequeueServer) -> None:
    n = now_s(clocked)
    with psycopg.connect(clocked.dsn, autocommit=True) as conn:
        row: Any = conn.execute("SELECT NOW() AS n, CAST(NOW() AS TIMESTAMP) AS t").fetchone()
    assert row is not None
    assert int(row[0].timestamp()) == n
    assert int(row[1].timestamp()) == n
