"""The one timestamp formatter: PostgreSQL's ISO text in a zone, Cube Store's UTC text.

Expected strings are PostgreSQL 15's own output (``SET TimeZone = …; SELECT
'…'::timestamptz``), written out here by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.pgtypes import oids
from cubequeue.server.pgtypes.adapters import dump_value, row_dumper
from cubequeue.server.sql.sqltypes import SqlType, cast_value, parse_timestamp
from cubequeue.server.timestamps import (
    TimestampOutOfRange,
    format_iso_utc,
    format_timestamptz,
    session_zone,
)

PARIS = ZoneInfo("Europe/Paris")
#: 2026-11-30 15:04:05.556 UTC
MS = 1_796_051_045_556


def _ms(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


@pytest.mark.parametrize(
    ("ms", "zone", "text"),
    [
        (MS, "UTC", "2026-11-30 15:04:05.556+00"),
        (MS, "Europe/Paris", "2026-11-30 16:04:05.556+01"),
        (MS - 150 * 86_400_000, "Europe/Paris", "2026-07-03 17:04:05.556+02"),  # summer
        (MS, "America/New_York", "2026-11-30 10:04:05.556-05"),
        (MS, "Asia/Kolkata", "2026-11-30 20:34:05.556+05:30"),
        (MS, "+02", "2026-11-30 17:04:05.556+02"),
        (MS, "-03:30", "2026-11-30 11:34:05.556-03:30"),
        (MS - 556, "UTC", "2026-11-30 15:04:05+00"),  # no fraction: none printed
        (MS - 506, "UTC", "2026-11-30 15:04:05.05+00"),  # trailing zeros trimmed
        (0, "UTC", "1970-01-01 00:00:00+00"),
        (-1, "UTC", "1969-12-31 23:59:59.999+00"),
        # local mean time before 1911: PostgreSQL prints the seconds of the offset
        (_ms(datetime(1900, 1, 1, tzinfo=UTC)), "Europe/Paris", "1900-01-01 00:09:21+00:09:21"),
        (_ms(datetime(999, 1, 1, tzinfo=UTC)), "UTC", "0999-01-01 00:00:00+00"),
    ],
)
def test_postgresql_iso_output(ms: int, zone: str, text: str) -> None:
    assert format_timestamptz(ms, session_zone(zone)) == text


def test_unknown_and_utc_names_are_utc() -> None:
    assert session_zone("Etc/UTC") is UTC
    assert session_zone("utc") is UTC
    assert session_zone("GMT") is UTC
    assert session_zone("No/Such_Zone") is UTC
    assert session_zone("+05:30") == timezone(timedelta(hours=5, minutes=30))


def test_beyond_year_9999_is_22008() -> None:
    with pytest.raises(TimestampOutOfRange) as info:
        format_timestamptz(10**18)
    assert info.value.sqlstate == "22008"
    assert format_iso_utc(10**18) == str(10**18)  # the WebSocket keeps the number


def test_websocket_text_is_utc_with_milliseconds() -> None:
    assert format_iso_utc(MS) == "2026-11-30T15:04:05.556Z"
    assert format_iso_utc(MS - 556) == "2026-11-30T15:04:05.000Z"


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "Asia/Kolkata", "America/Los_Angeles"])
def test_wire_text_and_cast_text_agree(zone: str) -> None:
    """The regression at the unit level: a text timestamptz column and ``::text`` of it."""
    tz = session_zone(zone)
    as_text = cast_value(MS, SqlType.TIMESTAMPTZ, SqlType.TEXT, tz, 0)
    assert isinstance(as_text, str)
    assert dump_value(oids.TIMESTAMPTZ, 0, MS, tz) == as_text.encode()
    dump = row_dumper([oids.TIMESTAMPTZ, oids.TEXT], [0, 0], tz)
    assert dump([MS, as_text]) == (as_text.encode(), as_text.encode())


def test_binary_timestamptz_is_zone_free() -> None:
    utc = dump_value(oids.TIMESTAMPTZ, 1, MS)
    assert dump_value(oids.TIMESTAMPTZ, 1, MS, PARIS) == utc
    assert row_dumper([oids.TIMESTAMPTZ], [1], PARIS)([MS]) == (utc,)


def test_utc_is_the_default_zone() -> None:
    assert dump_value(oids.TIMESTAMPTZ, 0, MS) == b"2026-11-30 15:04:05.556+00"
    assert row_dumper([oids.TIMESTAMPTZ], [0])([MS]) == (b"2026-11-30 15:04:05.556+00",)


_ZONES = st.sampled_from(
    ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "+09"]
)


@settings(deadline=None, max_examples=300)
@given(st.integers(_ms(datetime(1950, 1, 1, tzinfo=UTC)), _ms(datetime(9998, 1, 1, tzinfo=UTC))),
       _ZONES)
def test_formatted_text_reads_back_as_the_same_instant(ms: int, zone: str) -> None:
    """What the formatter writes, plain SQL's timestamptz input reads back, in any zone."""
    tz = session_zone(zone)
    text = format_timestamptz(ms, tz)
    assert parse_timestamp(text, UTC, 0) == ms
    assert parse_timestamp(text, tz, 0) == ms
