"""The in-memory store's prefix census (storage/stats.py's PrefixCensus over storage/
prefixes.py's list of states): a walk reads the states by index a slice at a time, with no
copy of the whole, while steps add and drop prefixes between slices. Every prefix that
stays live through the walk is read exactly once, and a dropped one is not read after it
was dropped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.stats import PrefixCensus
from cubequeue.storage.store import MemoryStore


def run(store: MemoryStore, sql: str) -> None:
    store.execute(parse(sql))


def census(store: MemoryStore) -> PrefixCensus:
    prefixes = store.stats().prefixes
    assert isinstance(prefixes, PrefixCensus)
    return prefixes


def test_a_census_counts_without_reading_and_rows_sort_by_name() -> None:
    store = MemoryStore(FakeClock())
    for name in ("b", "a", "c"):
        run(store, f"QUEUE ADD PRIORITY 1 '{name}:1' 'x'")
    rows = census(store)
    assert len(rows) == 3
    assert [r.prefix for r in rows] == ["a", "b", "c"]
    assert rows[0].pending == 1 and rows[0].oldest_pending_ms == 0


@settings(deadline=None, max_examples=200)
@given(initial=st.integers(0, 12),
       steps=st.lists(st.tuples(st.booleans(), st.integers(0, 30)), max_size=30),
       size=st.integers(1, 4))
def test_a_walk_reads_each_lasting_prefix_once(
        initial: int, steps: list[tuple[bool, int]], size: int) -> None:
    store = MemoryStore(FakeClock())
    live = set()
    for i in range(initial):
        run(store, f"QUEUE ADD PRIORITY 1 'p{i}:k' 'x'")
        live.add(f"p{i}")
    lasting = set(live)  # live at the start and never dropped during the walk
    dropped: set[str] = set()
    seen: list[str] = []
    walk = census(store).walk(size, 120_000)
    todo = list(steps)
    for part in walk:
        seen.extend(row[1] for row in part)
        assert not dropped & {row[1] for row in part}, "a dropped prefix was read"
        if todo:  # a step between slices: add a prefix, or drop one
            add, n = todo.pop(0)
            name = f"p{n}"
            if add and name not in live:  # new, or dropped before: a new state either way
                run(store, f"QUEUE ADD PRIORITY 1 '{name}:k' 'x'")
                live.add(name)
                dropped.discard(name)
            elif not add and name in live:
                run(store, f"QUEUE CANCEL '{name}:k'")
                live.discard(name)
                lasting.discard(name)
                dropped.add(name)
    assert all(seen.count(name) == 1 for name in lasting), "a lasting prefix read twice or not"
