"""QUEUE LIST / PENDING / ACTIVE above one work budget: a stream of the rows at the step
that ran it, whatever runs between its slices (storage/list_snapshot.py).

Slicing is checked by counting rows against an injected ``Limits.work_budget``."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st
from storage_testkit import HOUR, Harness, harness

from cubequeue.grammar.commands import (
    QueueAck,
    QueueAdd,
    QueueCancel,
    QueueGet,
    QueueList,
    QueueMergeExtra,
    QueuePurge,
    QueueRetrieve,
    QueueTruncate,
)
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.list_snapshot import ListStream

BUDGET = 4


def _fill(h: Harness, n: int, prefix: str = "q") -> None:
    for i in range(n):
        pid = f"w{i % 3}" if i % 4 == 0 else None
        h.run(QueueAdd(path=f"{prefix}:{i}", payload=f"p{i}", priority=i % 3,
                       exclusive=pid is not None, orphaned=60 * (i % 5) or None), pid)
        h.advance(1)


def _open(h: Harness, status: str | None, with_payload: bool, pid: str | None) -> RowStream:
    result = h.store.execute(QueueList(prefix="q", status=status, with_payload=with_payload), pid)  # type: ignore[arg-type]
    assert isinstance(result, RowStream)
    return result


def _immediate(h: Harness, status: str | None, with_payload: bool, pid: str | None) -> list[Row]:
    """What a LIST built whole at this instant returns (the frame path, no step)."""
    return h.store._commands.list_rows("q", status, with_payload, pid)


def test_a_listing_above_the_budget_streams_budget_sized_slices() -> None:
    h = harness(Limits(work_budget=BUDGET))
    _fill(h, 30)
    for i in (1, 2, 3, 5, 6, 7, 9, 10, 11):  # more active items than one budget
        h.retrieve(f"q:{i}", concurrency=100)
    for status in (None, "pending", "active"):
        want = _immediate(h, status, True, "w0")
        stream = _open(h, status, True, "w0")
        parts = list(stream.slices)
        assert all(len(part) <= BUDGET for part in parts)
        assert [row for part in parts for row in part] == want
    assert h.store._queue.snapshots == []
    h.run(QueuePurge(prefix="q", status="active"))
    h.retrieve("q:13", concurrency=100)
    small = h.store.execute(QueueList(prefix="q", status="active"))
    assert isinstance(small, ResultSet)  # one row: built at once


def test_a_closed_or_dropped_stream_unregisters_its_snapshot() -> None:
    h = harness(Limits(work_budget=BUDGET))
    _fill(h, 20)
    queue = h.store._queue
    stream = _open(h, None, False, None)
    assert len(queue.snapshots) == 1
    next(stream.slices)
    assert isinstance(stream.slices, ListStream)
    stream.slices.close()
    assert queue.snapshots == []
    assert list(stream.slices) == []
    _open(h, "pending", False, None)  # dropped before its first slice
    gc.collect()
    assert queue.snapshots == []
    stream = _open(h, None, False, None)
    next(stream.slices)
    del stream  # dropped half read
    assert queue.snapshots == []


def test_changes_between_slices_do_not_show() -> None:
    h = harness(Limits(work_budget=BUDGET))
    _fill(h, 20)
    want = _immediate(h, None, False, None)
    stream = _open(h, None, False, None)
    rows = list(next(stream.slices))
    h.retrieve("q:19", concurrency=100)
    h.merge("q:18", '{"a":1}')
    h.ack("q:17")
    h.cancel("q:16")
    h.add("q:new")
    h.run(QueuePurge(prefix="q"))
    h.run(QueueTruncate())
    while h.store.run_deferred():
        pass
    for part in stream.slices:
        rows.extend(part)
    assert rows == want
    assert h.list("q") == []


_STATUS = st.sampled_from([None, "pending", "active"])
_PIDS = st.sampled_from([None, "w0", "w1"])
_KEY = st.integers(0, 40)
_STEP = st.one_of(
    st.tuples(st.just("add"), _KEY, st.integers(0, 3)),
    st.tuples(st.just("retrieve"), _KEY, st.sampled_from(["w0", "w1", "w2"])),
    st.tuples(st.just("ack"), _KEY),
    st.tuples(st.just("cancel"), _KEY),
    st.tuples(st.just("merge"), _KEY, st.integers(0, 9)),
    st.tuples(st.just("purge"), st.sampled_from([None, "pending", "active"])),
    st.tuples(st.just("truncate")),
    st.tuples(st.just("advance"), st.integers(0, 5 * HOUR)),
    st.tuples(st.just("deferred")),
    st.tuples(st.just("slice")),
)


def _step(h: Harness, step: tuple[object, ...]) -> None:
    kind = step[0]
    if kind == "add":
        h.run(QueueAdd(path=f"q:n{step[1]}", payload="new", priority=step[2]))  # type: ignore[arg-type]
    elif kind == "retrieve":
        h.run(QueueRetrieve(path=f"q:{step[1]}", concurrency=1000), step[2])  # type: ignore[arg-type]
    elif kind == "ack":
        h.run(QueueAck(key=f"q:{step[1]}", result="r"))
    elif kind == "cancel":
        h.run(QueueCancel(key=f"q:{step[1]}"))
    elif kind == "merge":
        h.run(QueueMergeExtra(key=f"q:{step[1]}", json=f'{{"m":{step[2]}}}'))
    elif kind == "purge":
        h.run(QueuePurge(prefix="q", status=step[1]))  # type: ignore[arg-type]
    elif kind == "truncate":
        h.run(QueueTruncate())
    elif kind == "advance":
        h.advance(step[1])  # type: ignore[arg-type]
        h.run(QueueGet(key="q:none"))  # a step: the sweep runs
    elif kind == "deferred":
        h.store.run_deferred()


@settings(deadline=None, max_examples=150)
@given(
    status=_STATUS,
    with_payload=st.booleans(),
    pid=_PIDS,
    claims=st.lists(_KEY, max_size=12),
    merges=st.lists(_KEY, max_size=6),
    steps=st.lists(_STEP, max_size=40),
)
def test_a_stream_read_between_random_commands_is_the_listing_at_its_start(
    status: str | None, with_payload: bool, pid: str | None, claims: list[int],
    merges: list[int], steps: list[tuple[object, ...]],
) -> None:
    h = harness(Limits(work_budget=BUDGET, queue_log_size=3))
    _fill(h, 40)
    for key in claims:
        h.run(QueueRetrieve(path=f"q:{key}", concurrency=1000), "w0")
    for key in merges:
        h.merge(f"q:{key}", '{"before":1}')
    h.advance(2 * HOUR)  # some items' ORPHANED expiry is now near
    h.run(QueueGet(key="q:none"))
    want = _immediate(h, status, with_payload, pid)
    result = h.store.execute(QueueList(prefix="q", status=status, with_payload=with_payload), pid)  # type: ignore[arg-type]
    if not isinstance(result, RowStream):
        assert result.rows == want
        return
    got: list[Row] = []
    slices = result.slices
    for step in steps:
        if step[0] == "slice":
            got.extend(next(slices, []))
        else:
            _step(h, step)
    for part in slices:
        got.extend(part)
    assert got == want
    assert h.store._queue.snapshots == []
