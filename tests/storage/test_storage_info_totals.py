"""``SYS CACHESTORE INFO``'s queue rows come from sizes kept as rows change
(storage/row_sizes.py), not from a walk of every item and result: the rows equal the
walk's after any sequence of steps (the walk is kept here as the reference), and their
cost is the expired backlog's, not the table's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cubequeue.grammar.commands import (
    Command,
    QueueAck,
    QueueAdd,
    QueueCancel,
    QueueHeartbeat,
    QueueMergeExtra,
    QueuePurge,
    QueueResult,
    QueueRetrieve,
    QueueTruncate,
    SysCachestore,
)
from cubequeue.grammar.errors import QueueError
from cubequeue.storage import cachestore_info
from cubequeue.storage.ack_results import Results
from cubequeue.storage.cachestore_info import InfoRow, queue_info_rows, table_rows
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.queue import QueueState
from cubequeue.storage.record_kinds import CACHE_PUT, ITEM_PUT, PREFIX, RESULT_PUT
from cubequeue.storage.row_sizes import item_row_size
from cubequeue.storage.store import MemoryStore

START = 1_700_000_000_000
HOUR = 3_600_000


def _utf8(*texts: str | None) -> int:
    """The reference's byte measure: every text field encoded."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts if t is not None)


def walk_info_rows(state: QueueState, now: int) -> list[InfoRow]:
    """The reference: every item and result looked at, as INFO used to do."""
    items = ((_utf8(i.path, i.payload, i.extra), i.expire <= now) for i in state.items())
    results = ((_utf8(r.path, r.value), r.expire < now) for r in state.results.all_by_id())
    return table_rows("QueueItems", items) + table_rows("QueueResults", results)


def queue_of(store: MemoryStore) -> QueueState:
    return store._queue  # the state under test


PATHS = st.sampled_from(["a:1", "a:2", "a:3", "b:1", "b:é", "c", "a:b:1"])
PAYLOADS = st.sampled_from(["p", "payload", "ü" * 3, "", "x" * 40, "日本"])
JSONS = st.sampled_from(['{"a":1}', '{"b":"ß"}', '{"a":null}', '{"long":"' + "y" * 30 + '"}'])
RESULTS = st.sampled_from([None, "r", "résultat", "", "z" * 25])
KEYS = st.one_of(st.integers(1, 40), PATHS)


