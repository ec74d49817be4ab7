"""The in-memory store behind the seam: StoreBackend, and its state as records (the
incremental capture of tests/support/state_capture.py)."""

from __future__ import annotations

import pytest
from state_capture import (
    CacheRecord,
    Counters,
    ItemRecord,
    PrefixRecord,
    ResultRecord,
    StateRecord,
    capture_store,
)
from storage_testkit import START, Harness, harness

from cubequeue.grammar.commands import CacheGet, CacheRemove, CacheSet
from cubequeue.storage.interface import StoreBackend
from cubequeue.storage.limits import Limits
from cubequeue.storage.queue_log import Departure


def test_the_store_is_a_store_backend() -> None:
    store = harness().store
    backend: StoreBackend = store  # mypy checks the structure statically
    assert isinstance(backend, StoreBackend)
    assert store.kind == "memory"
    assert store.now_ms() == START


def test_now_ms_follows_the_clock() -> None:
    h = harness()
    h.advance(1234)
    assert h.store.now_ms() == START + 1234


def _filled() -> Harness:
    h = harness(Limits(queue_log_size=10))
    for i in range(1, 8):
        h.add(f"q:{i}", payload=f"p{i}", priority=i)
    h.retrieve("q:7")
    h.merge("q:7", '{"a":1}')
    h.ack("q:6", "done")  # item 6 departs, result 6 stays
    h.store.execute(CacheSet(key="c:a", value="1", ttl=60))
    h.store.execute(CacheSet(key="c:b", value="2"))
    h.store.execute(CacheGet(key="c:a"))  # c:a is now the most recently used
    return h


def _flat(slices: list[list[StateRecord]]) -> list[StateRecord]:
    return [r for part in slices for r in part]


def test_capture_holds_every_row_in_a_fixed_order() -> None:
    h = _filled()
    records = _flat(list(capture_store(h.store, 1000)))
    assert records[0] == Counters(next_item_id=8, next_cache_id=3)
    kinds = [type(r).__name__ for r in records]
    assert kinds == (
        ["Counters", "PrefixRecord"] + ["ItemRecord"] * 6 + ["ResultRecord"]
        + ["CacheRecord"] * 2 + ["Departure"]
    )
    assert records[1] == PrefixRecord("q", 1, None)  # RETRIEVE left its concurrency
    items = [r for r in records if isinstance(r, ItemRecord)]
    assert [i.id for i in items] == [1, 2, 3, 4, 5, 7]
    active = items[-1]
    assert (active.path, active.payload, active.priority) == ("q:7", "p7", 7)
    assert active.activated == START and active.extra == '{"a":1}'
    assert [r for r in records if isinstance(r, ResultRecord)] == [
        ResultRecord(id=6, path="q:6", value="done", expire=START + 60_000, external_id=None,
                     deleted=False)
    ]
    assert [r for r in records if isinstance(r, CacheRecord)] == [
        CacheRecord(2, "c:b", "2", None), CacheRecord(1, "c:a", "1", START + 60_000)
    ]
    assert [(d.id, d.reason) for d in records if isinstance(d, Departure)] == [(6, "acked")]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_slices_have_the_asked_size_and_the_same_records(size: int) -> None:
    h = _filled()
    whole = _flat(list(capture_store(h.store, 1000)))
    slices = list(capture_store(h.store, size))
    assert all(1 <= len(s) <= size for s in slices)
    assert all(len(s) == size for s in slices[:-1])
    assert _flat(slices) == whole


def test_slices_are_built_lazily_and_steps_may_run_between_them() -> None:
    h = _filled()
    slices = capture_store(h.store, 2)
    first = next(slices)  # Counters and the prefix
    h.cancel("q:1")  # leaves before its slice: skipped
    h.heartbeat("q:7")  # changes after the start: its record shows the change
    h.add("q:late")  # created after the start: not included
    h.store.execute(CacheRemove(key="c:b"))
    h.store.execute(CacheSet(key="c:b", value="new"))  # a newer row under an old path
    rest = _flat(list(slices))
    items = [r for r in rest if isinstance(r, ItemRecord)]
    assert [i.id for i in items] == [2, 3, 4, 5, 7]
    assert items[-1].heartbeat == START
    assert [r.path for r in rest if isinstance(r, CacheRecord)] == ["c:a"]
    assert first[0] == Counters(next_item_id=8, next_cache_id=3)


def test_capture_leaves_expired_rows_out() -> None:
    h = _filled()
    h.advance(61_000)  # result 6 and c:a have expired
    records = _flat(list(capture_store(h.store, 100)))
    assert not [r for r in records if isinstance(r, ResultRecord)]
    assert [r.path for r in records if isinstance(r, CacheRecord)] == ["c:b"]


def test_an_empty_store_captures_its_counters_only() -> None:
    assert list(capture_store(harness().store, 10)) == [[Counters(1, 1)]]


def test_a_slice_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="slice_items"):
        capture_store(harness().store, 0)
