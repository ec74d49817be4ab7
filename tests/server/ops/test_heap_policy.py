"""The heap policy (server/heap.py): freeze survivors while the store is large, thaw and
collect once when it is small again."""

from __future__ import annotations

import gc
import weakref

import pytest

from cubequeue.server.heap import HeapPolicy


class RecordingGc:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def collect(self, generation: int = 2) -> int:
        self.calls.append(f"collect({generation})")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")


def test_a_small_store_is_left_to_the_collector() -> None:
    fake = RecordingGc()
    policy = HeapPolicy(fake, freeze_at=100, thaw_at=10)
    assert [policy.tick(rows) for rows in (0, 5, 99, 10)] == [None] * 4
    assert fake.calls == []


def test_a_large_store_freezes_each_tick_after_a_young_collection() -> None:
    fake = RecordingGc()
    policy = HeapPolicy(fake, freeze_at=100, thaw_at=10)
    assert policy.tick(100) == "freeze"
    assert policy.tick(5000) == "freeze"
    assert fake.calls == ["collect(1)", "freeze"] * 2


def test_shrinking_thaws_once_below_the_low_mark_only() -> None:
    fake = RecordingGc()
    policy = HeapPolicy(fake, freeze_at=100, thaw_at=10)
    policy.tick(200)
    fake.calls.clear()
    assert policy.tick(50) is None  # between the marks: stays frozen (hysteresis)
    assert policy.tick(10) == "thaw"
    assert fake.calls == ["unfreeze", "collect(2)", "freeze"]
    assert policy.tick(0) is None  # thawed once, not at every small tick
    assert fake.calls == ["unfreeze", "collect(2)", "freeze"]


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.mark.skipif(not gc.isenabled(), reason="needs the cyclic collector")
def test_with_the_real_collector_survivors_leave_the_generations() -> None:
    before = gc.get_freeze_count()
    rows = [[i] for i in range(60_000)]  # tracked objects, as stored items are
    node = _Node()
    alive = weakref.ref(node)
    policy = HeapPolicy(gc, freeze_at=50_000, thaw_at=10)
    try:
        assert policy.tick(len(rows)) == "freeze"
        assert gc.get_freeze_count() >= before + len(rows)
        del node  # now cyclic garbage, but frozen while alive
        gc.collect()
        assert alive() is not None  # full collections skip frozen objects
        del rows
        assert policy.tick(0) == "thaw"
        assert alive() is None  # the thaw's collection reclaimed it
    finally:
        gc.unfreeze()


def test_a_stream_freezes_at_once_only_while_the_store_is_large() -> None:
    fake = RecordingGc()
    policy = HeapPolicy(fake, freeze_at=100, thaw_at=10)
    policy.after_stream()  # a small store: its streams are small
    assert fake.calls == []
    policy.tick(500)
    fake.calls.clear()
    policy.after_stream()
    assert fake.calls == ["freeze"]  # no collection first: that would walk the new copy
