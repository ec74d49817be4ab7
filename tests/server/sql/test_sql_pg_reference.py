"""Intervals, times, jsonb and string functions against the reference: a real PostgreSQL (Debian's, started
in a temporary directory), given the same inputs (issue 27). Each property asks
PostgreSQL for a batch of examples in one statement, so a run stays short."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pgcluster import Cluster, find_bin, start_cluster

from cubequeue.grammar.errors import QueueError
from cubequeue.server.pgtypes.interval import Interval, format_interval
from cubequeue.server.sql.intervals import local_time, parse_interval_value, shift, since
from cubequeue.server.sql.json_values import to_jsonb
from cubequeue.server.sql.sqltypes import zone
from cubequeue.server.sql.strings import left, replace, right, split_part, strpos, substr
from cubequeue.server.sql.time_functions import age, date_trunc, extract
from cubequeue.server.sql.to_char import to_char

MS = st.integers(-(10**11), 10**11)  # about ±3 years of milliseconds
#: instants from 1990 to 2060, whole milliseconds
INSTANTS = st.integers(631_152_000_000, 2_840_140_800_000)
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])


@pytest.fixture(scope="module")
def pg() -> Iterator[psycopg.Connection[Any]]:
    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs it)")
    cluster: Cluster = start_cluster()
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("SET IntervalStyle = postgres")
            yield conn
    finally:
        cluster.stop()


def pg_values(pg: psycopg.Connection[Any], exprs: list[str], tz: str = "UTC") -> list[str]:
    """Each expression's text output, in one round trip."""
    pg.execute(f"SET TimeZone = '{tz}'")
    row = pg.execute("SELECT " + ", ".join(f"({e})::text" for e in exprs)).fetchone()
    assert row is not None
    return list(row)


def ts(ms: int) -> str:
    return f"to_timestamp({ms} / 1000.0)"


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(st.integers(-400, 400), st.integers(-400, 400), MS), min_size=1,
                max_size=20))
def test_interval_text_is_postgresqls(pg: psycopg.Connection[Any],
                                      fields: list[tuple[int, int, int]]) -> None:
    exprs = [f"make_interval(months => {m}, days => {d}, secs => {ms} / 1000.0)"
             for m, d, ms in fields]
    assert [format_interval(m, d, ms) for m, d, ms in fields] == pg_values(pg, exprs)


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(INSTANTS, INSTANTS), min_size=1, max_size=20))
def test_timestamp_difference_is_postgresqls(pg: psycopg.Connection[Any],
                                             pairs: list[tuple[int, int]]) -> None:
    exprs = [f"{ts(a)} - {ts(b)}" for a, b in pairs]
    assert [str(since(a, b)) for a, b in pairs] == pg_values(pg, exprs)


_UNIT_WORDS = st.sampled_from(["years", "mons", "months", "weeks", "days", "hours", "min",
                               "secs", "ms", "day", "h"])
INTERVAL_TEXTS = st.one_of(
    st.lists(st.tuples(st.integers(-50, 50), _UNIT_WORDS), min_size=1, max_size=4).map(
        lambda parts: " ".join(f"{n} {u}" for n, u in parts)),
    st.tuples(st.integers(-30, 30), st.integers(0, 99), st.integers(0, 59),
              st.integers(0, 59), st.integers(0, 999)).map(
        lambda t: f"{t[0]} days {t[1]:02d}:{t[2]:02d}:{t[3]:02d}.{t[4]:03d}"),
    st.tuples(st.integers(0, 20), st.sampled_from(["0", "25", "5"]),
              st.sampled_from(["days", "hours", "months", "years", "weeks"])).map(
        lambda t: f"{t[0]}.{t[1]} {t[2]}"),
    st.integers(-100_000, 100_000).map(str),
)


@settings(deadline=None, max_examples=60)
@given(st.lists(INTERVAL_TEXTS, min_size=1, max_size=20))
def test_interval_input_is_read_as_postgresql_reads_it(pg: psycopg.Connection[Any],
                                                       texts: list[str]) -> None:
    for text in texts:  # one at a time: a text PostgreSQL refuses is refused here too
        try:
            (expected,) = pg_values(pg, [f"interval '{text}'"])
        except psycopg.errors.InvalidDatetimeFormat:
            with pytest.raises(QueueError) as e:
                parse_interval_value(text)
            assert e.value.sqlstate == "22007"
            continue
        assert str(parse_interval_value(text)) == expected


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(INSTANTS, INSTANTS), min_size=1, max_size=20), ZONES)
def test_age_is_postgresqls(pg: psycopg.Connection[Any], pairs: list[tuple[int, int]],
                            tz: str) -> None:
    exprs = [f"age({ts(a)}, {ts(b)})" for a, b in pairs]
    assert [str(age(a, b, zone(tz))) for a, b in pairs] == pg_values(pg, exprs, tz)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(INSTANTS, st.integers(-30, 30), st.integers(-40, 40), MS),
                min_size=1, max_size=20), ZONES)
def test_timestamp_plus_interval_is_postgresqls(pg: psycopg.Connection[Any],
                                                cases: list[tuple[int, int, int, int]],
                                                tz: str) -> None:
    exprs = [f"extract(epoch from {ts(t)} + make_interval(months => {m}, days => {d}, "
             f"secs => {ms} / 1000.0)) * 1000" for t, m, d, ms in cases]
    got = [shift(t, Interval(m, d, ms), zone(tz)) for t, m, d, ms in cases]
    assert got == [int(Decimal(v)) for v in pg_values(pg, exprs, tz)]


