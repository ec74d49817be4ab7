"""The Cube Store functions of refresh keys, evaluated in-process on a FakeClock store:
exact values, result types, calendar arithmetic, errors, and a property over the clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.errors import QueueError
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.datetime_functions import add_months, parse_calendar_interval
from cubequeue.server.sql.errors import UndefinedFunction
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def answer(sql: str, now_ms: int = T0) -> tuple[list[tuple[object, ...]], tuple[int, ...] | None]:
    out = run_plain(sql, PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(now_ms)))
    assert out.result is not None
    return list(out.result.rows), out.type_oids


def test_floor_of_integer_division_is_int8_named_by_alias() -> None:
    out = run_plain("SELECT FLOOR((UNIX_TIMESTAMP()) / 10) as refresh_key",
                    PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(T0)))
    assert out.result is not None
    assert [c.name for c in out.result.columns] == ["refresh_key"]
    assert out.result.rows == [(T0 // 10_000,)]
    assert out.type_oids == (20,)


def test_floor_and_ceil_keep_the_integer_type() -> None:
    assert answer("SELECT floor(7 / 2), ceil(-7 / 2), floor(5)") == ([(3, -3, 5)], (23, 23, 23))


def test_unix_timestamp_truncates_milliseconds() -> None:
    assert answer("SELECT UNIX_TIMESTAMP()", T0 + 999) == ([(T0 // 1000,)], (20,))


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT DATE_ADD(CAST('2024-01-31T10:00:00.000' as TIMESTAMP), INTERVAL '1 MONTH')",
     ms("2024-02-29T10:00:00")),
    ("SELECT DATE_ADD(CAST('2024-01-31' as TIMESTAMP), INTERVAL '1 YEAR 2 MONTH')",
     ms("2025-03-31T00:00:00")),
    ("SELECT DATE_SUB(CAST('2024-03-31' as TIMESTAMP), INTERVAL '1 QUARTER')",
     ms("2023-12-31T00:00:00")),
    ("SELECT DATE_ADD(CAST('2024-01-01' as TIMESTAMP), INTERVAL '1 WEEK 2 DAY 3 HOUR')",
     ms("2024-01-10T03:00:00")),
    ("SELECT DATE_ADD(CAST('2024-01-01' as TIMESTAMP), INTERVAL 90 MINUTE)",
     ms("2024-01-01T01:30:00")),
    ("SELECT DATE_SUB(NOW(), INTERVAL '1 DAY')", T0 - DAY_MS),
    ("SELECT CONVERT_TZ(NOW(), '+05:30')", T0 + 5 * 3_600_000 + 1_800_000),
    ("SELECT CONVERT_TZ(NOW(), '+00:00', '-02:00')", T0 - 2 * 3_600_000),
    ("SELECT TO_TIMESTAMP(86400)", DAY_MS),
    ("SELECT TO_TIMESTAMP('2024-01-01T00:00:00.000')", ms("2024-01-01T00:00:00")),
])
def test_timestamp_functions(sql: str, expected: int) -> None:
    assert answer(sql) == ([(expected,)], (1184,))


def test_case_when_now_before_the_window_end() -> None:
    sql = ("SELECT CASE\n    WHEN NOW() < DATE_ADD(CAST('{}' as TIMESTAMP), INTERVAL '1 DAY') "
           "THEN FLOOR((UNIX_TIMESTAMP()) / 3600) END as refresh_key")
    assert answer(sql.format("2025-12-31T12:00:00.000"))[0] == [(T0 // 3_600_000,)]
    assert answer(sql.format("2025-12-30T12:00:00.000"))[0] == [(None,)]


def test_placeholders_in_cube_style() -> None:
    out = run_plain("SELECT CASE WHEN NOW() < CAST(? as TIMESTAMP) THEN 1 END as refresh_key",
                    PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(T0)),
                    ["2026-01-02T00:00:00.000"])
    assert out.result is not None and out.result.rows == [(1,)]


@pytest.mark.parametrize(("sql", "sqlstate"), [
    ("SELECT CONVERT_TZ(NOW(), 'Mars/Olympus')", "22023"),
    ("SELECT FLOOR('x'::text)", "42883"),
    ("SELECT DATE_ADD(NOW(), INTERVAL 'soon')", "22007"),
    ("SELECT UNIX_TIMESTAMP(1)", "42883"),
    ("SELECT CAST('tomorrow-ish' as TIMESTAMP)", "22007"),
])
def test_bad_input_gets_a_sqlstate(sql: str, sqlstate: str) -> None:
    with pytest.raises(QueueError) as e:
        answer(sql)
    assert e.value.sqlstate == sqlstate


def test_unknown_function_hint_lists_the_cube_store_ones() -> None:
    with pytest.raises(UndefinedFunction) as e:  # 42883, as PostgreSQL (issue 27)
        answer("SELECT nope()")
    assert "unix_timestamp" in (e.value.hint or "")


def test_calendar_interval_parts() -> None:
    assert parse_calendar_interval("1 YEAR 2 MONTH") == (14, 0)
    assert parse_calendar_interval("2 DAY 3 HOUR") == (0, 2 * DAY_MS + 3 * 3_600_000)
    assert parse_calendar_interval("00:05:00") == (0, 300_000)


def test_add_months_clamps_to_the_last_day() -> None:
    assert add_months(ms("2023-01-31T00:00:00"), 1, UTC) == ms("2023-02-28T00:00:00")
    assert add_months(ms("2024-03-31T00:00:00"), -13, UTC) == ms("2023-02-28T00:00:00")


@settings(deadline=None, max_examples=200)
@given(now_ms=st.integers(0, 4_102_444_800_000), utc_offset=st.integers(-50_400, 50_400),
       day_offset=st.integers(0, 604_800), interval=st.integers(1, 2_419_200))
def test_cron_refresh_key_matches_integer_arithmetic(now_ms: int, utc_offset: int,
                                                     day_offset: int, interval: int) -> None:
    sql = (f"SELECT FLOOR(({utc_offset} + UNIX_TIMESTAMP() - {day_offset}) / {interval}) "
           "as refresh_key")
    a = utc_offset + now_ms // 1000 - day_offset
    q = abs(a) // interval
    assert answer(sql, now_ms)[0] == [(q if a >= 0 else -q,)]
