"""The session's TimeZone over the PostgreSQL wire: a text timestamptz column and its
``::text`` read alike, in the session zone, as PostgreSQL renders them; a binary
timestamptz is the instant itself, whatever the zone.

Regression: after ``SET TimeZone = 'Europe/Paris'`` one row used to read
``…08:47:05.556+00`` and ``…09:47:05.556+01``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg.types.string import TextLoader

from cubequeue.server.pgclient import RawClient
from cubequeue.server.pgwire import messages as m

_SELECT = "SELECT created, created::text FROM system.queue WHERE prefix = %s"


def _iso(moment: datetime) -> str:
    """PostgreSQL's ISO text of an aware datetime, written out independently of the
    server's formatter (whole-hour offsets only, which is all these zones use today)."""
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}".rstrip("0")
    offset = moment.utcoffset()
    assert offset is not None
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    assert rest == 0
    return text + f"{'-' if hours < 0 else '+'}{abs(hours):02d}"


@pytest.fixture
def added(server) -> str:
    """The prefix of one new queue item."""
    prefix = f"tz{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"QUEUE ADD PRIORITY 1 '{prefix}:k1' '{{}}'")
    return prefix


def _instant(server, prefix: str) -> datetime:
    """``created`` in binary: an instant, read with no zone set."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        row = conn.cursor(binary=True).execute(
            "SELECT created FROM system.queue WHERE prefix = %s", (prefix,)
        ).fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


@pytest.mark.parametrize(
    "zone",
    [
        "Europe/Paris",
        "America/New_York",
        "Asia/Kolkata",
        "UTC",
    ],
)
def test_text_column_and_cast_use_the_session_zone(server, added, zone):
    instant = _instant(server, added)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.adapters.register_loader("timestamptz", TextLoader)  # the server's text as is
        conn.execute(f"SET TimeZone = '{zone}'")
        row = conn.execute(_SELECT, (added,)).fetchone()
        prepared = conn.execute(_SELECT, (added,), prepare=True).fetchone()
    assert row is not None
    column, cast = row
    assert column == cast
    assert prepared == row
    if zone == "Asia/Kolkata":  # +05:30: the minutes are printed
        assert column.endswith("+05:30")
    else:
        assert column == _iso(instant.astimezone(ZoneInfo(zone)))


def test_simple_query_uses_the_session_zone(server, added):
    instant = _instant(server, added)
    with RawClient(server.host, server.port) as client:
        client.startup()
        client.query("SET TimeZone = 'Europe/Paris'")
        replies = client.query(
            f"SELECT created, created::text FROM system.queue WHERE prefix = '{added}'"
        )
    rows = [msg.values for msg in replies if isinstance(msg, m.DataRow)]
    expected = _iso(instant.astimezone(ZoneInfo("Europe/Paris"))).encode()
    assert rows == [(expected, expected)]


def test_binary_timestamptz_is_zone_free(server, added):
    instant = _instant(server, added)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        row = conn.cursor(binary=True).execute(
            "SELECT created FROM system.queue WHERE prefix = %s", (added,)
        ).fetchone()
    assert row is not None
    assert row[0] == instant
    assert row[0].astimezone(UTC) == instant.astimezone(UTC)