class InfoVsWalk(RuleBasedStateMachine):
    """Random QUEUE steps on a small work budget (so sweeps leave backlogs and purges
    stay unreleased across steps); INFO's queue rows equal the walk's after each."""

    @initialize(budget=st.sampled_from([1, 2, 1024]))
    def setup(self, budget: int) -> None:
        self.clock = FakeClock(START)
        self.limits = Limits(work_budget=budget, results_expire_ms=60_000)
        self.store = MemoryStore(self.clock, self.limits)

    def run(self, cmd: Command) -> None:
        with contextlib.suppress(QueueError):
            self.store.execute(cmd)

    @rule(path=PATHS, payload=PAYLOADS, orphaned=st.sampled_from([None, 1, 3600]),
          ext=st.sampled_from([None, "e1", "e2"]))
    def add(self, path: str, payload: str, orphaned: int | None, ext: str | None) -> None:
        self.run(QueueAdd(path=path, payload=payload, orphaned=orphaned, external_id=ext))

    @rule(path=PATHS, concurrency=st.integers(1, 3))
    def retrieve(self, path: str, concurrency: int) -> None:
        self.run(QueueRetrieve(path=path, concurrency=concurrency, extended=True))

    @rule(key=KEYS, result=RESULTS)
    def ack(self, key: int | str, result: str | None) -> None:
        self.run(QueueAck(key=key, result=result))

    @rule(key=KEYS)
    def cancel(self, key: int | str) -> None:
        self.run(QueueCancel(key=key))

    @rule(key=KEYS, text=JSONS)
    def merge_extra(self, key: int | str, text: str) -> None:
        self.run(QueueMergeExtra(key=key, json=text))

    @rule(key=KEYS)
    def heartbeat(self, key: int | str) -> None:
        self.run(QueueHeartbeat(key=key))

    @rule(key=KEYS)
    def result(self, key: int | str) -> None:
        self.run(QueueResult(key=key))

    @rule()
    def truncate(self) -> None:
        self.run(QueueTruncate())

    @rule(prefix=st.sampled_from(["a", "b", "", "a:b"]),
          status=st.sampled_from([None, "pending", "active"]))
    def purge(self, prefix: str, status: str | None) -> None:
        self.run(QueuePurge(prefix=prefix, status=status))  # type: ignore[arg-type]

    @rule(ms=st.sampled_from([1, 1000, 60_000, 60_001, HOUR, 2 * HOUR, 4 * HOUR]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(budget=st.integers(1, 3))
    def deferred(self, budget: int) -> None:
        self.store.run_deferred(budget)

    @rule()
    def info(self) -> None:
        """The store's INFO step at its instant (execute would run a deferred slice
        after it, before the walk could look)."""
        state, now = queue_of(self.store), self.clock()
        state.sweep(now)
        expected = walk_info_rows(state, now)
        assert self.store.cachestore_info(now)[7:] == expected

    @precondition(lambda self: not self.store.has_deferred)
    @rule()
    def recover(self) -> None:
        """Restart from a snapshot (the durable store's recovery path)."""
        records = [r for part in self.store.snapshot_slices(7) for r in part]
        store = MemoryStore(self.clock, self.limits)
        of = {kind: [r for r in records if r[0] == kind]
              for kind in (ITEM_PUT, RESULT_PUT, CACHE_PUT, PREFIX)}
        store.restore(of[ITEM_PUT], of[RESULT_PUT], of[CACHE_PUT],
                      queue_of(self.store).peek_next_id(), of[PREFIX])
        self.store = store

    @invariant()
    def rows_equal_the_walk(self) -> None:
        state, now = queue_of(self.store), self.clock()
        assert queue_info_rows(state, now) == walk_info_rows(state, now)


InfoVsWalk.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestInfoVsWalk = InfoVsWalk.TestCase


# -- the cost does not grow with the table -----------------------------------------------


def _rows(n: int, expire: int) -> Iterator[tuple[object, ...]]:
    for i in range(1, n + 1):
        yield (ITEM_PUT, i, f"q{i % 7}:k{i}", "p" * (i % 50), 0, START, None, expire,
               None, False, None, '{"a":1}' if i % 3 else None, None, None)


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """INFO may not walk the tables: items() and all_by_id() raise, and each row size
    INFO measures is counted."""
    calls: list[int] = []

    def refuse(*_: object) -> object:
        raise AssertionError("INFO walked a table")

    def item_size(item: object) -> int:
        calls.append(1)
        return item_row_size(item)  # type: ignore[arg-type]

    monkeypatch.setattr(QueueState, "items", refuse)
    monkeypatch.setattr(Results, "all_by_id", refuse)
    monkeypatch.setattr(cachestore_info, "item_row_size", item_size)
    return calls


def _info(store: MemoryStore) -> dict[str, str]:
    return {str(r[0]): str(r[1]) for r in store.execute(SysCachestore(action="info")).rows}


def test_info_looks_at_no_row_when_none_is_due(counted: list[int]) -> None:
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits(max_items=30_000))
    store.restore(list(_rows(20_000, START + HOUR)), [], [], 20_001)
    info = _info(store)
    assert info["QueueItems.keys_total"] == "20000"
    assert info["QueueItems.expired_keys_total"] == "0"
    assert counted == []


def test_info_looks_at_the_due_backlog_only(counted: list[int]) -> None:
    """Half the items are due; the step's sweep removes a budget of them, INFO counts
    the rest as expired and measures those alone."""
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits(max_items=30_000, work_budget=100))
    store.restore(list(_rows(10_000, START + 10)), [], [], 10_001)
    store.restore([(ITEM_PUT, 10_000 + i, f"late:{i}", "p", 0, START, None, START + HOUR,
                    None, False, None, None, None, None) for i in range(1, 10_001)],
                  [], [], 20_001)
    clock.advance(10)
    info = _info(store)
    assert info["QueueItems.keys_total"] == "19900"
    assert info["QueueItems.expired_keys_total"] == "9900"
    assert len(counted) == 9900


def test_a_purge_being_released_is_left_out(counted: list[int]) -> None:
    """An unfinished PURGE's items are measured (to leave them out), nobody else's."""
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits(max_items=30_000, work_budget=10))
    store.restore(list(_rows(7_000, START + HOUR)), [], [], 7_001)
    removed = store.execute(QueuePurge(prefix="q1")).rows[0][0]
    assert removed == 1000
    info = _info(store)
    assert info["QueueItems.keys_total"] == "6000"
    assert len(counted) == 990  # the step released one slice of 10


def test_a_truncate_during_a_purge_release() -> None:
    """The purge's release goes on after a TRUNCATE reset the sizes: it must not take
    its items out of the new ones."""
    clock = FakeClock(START)
    store = MemoryStore(clock, Limits(work_budget=1))
    for i in range(5):
        store.execute(QueueAdd(path=f"a:{i}", payload="x" * i))
    store.execute(QueuePurge(prefix="a"))
    store.execute(QueueTruncate())
    store.execute(QueueAdd(path="b:1", payload="yy"))
    state = queue_of(store)
    while True:
        assert queue_info_rows(state, clock()) == walk_info_rows(state, clock())
        if not store.run_deferred(1):
            break
    assert _info(store)["QueueItems.keys_total"] == "1"
