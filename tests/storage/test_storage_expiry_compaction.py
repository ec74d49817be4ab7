"""The expiry heap's compaction (``storage/expiry.py``): in place, a few entries per call,
never one O(n) step; nothing due is missed and nothing live is dropped meanwhile."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.expiry import ExpiryHeap

_BIAS = 1 << 63


class Rows:
    """A tiny owner (id → due of the live rows) that counts the heap's liveness calls."""

    def __init__(self, *, rebuild_after: int, step: int) -> None:
        self.due: dict[int, int] = {}
        self.calls = 0
        self.heap = ExpiryHeap(self._live, rebuild_after=rebuild_after, step=step)

    def _live(self, due: int, id_: int) -> bool:
        self.calls += 1
        return self.due.get(id_) == due

    def put(self, id_: int, due: int) -> None:
        if id_ in self.due:
            self.heap.note_dead()
        self.due[id_] = due
        self.heap.push(due, id_)

    def remove(self, id_: int) -> None:
        del self.due[id_]
        self.heap.note_dead()

    def pop(self, now: int) -> list[int]:
        ids = self.heap.pop_due(now)
        for id_ in ids:
            del self.due[id_]
        return ids

    def check(self) -> None:
        entries = self.heap.entries
        for i in range(1, len(entries)):
            assert entries[(i - 1) >> 1] <= entries[i], "heap order"
        held = {((e >> 64) - _BIAS, e & ((1 << 64) - 1)) for e in entries}
        for id_, due in self.due.items():
            assert (due, id_) in held, f"live row {id_} (due {due}) lost its entry"


def test_no_call_examines_more_than_one_step() -> None:
    rows = Rows(rebuild_after=16, step=4)
    n = 100_000
    for id_ in range(n):
        rows.put(id_, 10 * id_)
    rows.calls = 0
    for id_ in range(0, n, 3):  # a third dies: no pass yet
        rows.remove(id_)
    assert rows.calls == 0
    for id_ in [i for i in range(n) if i % 3 == 1]:  # now the dead come to dominate
        before = rows.calls
        rows.remove(id_)
        assert rows.calls - before <= 4  # the old rebuild examined all 10^5 in one call
        if rows.heap.compacting:
            break
    assert rows.heap.compacting
    size, calls = len(rows.heap), 0
    while rows.heap.compacting:  # pushes drive the pass too, 4 entries each
        before = rows.calls
        rows.put(n + calls, 5 * calls)
        assert rows.calls - before <= 4
        calls += 1
    assert calls <= 2 * size // 4 + 1  # each entry examined once, a deleted one twice
    assert len(rows.heap) < 2 * len(rows.due)
    rows.check()
    due = sorted((d, i) for i, d in rows.due.items())
    assert rows.heap.pop_due(10**12) == [i for _, i in due]


def test_memory_stays_proportional_to_live_rows_with_the_smallest_step() -> None:
    rows = Rows(rebuild_after=8, step=1)
    for id_ in range(50):
        rows.put(id_, 1_000_000 + id_)  # long-lived
    for n in range(50, 20_050):
        rows.put(n, 10_000 + n)
        rows.remove(n)
        assert len(rows.heap) <= 4 * len(rows.due) + 2 * 8 + 2
    rows.check()
    assert rows.pop(10**9) == list(range(50))


def test_pops_during_a_pass_find_every_due_entry() -> None:
    rows = Rows(rebuild_after=4, step=2)
    for id_ in range(200):
        rows.put(id_, id_)
    for id_ in range(200):
        if id_ % 4:
            rows.remove(id_)
    assert rows.heap.compacting
    assert rows.pop(99) == list(range(0, 100, 4))
    rows.check()
    while rows.heap.compacting:
        rows.put(1000, 5000)
        rows.remove(1000)
    assert rows.pop(10**6) == list(range(100, 200, 4))


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "remove", "remove", "pop", "retime_back"]),
        st.integers(0, 40),
        st.integers(-60, 60),
    ),
    max_size=300,
)


@settings(deadline=None, max_examples=300)
@given(_OPS, st.integers(1, 4), st.integers(0, 6))
def test_model_nothing_due_missed_nothing_live_dropped(
    ops: list[tuple[str, int, int]], step: int, rebuild_after: int
) -> None:
    rows = Rows(rebuild_after=rebuild_after, step=step)
    previous: dict[int, int] = {}
    for op, id_, t in ops:
        if op == "put":
            if id_ in rows.due:
                previous[id_] = rows.due[id_]
            rows.put(id_, t)
        elif op == "retime_back" and id_ in rows.due and id_ in previous:
            rows.put(id_, previous[id_])  # back to an earlier due: a duplicate entry
        elif op == "remove" and id_ in rows.due:
            rows.remove(id_)
        elif op == "pop":
            expected = sorted((due, i) for i, due in rows.due.items() if due <= t)
            assert rows.pop(t) == [i for _, i in expected]
        rows.check()
    rest = [i for _, i in sorted((d, i) for i, d in rows.due.items())]
    assert rows.pop(10**6) == rest
