"""The shape-keyed statement cache, and splitting, against the plain parse."""

from __future__ import annotations

import gc
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cubequeue.grammar import Param, Slot, StatementCache, parse, prepare, split_statements
from cubequeue.grammar.commands import CacheSet, QueueAdd
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.shapes import shape_of


def outcome(run, sql):
    try:
        return ("ok", run(sql))
    except QueueError as exc:
        return ("error", type(exc), exc.message, exc.position)


def test_statements_of_one_shape_share_one_entry() -> None:
    cache = StatementCache()
    a = cache.parse("CACHE SET NX TTL 60 'lock:a' '1'")
    b = cache.parse("CACHE  SET NX TTL 5 /* c */ 'lock:b' '2\\n'")
    assert len(cache) == 1
    assert a == CacheSet(key="lock:a", value="1", nx=True, ttl=60)
    assert b == CacheSet(key="lock:b", value="2\n", nx=True, ttl=5)
    assert shape_of("QUEUE ADD 'a' 'b'")[0] == shape_of("QUEUE ADD 'x' 'y'")[0]
    assert shape_of("QUEUE ADD 'a' 'b'")[0] != shape_of('QUEUE ADD "a" \'b\'')[0]


def test_literal_errors_are_the_uncached_ones() -> None:
    cache = StatementCache()
    cache.parse("QUEUE ADD PRIORITY 1 'p' 'v'")
    for sql in [
        "QUEUE ADD PRIORITY 99999999999999999999 'p' 'v'",
        "QUEUE ADD PRIORITY 1.5 'p' E'\\777'",
        "QUEUE ADD PRIORITY -1 'p' E'\\U00110000'",
    ]:
        assert outcome(cache.parse, sql) == outcome(parse, sql)
        assert outcome(cache.parse, sql)[0] == "error"


def test_prepare_keeps_the_statements_own_placeholders() -> None:
    prepared = prepare("QUEUE ADD PRIORITY 5 $1 '{}'")
    assert prepared.command == QueueAdd(path=Param(1, Slot.TEXT), payload="{}", priority=5)
    assert prepared.params == (Param(1, Slot.TEXT),)
    assert [c.name for c in prepared.columns] == ["id", "added", "pending"]


MB5 = 5 * 1024 * 1024


def test_forty_distinct_five_megabyte_statements_stay_within_the_bound() -> None:
    bound = 1024 * 1024
    cache = StatementCache(max_bytes=bound)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(20):  # quoted payloads: one shape, no payload kept
            assert cache.parse(f"QUEUE ADD 'q:{i}' '{chr(97 + i % 26) * MB5}'").path == f"q:{i}"
        for i in range(20):  # bare words are part of the shape: too large to cache at all
            assert cache.parse(f"CACHE SET k{i} {chr(97 + i % 26) * MB5}").key == f"k{i}"
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert cache.bytes <= bound
    assert held < bound, held
    assert len(cache) == 1


def test_the_byte_bound_drops_the_least_recently_used() -> None:
    cache = StatementCache(max_bytes=64 * 1024)
    for i in range(200):
        cache.parse(f"CACHE SET key{i} 'v'")
    assert cache.bytes <= 64 * 1024
    assert 0 < len(cache) < 200


# ---- properties --------------------------------------------------------------------

VALUES = st.one_of(
    st.text(alphabet="ab;'\\\"$ é/*-\n", max_size=8).map(lambda s: "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"),
    st.text(alphabet="ab;'\\ é/*", max_size=8).map(lambda s: "E'" + s.replace("\\", "\\\\").replace("'", "''") + "'"),
    st.text(alphabet="ab;$' ", max_size=8).filter(lambda s: "$q$" not in s + "$").map(lambda s: f"$q${s}$q$"),
    st.text(alphabet="ab;'", max_size=6).map(lambda s: '"' + s.replace('"', '""') + '"'),
    st.sampled_from(["'\\777'", "E'\\777'", "E'\\U00110000'", "E'\\303\\251'", "'\\x41'", "x", "ttl", "nx"]),
)
NUMBERS = st.one_of(
    st.integers(-(2**65), 2**65).map(str),
    st.sampled_from(["1.5", "1e3", "007", "- 3", "$1", "?"]),
)
BLANKS = st.sampled_from([" ", "  ", "\n", " /* c; /* n; */ */ ", " -- c;\n", "\t"])


@st.composite
def statements(draw: st.DrawFn) -> str:
    v, n, b = (lambda: draw(VALUES)), (lambda: draw(NUMBERS)), (lambda: draw(BLANKS))
    form = draw(st.sampled_from(range(9)))
    parts: list[str]
    if form == 0:
        opts = draw(st.lists(st.sampled_from(["PRIORITY", "ORPHANED", "EXCLUSIVE", "EXTERNAL_ID"]), max_size=3))
        parts = ["QUEUE", "ADD"]
        for opt in opts:
            parts += [opt] if opt == "EXCLUSIVE" else [opt, v() if opt == "EXTERNAL_ID" else n()]
        parts += [v(), v()]
    elif form == 1:
        parts = ["CACHE", "SET", *draw(st.sampled_from([[], ["NX"], ["TTL", n()], ["NX", "TTL", n()], ["TTL", n(), "TTL", n()]])), v(), v()]
    elif form == 2:
        parts = ["QUEUE", "RETRIEVE", "CONCURRENCY", n(), v()]
    elif form == 3:
        parts = ["QUEUE", "ACK", draw(st.one_of(NUMBERS, VALUES)), draw(st.one_of(VALUES, st.just("NULL")))]
    elif form == 4:
        parts = ["QUEUE", "TO_CANCEL", n(), n(), v()]
    elif form == 5:
        parts = ["QUEUE", "RESULT_BLOCKING", n(), draw(st.one_of(NUMBERS, VALUES))]
    elif form == 6:
        parts = ["QUEUE", "GET", draw(st.one_of(NUMBERS, VALUES)), *draw(st.lists(VALUES, max_size=1))]
    elif form == 7:
        parts = ["QUEUE", "ADD_AND_RETRIEVE", v(), v(), n()]
    else:
        parts = ["SYS", "CLOCK", "ADVANCE", n()]
    out = parts[0]
    for part in parts[1:]:
        out += b() + part
    return out


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4))
def test_cached_parse_is_the_uncached_parse(sqls: list[str]) -> None:
    cache = StatementCache()
    for sql in sqls * 3:  # a shape miss, then a shape hit, then an exact-text hit
        assert outcome(cache.parse, sql) == outcome(parse, sql), sql


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4), st.sampled_from([";", " ;", "; -- x\n", ";/* ; */"]))
def test_split_then_parse_is_parsing_each_part(sqls: list[str], separator: str) -> None:
    parts = split_statements(separator.join(sqls))
    # messages and positions count lines from the part's start, which keeps its comments
    assert [outcome(parse, part)[:2] for part in parts] == [outcome(parse, sql.strip())[:2] for sql in sqls]


def test_the_exact_text_map_admits_a_text_on_its_second_sighting() -> None:
    cache = StatementCache()
    sql = "QUEUE RESULT_BLOCKING 5000 'q:k'"
    first = cache.prepare(sql)
    once = [cache.prepare(f"QUEUE ADD 'q:{i}' '{{}}'") for i in range(100)]  # seen once each
    second = cache.prepare(sql)
    third = cache.prepare(sql)
    assert first == second == third and first is not second
    assert third is second  # the second sighting entered the map; the third is its hit
    assert all(cache.prepare(p.sql) is not p for p in once)  # first sightings were not kept
    assert len(cache) == 2  # and every one of them was a shape hit
