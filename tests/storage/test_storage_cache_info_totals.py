"""``SYS CACHESTORE INFO``'s cache rows come from sizes kept as entries change
(storage/cache.py's SizeTally), not from a walk of every entry: the rows equal the walk's
after any sequence of steps (the walk is kept here as the reference), and INFO does not
iterate the entries."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
    Command,
    SysCachestore,
)
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.cache import CacheStore
from cubequeue.storage.cachestore_info import InfoRow, table_rows
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.record_kinds import CACHE_PUT, ITEM_PUT, PREFIX, RESULT_PUT
from cubequeue.storage.store import MemoryStore

START = 1_700_000_000_000


def _utf8(*texts: str) -> int:
    """The reference's byte measure: every text field encoded."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def walk_info_rows(cache: CacheStore, now: int) -> list[InfoRow]:
    """The reference: every entry looked at, as INFO used to do."""
    entries = cache._entries.values()  # the state under test
    return table_rows("CacheItems", ((_utf8(e.path, e.value),
                                      e.expire is not None and e.expire <= now)
                                     for e in entries))


def cache_of(store: MemoryStore) -> CacheStore:
    return store._cache  # the state under test


PATHS = st.sampled_from(["a:1", "a:2", "a:3", "b:1", "b:é", "c", "a:b:1", "日:本", "n"])
VALUES = st.sampled_from(["v", "", "ü" * 3, "x" * 40, "日本語", "41", "-7", "9"])
TTLS = st.sampled_from([None, None, 0, 1, 2, 60, 3600])


class CacheInfoVsWalk(RuleBasedStateMachine):
    """Random CACHE steps under small limits (so writes evict by keys and by bytes) and
    clock jumps (so entries expire unswept until the next step); INFO's cache rows equal
    the walk's after each."""

    @initialize(max_keys=st.sampled_from([2, 4, 100]), max_bytes=st.sampled_from([30, 80, 10**6]))
    def setup(self, max_keys: int, max_bytes: int) -> None:
        self.clock = FakeClock(START)
        self.limits = Limits(cache_max_keys=max_keys, cache_max_bytes=max_bytes)
        self.store = MemoryStore(self.clock, self.limits)

    def run(self, cmd: Command) -> None:
        with contextlib.suppress(QueueError):  # INCR on a non-integer
            self.store.execute(cmd)

    @rule(path=PATHS, value=VALUES, ttl=TTLS, nx=st.booleans())
    def set(self, path: str, value: str, ttl: int | None, nx: bool) -> None:
        self.run(CacheSet(key=path, value=value, ttl=ttl, nx=nx))

    @rule(path=PATHS)
    def incr(self, path: str) -> None:
        self.run(CacheIncr(key=path))

    @rule(path=PATHS)
    def get(self, path: str) -> None:
        self.run(CacheGet(key=path))

    @rule(path=PATHS)
    def remove(self, path: str) -> None:
        self.run(CacheRemove(key=path))

    @rule(prefix=st.sampled_from(["a", "b", "", "a:b", "日", "a:*"]))
    def purge(self, prefix: str) -> None:
        self.run(CachePurge(prefix=prefix))

    @rule()
    def truncate(self) -> None:
        self.run(CacheTruncate())

    @rule(ms=st.sampled_from([1, 999, 1000, 2000, 60_000, 3_600_000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def info(self) -> None:
        """The store's INFO step (which sweeps first)."""
        now = self.clock()
        rows = self.store.cachestore_info(now)[:7]
        assert rows == walk_info_rows(cache_of(self.store), now)

    @precondition(lambda self: not self.store.has_deferred)
    @rule()
    def recover(self) -> None:
        """Restart from a snapshot (the durable store's recovery path)."""
        records = [r for part in self.store.snapshot_slices(5) for r in part]
        store = MemoryStore(self.clock, self.limits)
        of = {kind: [r for r in records if r[0] == kind]
              for kind in (ITEM_PUT, RESULT_PUT, CACHE_PUT, PREFIX)}
        store.restore(of[ITEM_PUT], of[RESULT_PUT], of[CACHE_PUT],
                      self.store._queue.peek_next_id(), of[PREFIX])
        self.store = store

    @invariant()
    def rows_equal_the_walk(self) -> None:
        """Without a sweep: entries past their expiry count as expired."""
        cache, now = cache_of(self.store), self.clock()
        assert cache.info_rows() == walk_info_rows(cache, now)
        assert cache.bytes == sum(_utf8(e.path, e.value) for e in cache._entries.values())


CacheInfoVsWalk.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCacheInfoVsWalk = CacheInfoVsWalk.TestCase


# -- the cost does not grow with the cache -----------------------------------------------


class _Refusing(OrderedDict[Any, Any]):
    """Lookups work; iterating (a walk) raises."""

    def _refuse(self, *_: object) -> Iterator[object]:
        raise AssertionError("INFO walked the cache")

    __iter__ = values = items = keys = _refuse  # type: ignore[assignment]


def _cache_rows(n: int, expire: int | None) -> Iterator[tuple[object, ...]]:
    for i in range(1, n + 1):
        yield (CACHE_PUT, i, f"c{i % 7}:k{i}", "v" * (i % 50) + ("é" if i % 3 else ""),
               None if i % 2 else expire)


def _info(store: MemoryStore) -> dict[str, str]:
    result = store.execute(SysCachestore(action="info"))
    assert isinstance(result, ResultSet)
    return {str(r[0]): str(r[1]) for r in result.rows}


def test_info_walks_no_entry() -> None:
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits())
    store.restore([], [], list(_cache_rows(20_000, START + 3_600_000)), 1)
    cache = cache_of(store)
    expected = walk_info_rows(cache, clock())
    cache._entries = _Refusing(cache._entries)
    cache._ttl_rows = _Refusing(cache._ttl_rows)
    info = _info(store)
    assert info["CacheItems.keys_total"] == "20000"
    assert info["CacheItems.expired_keys_total"] == "0"
    assert cache.info_rows() == expected


def test_unswept_expired_entries_are_counted() -> None:
    """Entries past their expiry that no step has swept yet are INFO's expired rows."""
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits())
    store.restore([], [], list(_cache_rows(1_000, START + 10)), 1)
    cache = cache_of(store)
    clock.advance(10)
    rows = {name: value for name, value, _ in cache.info_rows()}
    assert rows["CacheItems.keys_total"] == "1000"
    assert rows["CacheItems.expired_keys_total"] == "500"
    assert cache.info_rows() == walk_info_rows(cache, clock())
    assert _info(store)["CacheItems.keys_total"] == "500"  # the step's sweep
