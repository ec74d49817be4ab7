"""Looking inside from psql (issue 27): string functions, ``->``/``->>`` over ``::json``,
intervals from timestamp arithmetic, ``date_trunc``, ``extract``, ``age``; what is not
offered is refused by name (42883 lists what is)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.grammar.errors import FeatureNotSupported, LimitExceeded, QueueError
from cubequeue.grammar.results import Value
from cubequeue.server.pgtypes import oids
from cubequeue.server.pgtypes.interval import Interval
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.errors import UndefinedFunction
from cubequeue.server.sql.json_values import check_json, member, to_jsonb
from cubequeue.server.sql.strings import MAX_TEXT_RESULT
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
PAYLOAD = '{"sql": ["SELECT 1", 2], "n": 1.50, "s": "x\\u00e9", "z": null}'


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore(FakeClock(T0))
    store.execute(parse(f"QUEUE ADD PRIORITY 1 'p:a' $${PAYLOAD}$$"), None)
    store.execute(parse("QUEUE ADD 'p:b' 'plain text'"), None)
    return store


def run(store: MemoryStore, sql: str, tz: str = "UTC") -> tuple[list[tuple[Value, ...]], tuple[int, ...]]:
    session = PlainSession(server_version="15", user="u")
    session.set("TimeZone", tz)
    out = run_plain(sql, session, store)
    assert out.result is not None and out.type_oids is not None
    return [tuple(r) for r in out.result.rows], out.type_oids


def one(store: MemoryStore, sql: str, tz: str = "UTC") -> Any:
    rows, _oids = run(store, sql, tz)
    (row,) = rows
    return row[0] if len(row) == 1 else row


def later(store: MemoryStore, ms: int) -> MemoryStore:
    clock = store.clock
    assert isinstance(clock, FakeClock)
    clock.advance(ms)
    return store


# -- strings -------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "expected"), [
    ("substr(value, 1, 8)", "plain te"),
    ("substring(value FROM 1 FOR 5)", "plain"),
    ("substring(value, 7)", "text"),
    ("substr(value, 0, 3)", "pl"),  # a start before 1 shortens the result, as PostgreSQL
    ("substr(value, -5, 3)", ""),
    ("left(value, 3)", "pla"),
    ("left(value, -5)", "plain"),
    ("right(value, 4)", "text"),
    ("right(value, -6)", "text"),
    ("right('abc', 5)", "abc"),  # longer than the string: all of it
    ("length(value)", 10),
    ("char_length(value)", 10),
    ("octet_length('é')", 2),
    ("upper(left(value, 5))", "PLAIN"),
    ("position('t' IN value)", 7),
    ("strpos(value, 'zz')", 0),
    ("replace(value, 'text', 'words')", "plain words"),
    ("replace(value, '', 'x')", "plain text"),
    ("trim(BOTH 'pt' FROM value)", "lain tex"),
    ("trim(LEADING FROM '  x  ')", "x  "),
    ("btrim('  x  ')", "x"),
    ("rtrim('x..', '.')", "x"),
    ("concat(id, '-', priority, NULL)", "b-0"),
    ("concat_ws('/', prefix, NULL, id)", "p/b"),
    ("id || ':' || priority", "b:0"),
    ("split_part('a,b,c', ',', 2)", "b"),
    ("split_part('a,b,c', ',', -1)", "c"),
    ("split_part('a,b,c', ',', 9)", ""),
    ("starts_with(value, 'plain')", True),
    ("reverse(id)", "b"),
    ("substr(NULL, 1, 2)", None),
])
def test_string_functions(store: MemoryStore, expr: str, expected: Value) -> None:
    assert one(store, f"SELECT {expr} FROM system.queue WHERE id = 'b'") == expected


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("SELECT substr(value, 1, -1) FROM system.queue", QueueError, "negative substring length"),
    ("SELECT split_part(value, ',', 0) FROM system.queue", QueueError, "must not be zero"),
    ("SELECT substring(value FROM 'p.a') FROM system.queue", FeatureNotSupported,
     "regular expression"),
    ("SELECT substr(priority, 1, 2) FROM system.queue", UndefinedFunction,
     "(bigint, integer, integer) does not exist"),
])
def test_string_function_errors(store: MemoryStore, sql: str, error: type[QueueError],
                                words: str) -> None:
    with pytest.raises(error) as e:
        run(store, sql)
    assert words in e.value.message


def test_replace_that_would_grow_past_the_bound_is_refused(store: MemoryStore) -> None:
    big = "x" * 4097  # 4,097 × 4,097 characters: past the bound, refused before it is built
    with pytest.raises(LimitExceeded) as e:
        run(store, f"SELECT replace('{big}', 'x', '{big}')")
    assert str(MAX_TEXT_RESULT) in e.value.message
    assert len(one(store, f"SELECT replace('{big}', 'x', 'yy')")) == 8194


# -- JSON ----------------------------------------------------------------------------


def test_json_operators(store: MemoryStore) -> None:
    where = " FROM system.queue WHERE id = 'a'"
    assert one(store, "SELECT value::json->>'sql'" + where) == '["SELECT 1", 2]'
    assert one(store, "SELECT value::json->'sql'->>0" + where) == "SELECT 1"
    assert one(store, "SELECT value::json->'sql'->>-1" + where) == "2"
    assert one(store, "SELECT value::json->>'s'" + where) == "xé"
    assert one(store, "SELECT value::json->>'z'" + where) is None
    assert one(store, "SELECT value::json->'z'" + where) == "null"
    assert one(store, "SELECT value::json->'n'" + where) == "1.50"
    assert one(store, "SELECT value::json->>'missing'" + where) is None
    assert one(store, "SELECT value::json->'sql'->>'key'" + where) is None
    assert one(store, "SELECT value::jsonb->'sql'" + where) == '["SELECT 1", 2]'
    rows, types = run(store, "SELECT value::json, value::jsonb, value::json->'n', "
                             "value::jsonb->'n', value::json->>'n'" + where)
    assert types == (oids.JSON, oids.JSONB, oids.JSON, oids.JSONB, oids.TEXT)
    assert rows[0][1] == '{"n": 1.50, "s": "xé", "z": null, "sql": ["SELECT 1", 2]}'
    assert one(store, "SELECT count(*) FROM system.queue "
                      "WHERE id = 'a' AND value::json->'sql'->>0 LIKE 'SELECT%'") == 1


def test_json_errors(store: MemoryStore) -> None:
    with pytest.raises(QueueError) as e:  # 'plain text' is not JSON: 22P02, as PostgreSQL
        run(store, "SELECT value::json->>'a' FROM system.queue")
    assert e.value.sqlstate == "22P02" and e.value.message == "invalid input syntax for type json"
    with pytest.raises(UndefinedFunction) as e2:
        run(store, "SELECT value->>'a' FROM system.queue")
    assert e2.value.message == "operator does not exist: text ->> unknown"
    with pytest.raises(QueueError) as e3:
        check_json("[" * 100_000 + "]" * 100_000)
    assert e3.value.sqlstate == "54001"
    deep = "[" * 900 + "]" * 900  # what the decoder reads, jsonb prints (not a Python error)
    assert to_jsonb(deep) == deep
    assert one(store, f"SELECT '{deep}'::jsonb->0->0->>0") == "[" * 897 + "]" * 897


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(deadline=None, max_examples=300)
@given(doc=st.dictionaries(st.text(max_size=5), json_values, max_size=6),
       key=st.text(max_size=5), indent=st.sampled_from([None, 1]))
def test_object_members_agree_with_json_loads(doc: dict[str, Any], key: str,
                                              indent: int | None) -> None:
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    assert check_json(text) == text
    got = member(text, key, as_text=False)
    if key not in doc:
        assert got is None
        return
    assert got is not None and json.loads(got) == doc[key]
    as_text = member(text, key, as_text=True)
    value = doc[key]
    if value is None:
        assert as_text is None
    elif isinstance(value, str):
        assert as_text == value
    else:
        assert as_text is not None and json.loads(as_text) == value
    normal = to_jsonb(text)
    assert json.loads(normal) == doc
    jsonb_member = member(normal, key, as_text=False)
    assert jsonb_member is not None and json.loads(jsonb_member) == value


@settings(deadline=None, max_examples=200)
@given(doc=st.lists(json_values, max_size=6), index=st.integers(-8, 8))
def test_array_elements_agree_with_json_loads(doc: list[Any], index: int) -> None:
    text = json.dumps(doc)
    got = member(text, index, as_text=False)
    if -len(doc) <= index < len(doc):
        assert got is not None and json.loads(got) == doc[index]
    else:
        assert got is None
    assert member(text, "0", as_text=False) is None  # a key of an array: NULL


# -- intervals and times -------------------------------------------------------------


def test_now_minus_created_is_an_interval(store: MemoryStore) -> None:
    later(store, 90_500)
    rows, types = run(store, "SELECT now() - created, age(now(), created) FROM system.queue "
                             "WHERE id = 'a'")
    assert types == (oids.INTERVAL, oids.INTERVAL)
    assert [str(v) for v in rows[0]] == ["00:01:30.5", "00:01:30.5"]
    later(store, 3_600_000)
    assert str(one(store, "SELECT now() - created FROM system.queue WHERE id = 'a'")) == \
        "01:01:30.5"
    assert str(one(store, "SELECT created - now() FROM system.queue WHERE id = 'a'")) == \
        "-01:01:30.5"
    assert str(one(store, "SELECT timestamptz '2024-01-02 02:00:00+00' - "
                          "timestamptz '2024-01-01 00:00:00+00'")) == "1 day 02:00:00"
    assert str(one(store, "SELECT timestamptz '2024-01-01 00:00:00+00' - "
                          "timestamptz '2024-01-02 02:00:00+00'")) == "-1 days -02:00:00"


def test_interval_comparisons_and_arithmetic(store: MemoryStore) -> None:
    later(store, 90_000)
    assert one(store, "SELECT count(*) FROM system.queue "
                      "WHERE now() - created > interval '1 minute'") == 2
    assert one(store, "SELECT count(*) FROM system.queue "
                      "WHERE now() - created > interval '00:01:30.001'") == 0
    assert one(store, "SELECT count(*) FROM system.queue WHERE created < now() - '1 min'") == 2
    assert one(store, "SELECT interval '1 day' = interval '24 hours'") is True
    assert str(one(store, "SELECT interval '1 day 02:00:00'")) == "1 day 02:00:00"
    assert str(one(store, "SELECT interval '36 hours'")) == "36:00:00"
    assert str(one(store, "SELECT interval '1.5 months' * 2")) == "2 mons 30 days"
    assert str(one(store, "SELECT -interval '1 mon 2 days 03:00:00'")) == \
        "-1 mons -2 days -03:00:00"
    assert str(one(store, "SELECT interval '1 hour' + interval '30 min' - interval '1 day'")) \
        == "-1 days +01:30:00"
    assert one(store, "SELECT (interval '90 s')::text") == "00:01:30"
    assert one(store, "SELECT timestamptz '2024-01-31 10:00:00+00' + interval '1 month'") == \
        one(store, "SELECT timestamptz '2024-02-29 10:00:00+00'")
    rows, _ = run(store, "SELECT id FROM system.queue ORDER BY now() - created DESC, id")
    assert rows == [("a",), ("b",)]


def test_date_trunc_extract_and_age(store: MemoryStore) -> None:
    where = " FROM system.queue WHERE id = 'a'"
    assert one(store, "SELECT date_trunc('hour', created)" + where) == T0 - 13 * 60_000 - 20_000
    assert one(store, "SELECT date_trunc('day', created)" + where) == T0 - 80_000_000
    # in Berlin it is already the 14th, 23:13: the day starts an hour earlier in UTC
    assert one(store, "SELECT date_trunc('day', created)" + where, "Europe/Berlin") == \
        T0 - 80_000_000 - 3_600_000
    assert one(store, "SELECT date_trunc('week', created)" + where) == 1_699_833_600_000
    assert one(store, "SELECT date_trunc('day', created, 'Europe/Berlin')" + where) == \
        T0 - 80_000_000 - 3_600_000
    with pytest.raises(QueueError) as zone_error:
        run(store, "SELECT date_trunc('day', created, 'Mars/Base')" + where)
    assert zone_error.value.message == 'time zone "Mars/Base" not recognized'
    assert one(store, "SELECT extract(hour FROM created)" + where) == Decimal(22)
    assert str(one(store, "SELECT extract(epoch FROM created)" + where)) == "1700000000.000000"
    assert str(one(store, "SELECT extract(second FROM created)" + where)) == "20.000000"
    assert one(store, "SELECT extract(dow FROM created)" + where) == 2
    later(store, 90_500)
    rows, types = run(store, "SELECT extract(epoch FROM now() - created)" + where)
    assert types == (oids.NUMERIC,) and str(rows[0][0]) == "90.500000"
    assert one(store, "SELECT count(*) FROM system.queue WHERE "
                      "extract(epoch FROM now() - created) > 90") == 2
    assert one(store, "SELECT extract(epoch FROM now() - created)::int8" + where) == 91
    assert str(one(store, "SELECT age(created)" + where)) == "-22:13:20"
    assert str(one(store, "SELECT age(timestamptz '2024-03-01', timestamptz '2024-01-15')")) \
        == "1 mon 17 days"  # 14 days short of March 15: borrowed from January
    with pytest.raises(QueueError) as e:
        run(store, "SELECT date_trunc('fortnight', created)" + where)
    assert e.value.message == 'unit "fortnight" not recognized for type timestamp with time zone'


@pytest.mark.parametrize("sql", ["SELECT md5(value) FROM system.queue",
                                 "SELECT nope(1)", "SELECT initcap(id) FROM system.queue"])
def test_unknown_functions_are_42883_listing_the_supported(store: MemoryStore, sql: str) -> None:
    with pytest.raises(UndefinedFunction) as e:
        run(store, sql)
    assert e.value.sqlstate == "42883" and e.value.message.endswith("does not exist")
    hint = e.value.hint or ""
    for name in ("substr", "left", "split_part", "date_trunc", "extract", "age", "->>"):
        assert name in hint


def test_interval_value_is_an_int_with_fields() -> None:
    iv = Interval(1, 2, 3)
    assert int(iv) == (30 + 2) * 86_400_000 + 3 and str(iv) == "1 mon 2 days 00:00:00.003"
    assert Interval(0, 1, 0) == Interval(0, 0, 86_400_000)  # PostgreSQL's span equality


@pytest.mark.parametrize("sql", [
    "SELECT interval '2000000000 days' * 10",  # days past int32, as PostgreSQL keeps them
    "SELECT now() + interval '80000000 hours'",  # past year 9999
    "SELECT interval '99999999999999999999 days'",
])
def test_out_of_range_is_an_error_not_a_crash(store: MemoryStore, sql: str) -> None:
    with pytest.raises(QueueError) as e:
        run(store, sql)
    assert e.value.sqlstate in ("22008", "22003")


def test_columns_are_named_as_postgresql_names_them(store: MemoryStore) -> None:
    session = PlainSession(server_version="15", user="u")
    out = run_plain("SELECT substr(value, 1, 2), substring(value, 1, 2), strpos(value, 'a'), "
                    "position('a' IN value), char_length(value), left(value, 1), "
                    "ltrim(value), date_part('hour', created), extract(hour FROM created), "
                    "date_trunc('hour', created), age(created), now() - created "
                    "FROM system.queue", session, store)
    assert out.result is not None
    assert [c.name for c in out.result.columns] == [
        "substr", "substring", "strpos", "position", "char_length", "left", "ltrim",
        "date_part", "extract", "date_trunc", "age", "?column?"]


def test_to_char_formats_the_common_patterns(store: MemoryStore) -> None:
    where = " FROM system.queue WHERE id = 'a'"
    assert one(store, "SELECT to_char(created, 'YYYY-MM-DD HH24:MI:SS.MS')" + where) == \
        "2023-11-14 22:13:20.000"
    assert one(store, "SELECT to_char(created, 'FMMonth DD, YYYY HH12:MI am')" + where) == \
        "November 14, 2023 10:13 pm"
    assert one(store, "SELECT to_char(created, 'Dy DD Mon \"at\" HH24:MI OF')" + where,
               "Asia/Kolkata") == "Wed 15 Nov at 03:43 +05:30"
    assert one(store, "SELECT to_char(created, 'Day|')" + where) == "Tuesday  |"


@pytest.mark.parametrize(("fmt", "error"), [
    ("YYYY-MM-DDTHH24", FeatureNotSupported),  # DDTH: PostgreSQL's ordinal suffix
    ("HH24 TZ", FeatureNotSupported),
    ("Y" * 1001, LimitExceeded),
])
def test_to_char_refuses_what_it_does_not_format(store: MemoryStore, fmt: str,
                                                 error: type[QueueError]) -> None:
    with pytest.raises(error) as e:
        run(store, f"SELECT to_char(created, '{fmt}') FROM system.queue")
    if error is FeatureNotSupported:
        assert "HH24" in (e.value.hint or "")