TRUNC_UNITS = st.sampled_from(["second", "minute", "hour", "day", "week", "month", "quarter",
                               "year", "decade", "century", "millennium"])


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(TRUNC_UNITS, INSTANTS), min_size=1, max_size=20), ZONES)
def test_date_trunc_is_postgresqls(pg: psycopg.Connection[Any],
                                   cases: list[tuple[str, int]], tz: str) -> None:
    exprs = [f"extract(epoch from date_trunc('{u}', {ts(t)})) * 1000" for u, t in cases]
    got = [date_trunc(u, t, zone(tz)) for u, t in cases]
    assert got == [int(Decimal(v)) for v in pg_values(pg, exprs, tz)]


TS_FIELDS = st.sampled_from(["epoch", "second", "milliseconds", "microseconds", "minute",
                             "hour", "day", "month", "year", "quarter", "week", "isoyear",
                             "dow", "isodow", "doy", "decade", "century", "millennium",
                             "timezone", "timezone_hour", "timezone_minute"])
IV_FIELDS = st.sampled_from(["epoch", "second", "milliseconds", "microseconds", "minute",
                             "hour", "day", "month", "year", "quarter", "decade", "century",
                             "millennium"])


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(TS_FIELDS, INSTANTS), min_size=1, max_size=20), ZONES)
def test_extract_from_timestamps_is_postgresqls(pg: psycopg.Connection[Any],
                                                cases: list[tuple[str, int]], tz: str) -> None:
    exprs = [f"extract({f} from {ts(t)})" for f, t in cases]
    got = [str(extract(f, t, False, zone(tz))) for f, t in cases]
    assert got == pg_values(pg, exprs, tz)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(IV_FIELDS, st.integers(-400, 400), st.integers(-400, 400), MS),
                min_size=1, max_size=20))
def test_extract_from_intervals_is_postgresqls(pg: psycopg.Connection[Any],
                                               cases: list[tuple[str, int, int, int]]) -> None:
    exprs = [f"extract({f} from make_interval(months => {m}, days => {d}, "
             f"secs => {ms} / 1000.0))" for f, m, d, ms in cases]
    got = [str(extract(f, Interval(m, d, ms), True, UTC)) for f, m, d, ms in cases]
    assert got == pg_values(pg, exprs)


json_docs = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.sampled_from(["1.50", "1e2", "-0.5", "2.5E-3"]).map(lambda n: ("num", n))
    | st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                              max_size=4), inner, max_size=4),
    max_leaves=15,
)


def _dump(value: Any) -> str:
    """JSON text of a document, numbers written as given (``("num", "1e2")``)."""
    if isinstance(value, tuple):
        return value[1]
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


@settings(deadline=None, max_examples=40)
@given(st.lists(json_docs, min_size=1, max_size=10))
def test_jsonb_normal_form_is_postgresqls(pg: psycopg.Connection[Any], docs: list[Any]) -> None:
    texts = [_dump(d) for d in docs]
    pg.execute("SET TimeZone = 'UTC'")
    placeholders = ", ".join("(%s::jsonb)::text" for _ in texts)
    row = pg.execute("SELECT " + placeholders, texts).fetchone()
    assert row is not None
    assert [to_jsonb(t) for t in texts] == list(row)


TEXTS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
SMALL = st.integers(-15, 15)


@settings(deadline=None, max_examples=60)
@given(s=TEXTS, other=st.text("ab, ", max_size=3), a=SMALL, b=st.integers(0, 15), n=SMALL)
def test_string_functions_are_postgresqls(pg: psycopg.Connection[Any], s: str, other: str,
                                          a: int, b: int, n: int) -> None:
    calls = [
        ("substr(%s, %s, %s)", (s, a, b), substr(s, a, b)),
        ("substr(%s, %s)", (s, a), substr(s, a)),
        ("left(%s, %s)", (s, n), left(s, n)),
        ("right(%s, %s)", (s, n), right(s, n)),
        ("strpos(%s, %s)", (s, other), strpos(s, other)),
        ("replace(%s, %s, 'xy')", (s, other), replace(s, other, "xy")),
        ("btrim(%s, %s)", (s, other), s.strip(other)),
        ("length(%s)", (s,), len(s)),
    ]
    if n:
        calls.append(("split_part(%s, %s, %s)", (s, other, n), split_part(s, other, n)))
    sql = "SELECT " + ", ".join(f"({c[0]})::text" for c in calls)
    params = [p for c in calls for p in c[1]]
    row = pg.execute(sql, params).fetchone()
    assert row is not None
    assert [str(c[2]) for c in calls] == list(row)


PATTERNS = st.sampled_from(["YYYY", "YY", "MM", "DD", "DDD", "D", "Q", "IW", "HH", "HH12",
                            "HH24", "MI", "SS", "MS", "US", "AM", "pm", "A.M.", "p.m.",
                            "Mon", "MON", "mon", "Month", "MONTH", "month", "Dy", "DY", "dy",
                            "Day", "DAY", "day", "OF", "FMDD", "FMMonth", "FMHH12", "hh24",
                            "mi", "yyyy"])
SEPARATORS = st.sampled_from(["-", " ", ":", ".", ", ", "/", '"at"', '" T "', "|"])


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(st.lists(st.tuples(PATTERNS, SEPARATORS), min_size=1, max_size=5)
                          .map(lambda parts: "".join(p + s for p, s in parts)), INSTANTS),
                min_size=1, max_size=10), ZONES)
def test_to_char_is_postgresqls(pg: psycopg.Connection[Any], cases: list[tuple[str, int]],
                                tz: str) -> None:
    exprs = [f"to_char({ts(t)}, '{fmt}')" for fmt, t in cases]
    got = [to_char(local_time(t, zone(tz)), fmt) for fmt, t in cases]
    assert got == pg_values(pg, exprs, tz)
