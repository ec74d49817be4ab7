"""The shared expiry heap on its own: pop order, dead entries, duplicates, rebuilds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.expiry import REBUILD_AFTER, ExpiryHeap


class Rows:
    """A tiny owner: id → due of the live rows."""

    def __init__(self) -> None:
        self.due: dict[int, int] = {}
        self.heap = ExpiryHeap(lambda due, id_: self.due.get(id_) == due)

    def put(self, id_: int, due: int) -> None:
        if id_ in self.due:
            self.heap.note_dead()
        self.due[id_] = due
        self.heap.push(due, id_)

    def remove(self, id_: int) -> None:
        del self.due[id_]
        self.heap.note_dead()


def test_pops_due_entries_oldest_first_and_leaves_the_rest() -> None:
    rows = Rows()
    for id_, due in [(1, 30), (2, 10), (3, 20), (4, 40)]:
        rows.put(id_, due)
    assert rows.heap.next_due() == 10
    assert rows.heap.pop_due(9) == []
    assert rows.heap.pop_due(30) == [2, 3, 1]
    assert rows.heap.next_due() == 40
    assert len(rows.heap) == 1


def test_dead_and_retimed_entries_are_never_popped() -> None:
    rows = Rows()
    rows.put(1, 10)
    rows.put(2, 10)
    rows.remove(1)
    rows.put(2, 50)  # re-timed: the entry due at 10 is dead
    assert rows.heap.pop_due(20) == []
    assert rows.heap.pop_due(50) == [2]


def test_a_repeated_entry_is_popped_once() -> None:
    rows = Rows()
    rows.put(1, 10)
    rows.put(1, 20)
    rows.put(1, 10)  # back to the first due: two equal entries, one live row
    assert rows.heap.pop_due(100) == [1]


def test_negative_dues_keep_their_order() -> None:
    rows = Rows()
    rows.put(1, 5)
    rows.put(2, -5)
    assert rows.heap.next_due() == -5
    assert rows.heap.pop_due(0) == [2]


def test_dead_entries_are_dropped_once_they_dominate() -> None:
    rows = Rows()
    rows.put(0, 1)
    for n in range(1, 10 * REBUILD_AFTER):
        rows.put(n, 1000 + n)
        rows.remove(n)
        assert len(rows.heap) <= 2 * len(rows.due) + REBUILD_AFTER + 1
    assert rows.heap.pop_due(10**9) == [0]


_OPS = st.lists(
    st.tuples(st.sampled_from(["put", "remove", "pop"]), st.integers(0, 30), st.integers(-50, 50)),
    max_size=200,
)


@settings(deadline=None, max_examples=200)
@given(_OPS)
def test_pop_due_matches_a_naive_model(ops: list[tuple[str, int, int]]) -> None:
    rows = Rows()
    for op, id_, t in ops:
        if op == "put":
            rows.put(id_, t)
        elif op == "remove" and id_ in rows.due:
            rows.remove(id_)
        elif op == "pop":
            expected = sorted((due, i) for i, due in rows.due.items() if due <= t)
            assert rows.heap.pop_due(t) == [i for _, i in expected]
            for _, i in expected:
                del rows.due[i]  # the owner drops what was popped
