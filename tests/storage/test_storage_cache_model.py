"""The CACHE engine against naive models (hypothesis), written from ``docs/dialect.md`` §4 alone.

* ``CacheMachine``: every answer of SET / NX / TTL / GET / KEYS / REMOVE / INCR / PURGE /
  TRUNCATE and clock advances equals a plain-dict model's; eviction is off (huge limits).
* ``test_lru_eviction_model``: with tiny limits, after any sequence keys ≤ max_keys,
  bytes ≤ max_bytes, the most recently used key survives, and the survivors are exactly
  those of an OrderedDict LRU model.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
)
from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.storage.cache import CacheStore
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits

MAX_ENTRY = 8
HUGE = 10**12

prefixes = st.sampled_from(["", "a", "a:b", "b", "ab"])
names = st.sampled_from(["x", "y", "", "z"])
paths = st.one_of(
    st.builds(lambda p, k: f"{p}:{k}", prefixes, names),
    names.filter(bool),
)
values = st.one_of(
    st.sampled_from(["0", "1", "-1", "+3", "9223372036854775807", "abc", "", "é"]),
    st.text(alphabet="0123456789-x€", max_size=10),
)
patterns = st.one_of(
    prefixes,
    prefixes.map(lambda p: p + ":"),
    prefixes.map(lambda p: p + ":*"),
)
ttls = st.one_of(st.none(), st.integers(min_value=0, max_value=5))


@dataclass
class Row:
    id: int
    value: str
    expire: int | None


def model_prefix(path: str) -> str:
    return path.rsplit(":", 1)[0] if ":" in path else ""


def model_pattern(pattern: str) -> str:
    if pattern.endswith(":*"):
        return pattern[:-2]
    if pattern.endswith(":"):
        return pattern[:-1]
    return pattern


def model_i64(text: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(1_000_000)
        limits = Limits(cache_max_entry_bytes=MAX_ENTRY, cache_max_keys=HUGE, cache_max_bytes=HUGE)
        self.cache = CacheStore(self.clock, limits)
        self.rows: dict[str, Row] = {}
        self.next_id = 1

    # model helpers -------------------------------------------------------------

    def live(self) -> dict[str, Row]:
        now = self.clock()
        return {p: r for p, r in self.rows.items() if r.expire is None or r.expire > now}

    def insert(self, path: str, value: str, expire: int | None) -> None:
        self.rows[path] = Row(self.next_id, value, expire)
        self.next_id += 1

    # rules ---------------------------------------------------------------------

    @rule(path=paths, value=values, nx=st.booleans(), ttl=ttls)
    def set(self, path, value, nx, ttl):
        cmd = CacheSet(key=path, value=value, nx=nx, ttl=ttl)
        if len(value.encode()) >= MAX_ENTRY:
            before = self.cache.system_rows().rows
            try:
                self.cache.cache_set(cmd)
            except LimitExceeded:
                assert self.cache.system_rows().rows == before
                return
            raise AssertionError("oversize SET accepted")
        result = self.cache.cache_set(cmd).rows
        self.rows = self.live()
        existing = self.rows.get(path)
        if existing is not None and nx:
            assert result == [(False,)]
            return
        assert result == [(True,)]
        expire = None if ttl is None else self.clock() + ttl * 1000
        if expire is not None and expire <= self.clock():
            self.rows.pop(path, None)
        elif existing is not None:
            existing.value, existing.expire = value, expire
        else:
            self.insert(path, value, expire)

    @rule(path=paths)
    def get(self, path):
        row = self.live().get(path)
        expected = None if row is None else row.value
        assert self.cache.cache_get(CacheGet(key=path)).rows == [(expected,)]

    @rule(pattern=patterns)
    def keys(self, pattern):
        prefix = model_pattern(pattern)
        live = self.live()
        expected = sorted((p for p in live if model_prefix(p) == prefix), key=lambda p: live[p].id)
        assert self.cache.cache_keys(CacheKeys(pattern=pattern)).rows == [(p,) for p in expected]

    @rule(path=paths)
    def remove(self, path):
        self.cache.cache_remove(CacheRemove(key=path))
        self.rows.pop(path, None)

    @rule(path=paths)
    def incr(self, path):
        self.rows = self.live()
        row = self.rows.get(path)
        if row is None:
            assert self.cache.cache_incr(CacheIncr(key=path)).rows == [("1",)]
            self.insert(path, "1", None)
            return
        number = model_i64(row.value)
        if number is None or number == 2**63 - 1:
            try:
                self.cache.cache_incr(CacheIncr(key=path))
            except InvalidTextRepresentation:
                return
            raise AssertionError(f"INCR of {row.value!r} accepted")
        row.value = str(number + 1)
        assert self.cache.cache_incr(CacheIncr(key=path)).rows == [(row.value,)]

    @rule(pattern=patterns)
    def purge(self, pattern):
        prefix = model_pattern(pattern)
        self.rows = self.live()
        doomed = [p for p in self.rows if model_prefix(p) == prefix]
        for path in doomed:
            del self.rows[path]
        assert self.cache.cache_purge(CachePurge(prefix=pattern)).rows == [(len(doomed),)]

    @rule()
    def truncate(self):
        self.cache.cache_truncate(CacheTruncate())
        self.rows.clear()

    @rule(ms=st.sampled_from([1, 999, 1000, 2500, 6000]))
    def advance(self, ms):
        self.clock.advance(ms)

    @rule()
    def sweep(self):
        self.cache.sweep()
        self.rows = self.live()

    # invariants ----------------------------------------------------------------

    @invariant()
    def system_table_matches_live_rows(self):
        live = self.live()
        expected = [
            (
                path.rsplit(":", 1)[1] if ":" in path else path,
                path.rsplit(":", 1)[0] if ":" in path else "",
                row.expire,
                row.value,
            )
            for path, row in sorted(live.items(), key=lambda item: item[1].id)
        ]
        assert self.cache.system_rows().rows == expected
        assert self.cache.keys == len(live)
        assert self.cache.bytes == sum(
            len(p.encode()) + len(r.value.encode()) for p, r in live.items()
        )
        assert self.cache.evictions_total == 0


CacheMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestCacheModel = CacheMachine.TestCase


# ------------------------------------------------------------------ LRU eviction

MAX_KEYS = 3
MAX_BYTES = 20

small_paths = st.sampled_from(["a", "b", "c", "d", "e", "p:a", "p:b"])
small_values = st.text(alphabet="0123456789", min_size=1, max_size=6)  # entry ≤ 9 bytes
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), small_paths, small_values),
        st.tuples(st.just("get"), small_paths, st.just("")),
        st.tuples(st.just("incr"), small_paths, st.just("")),
        st.tuples(st.just("remove"), small_paths, st.just("")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_lru_eviction_model(ops):
    cache = CacheStore(FakeClock(), Limits(cache_max_keys=MAX_KEYS, cache_max_bytes=MAX_BYTES))
    model: OrderedDict[str, str] = OrderedDict()
    evicted = 0

    def evict() -> None:
        nonlocal evicted
        while len(model) > 1 and (
            len(model) > MAX_KEYS or sum(len(p) + len(v) for p, v in model.items()) > MAX_BYTES
        ):
            model.popitem(last=False)
            evicted += 1

    for op, path, value in ops:
        used = None
        if op == "set":
            cache.cache_set(CacheSet(key=path, value=value))
            model[path] = value
            model.move_to_end(path)
            evict()
            used = path
        elif op == "get":
            got = cache.cache_get(CacheGet(key=path)).rows[0][0]
            assert got == model.get(path)
            if path in model:
                model.move_to_end(path)
                used = path
        elif op == "incr":
            current = model.get(path)
            if current is not None and model_i64(current) is None:
                continue  # digits only, but may overflow i64; never here with ≤ 6 digits
            new = "1" if current is None else str(int(current) + 1)
            assert cache.cache_incr(CacheIncr(key=path)).rows == [(new,)]
            model[path] = new
            model.move_to_end(path)
            evict()
            used = path
        else:
            cache.cache_remove(CacheRemove(key=path))
            model.pop(path, None)

        assert cache.keys <= MAX_KEYS
        assert cache.bytes <= MAX_BYTES
        if used is not None:
            assert cache.cache_get(CacheGet(key=used)).rows == [(model[used],)]
        held = sorted((k, p, v) for k, p, _, v in cache.system_rows().rows)
        assert held == sorted(
            (path.rpartition(":")[2], path.rpartition(":")[0], v) for path, v in model.items()
        )
        assert cache.keys == len(model)
        assert cache.evictions_total == evicted
