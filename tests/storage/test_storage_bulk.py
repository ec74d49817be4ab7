"""Bulk work in slices, MERGE_EXTRA's bounds, CANCEL's reason after ORPHANED, and the
console's prefix facts: regression tests for the hardening findings.

Slicing is checked by counting units against an injected ``Limits.work_budget``, never
by wall time.
"""

from __future__ import annotations

import itertools
import logging

import pytest
from storage_testkit import Harness, harness

from cubequeue.grammar.commands import (
    QueueAdd,
    QueueGet,
    QueuePurge,
    QueueRetrieve,
    QueueToCancel,
    QueueTruncate,
)
from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.server.executor import Executor
from cubequeue.server.sql import PlainSession
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import MAX_EXTRA_DEPTH, Limits

FOUR_HOURS = 4 * 3_600_000


# -- TRUNCATE: O(1) detach, release in slices --------------------------------------------


def test_truncate_is_atomic_and_releases_in_budgeted_slices() -> None:
    h = harness(Limits(work_budget=10, queue_log_size=5))
    for i in range(100):
        h.add(f"q:{i}")
    h.departures.clear()
    assert h.run(QueueTruncate()) == []
    # clients see an empty queue at once, and the log holds its last rows at once
    assert h.store.system_table("queue").rows == []
    assert h.store.system_table("queue_prefixes").rows == []
    log = h.store.system_table("queue_log").rows
    assert [(r[0], r[2]) for r in log] == [(i, "truncated") for i in range(96, 101)]
    # but the step reported only one budget's worth of departures to the hook
    assert len(h.departures) == 10
    assert h.store.has_deferred
    seen = [len(h.departures)]
    while h.store.run_deferred():
        seen.append(len(h.departures))
    seen.append(len(h.departures))
    # each slice reports at most one budget (then paths and indexes are released)
    assert all(b - a <= 10 for a, b in itertools.pairwise(seen))
    assert seen[:10] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert sorted(d.id for d in h.departures) == list(range(1, 101))
    assert {d.reason for d in h.departures} == {"truncated"}
    assert not h.store.has_deferred


def test_queue_keeps_working_while_a_truncate_is_released() -> None:
    h = harness(Limits(work_budget=3))
    for i in range(20):
        h.add(f"q:{i}")
    h.run(QueueTruncate())
    assert h.store.has_deferred
    assert h.add("q:0")[1] is True  # the path is free again: a new item
    assert h.get("q:0") == [("p", None)]
    assert h.store.system_table("queue_prefixes").rows[0][:3] == ("q", 1, 0)


def test_truncate_logs_one_summary_line(caplog: pytest.LogCaptureFixture) -> None:
    h = harness(Limits(work_budget=7))
    for i in range(50):
        h.add(f"q:{i}")
    with caplog.at_level(logging.INFO, logger="cubequeue.queue"):
        h.run(QueueTruncate())
        while h.store.run_deferred():
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "cubequeue.queue"]
    assert lines == ["QUEUE TRUNCATE: 50 items and 0 results removed"]


# -- PURGE: O(1) detach, release in slices -----------------------------------------------


def _rows(table: ResultSet | RowStream) -> list[Row]:
    return table.collect().rows if isinstance(table, RowStream) else table.rows


def _purge_fixture(budget: int, n: int = 60) -> Harness:
    h = harness(Limits(work_budget=budget, queue_log_size=4))
    for i in range(n):
        h.add(f"q:{i}")
    h.add("other:x")
    for i in range(0, n, 3):  # every third one claimed
        h.retrieve(f"q:{i}", n)
    h.departures.clear()
    return h


@pytest.mark.parametrize(("status", "removed"), [(None, 60), ("pending", 40), ("active", 20)])
def test_purge_is_atomic_and_releases_in_budgeted_slices(status: str | None, removed: int) -> None:
    h = _purge_fixture(budget=5)
    assert h.run(QueuePurge(prefix="q", status=status)) == [(removed,)]  # type: ignore[arg-type]
    left = [i for i in range(60) if (status == "pending" and i % 3 == 0)
            or (status == "active" and i % 3 != 0)]
    # clients see the purge at once: counts, lists, lookups by id and by path, the table
    want = [f"{i}" for i in left]
    assert sorted(r[0] for r in h.list("q")) == sorted(want)
    rows = _rows(h.store.system_table("queue"))
    assert sorted(r[0] for r in rows if r[2] == "q") == sorted(want)
    for i in range(60):
        expect = [("p", None)] if i in left else []
        assert h.get(f"q:{i}") == expect
        assert h.run(QueueGet(key=i + 1)) == expect
    prefixes = h.store.system_table("queue_prefixes").rows
    assert [r[:3] for r in prefixes if r[0] == "q"] == (
        [] if not left else [("q", 40 - 40 * (status == "pending"), 20 - 20 * (status == "active"))])
    assert h.list("other") == [("x", "61", "pending", None)]
    assert h.store.stats().items_total == len(left) + 1
    # the log holds its last rows (the newest ids purged) at once
    log = [(r[0], r[2]) for r in h.store.system_table("queue_log").rows]
    purged_ids = [i + 1 for i in range(60) if i not in left]
    assert log == [(i, "purged") for i in purged_ids[-4:]]
    # the hook hears of each departure as it is released, one budget a slice at most
    seen = [len(h.departures)]
    while h.store.run_deferred():
        seen.append(len(h.departures))
    seen.append(len(h.departures))
    assert all(b - a <= 5 for a, b in itertools.pairwise(seen))
    assert sorted(d.id for d in h.departures) == purged_ids
    assert {d.reason for d in h.departures} == {"purged"}
    assert not h.store.has_deferred
    assert sorted(r[0] for r in h.list("q")) == sorted(want)


def test_a_purged_path_is_free_at_once_and_the_late_release_leaves_the_new_item() -> None:
    h = _purge_fixture(budget=1, n=10)
    h.run(QueuePurge(prefix="q"))
    assert h.store.has_deferred
    assert h.add("q:9")[1] is True  # a new item under a purged, unreleased path
    assert h.run(QueueRetrieve(path="q:1", concurrency=5)) == []  # purged: not claimable
    while h.store.run_deferred():
        pass
    assert h.get("q:9") == [("p", None)]
    assert [r[0] for r in h.list("q")] == ["9"]
    assert h.store.stats().items_total == 2


def test_purge_frees_capacity_at_once() -> None:
    h = harness(Limits(work_budget=1, max_items=5))
    for i in range(5):
        h.add(f"q:{i}")
    with pytest.raises(LimitExceeded):
        h.add("r:0")
    h.run(QueuePurge(prefix="q"))
    for i in range(5):
        assert h.run(QueueAdd(path=f"r:{i}", payload="p"))[0][1] is True


def test_purged_items_are_not_swept_twice_when_they_fall_due() -> None:
    h = _purge_fixture(budget=2, n=20)
    h.run(QueuePurge(prefix="q"))
    h.advance(FOUR_HOURS)  # every item is due while most are still detached
    assert h.get("other:x") == []
    while h.store.run_deferred():
        pass
    reasons = {d.id: d.reason for d in h.departures}
    assert len(h.departures) == 21 and reasons[21] == "expired"
    assert {reasons[i] for i in range(1, 21)} == {"purged"}


def test_truncate_while_a_purge_is_released() -> None:
    h = _purge_fixture(budget=3, n=30)
    h.run(QueuePurge(prefix="q", status="pending"))
    h.run(QueueTruncate())
    assert h.store.system_table("queue").rows == []
    h.add("q:0")
    while h.store.run_deferred():
        pass
    assert sorted(d.id for d in h.departures) == list(range(1, 32))
    assert [r[0] for r in h.list("q")] == ["0"]
    assert h.store.stats().items_total == 1


def test_purge_logs_one_summary_line(caplog: pytest.LogCaptureFixture) -> None:
    h = _purge_fixture(budget=7, n=50)
    with caplog.at_level(logging.INFO, logger="cubequeue.queue"):
        h.run(QueuePurge(prefix="q"))
        while h.store.run_deferred():
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "cubequeue.queue"]
    assert lines == ["QUEUE PURGE q: 50 items removed"]


def test_purge_journals_one_record_in_its_own_step() -> None:
    h = _purge_fixture(budget=2, n=9)
    journal: list[tuple[object, ...]] = []
    h.store.attach_journal(journal)
    h.run(QueuePurge(prefix="q", status="active"))
    # one PURGE record: prefix, status filter, the first id the statement did not see
    assert journal == [(13, "queue", "q", "active", 11)]
    while h.store.run_deferred():
        pass
    assert len(journal) == 1  # releasing the items journals nothing more


# -- system.queue: sliced, and bounded for plain SQL ----------------------------------------


def test_system_queue_streams_in_budget_slices_and_knows_its_length() -> None:
    h = harness(Limits(work_budget=4))
    for i in range(10):
        h.add(f"q:{i}")
    small = harness(Limits(work_budget=4))
    small.add("q:0")
    assert isinstance(small.store.system_table("queue"), ResultSet)  # one slice: a frame
    table = h.store.system_table("queue")
    assert isinstance(table, RowStream)
    assert table.length == 10
    parts = list(table.slices)
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [r[1] for p in parts for r in p] == list(range(1, 11))


def test_plain_sql_refuses_a_system_table_above_max_sql_rows_before_reading_it() -> None:
    h = harness(Limits(work_budget=4))
    for i in range(10):
        h.add(f"q:{i}")
    executor = Executor(h.store, max_sql_rows=9)
    with pytest.raises(LimitExceeded, match=r"--max-sql-rows=9") as refused:
        executor.plain("SELECT queue_id FROM system.queue ORDER BY priority DESC", PlainSession(server_version="14.0", user="cube"))
    assert refused.value.sqlstate == "54000"
    ok = Executor(h.store, max_sql_rows=10).plain(
        "SELECT count(*) FROM system.queue", PlainSession(server_version="14.0", user="cube"))
    assert ok.result is not None and ok.result.rows == [(10,)]


# -- the expiry sweep: bounded per step ----------------------------------------------------


def test_sweep_is_bounded_per_step_and_due_items_are_unreachable() -> None:
    h = harness(Limits(work_budget=1))
    for i in range(10):
        h.add(f"q:{i}")
    h.advance(FOUR_HOURS)
    h.departures.clear()
    # the step sweeps one budget (and works one more), yet no due item can be reached
    assert h.run(QueueGet(key="q:9")) == []
    assert len(h.departures) == 2
    assert h.store.has_deferred
    assert h.add("q:9")[1] is True  # a due, unswept item's path is free at once
    assert 10 not in {d.id for d in h.departures}
    while h.store.run_deferred():
        pass
    assert sorted(d.id for d in h.departures) == list(range(1, 11))
    assert [r[0] for r in h.store.system_table("queue").rows] == ["9"]
    assert h.get("q:9") == [("p", None)]  # the late sweep of id 10 left the new path alone


def test_sweep_logs_a_summary_not_a_line_per_item(caplog: pytest.LogCaptureFixture) -> None:
    h = harness(Limits(work_budget=100))
    for i in range(30):
        h.add(f"q:{i}")
    h.advance(FOUR_HOURS)
    with caplog.at_level(logging.INFO, logger="cubequeue.queue"):
        h.get("q:0")
    lines = [r.getMessage() for r in caplog.records if r.name == "cubequeue.queue"]
    assert lines == ["expiry sweep: 30 items expired"]


# -- MERGE_EXTRA's bounds ------------------------------------------------------------------


def test_merge_extra_refuses_deep_json_on_the_first_write() -> None:
    h = harness()
    h.add("q:a")
    deep = "[" * 10_000 + "]" * 10_000
    with pytest.raises(LimitExceeded) as err:
        h.merge("q:a", deep)
    assert err.value.sqlstate == "54000"
    assert f"MAX_EXTRA_DEPTH={MAX_EXTRA_DEPTH}" in str(err.value)
    assert h.get(1) == [("p", None)]
    ok = "[" * MAX_EXTRA_DEPTH + "]" * MAX_EXTRA_DEPTH
    h.merge("q:a", ok)
    h.merge("q:a", '{"a": 1}')  # later merges parse the stored text without trouble
    assert h.get(1) == [("p", '{"a":1}')]


def test_merge_extra_brackets_inside_strings_do_not_nest() -> None:
    h = harness()
    h.add("q:a")
    text = '{"s": "' + "[{" * 1000 + '\\"]"}'
    h.merge("q:a", text)
    assert h.get(1) == [("p", text)]


def test_merge_extra_size_cap_names_the_limit() -> None:
    h = harness(Limits(max_extra_bytes=32))
    h.add("q:a")
    with pytest.raises(LimitExceeded) as err:
        h.merge("q:a", '{"k": "' + "x" * 40 + '"}')
    assert err.value.sqlstate == "54000"
    assert "exceeds the limit of 32 bytes (max_extra_bytes=32)" in str(err.value)
    h.merge("q:a", '{"a": "' + "y" * 10 + '"}')
    with pytest.raises(LimitExceeded):  # each part fits, the merged text does not
        h.merge("q:a", '{"b": "' + "z" * 10 + '"}')
    assert h.get(1) == [("p", '{"a": "' + "y" * 10 + '"}')]


def test_merge_extra_invalid_first_write_is_22p02() -> None:
    h = harness()
    h.add("q:a")
    with pytest.raises(InvalidTextRepresentation) as err:
        h.merge("q:a", '{"a":')
    assert err.value.sqlstate == "22P02"


# -- CANCEL's reason: the command that removed the item names it ---------------------------


def test_manual_cancel_after_orphaned_listing_stays_cancelled() -> None:
    h = harness()
    h.add("q:a")
    h.advance(2_000)
    listed = h.run(QueueToCancel(prefix="q", orphaned_timeout=1_000))  # QUEUE ORPHANED
    assert listed == [("a", "1")]
    h.cancel("q:a")
    assert h.departures[-1].reason == "cancelled"
    assert h.store.system_table("queue_log").rows[-1][2] == "cancelled"


# -- the console's facts -----------------------------------------------------------------


def test_queue_prefixes_shows_the_latest_to_cancel_timeouts() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a", 7)
    h.to_cancel("q", 30_000, 60_000)
    assert h.store.system_table("queue_prefixes").rows[0][6:] == (7, 30_000, 60_000)
    h.to_cancel("q", 45_000, None)  # QUEUE STALLED
    assert h.store.system_table("queue_prefixes").rows[0][6:] == (7, 45_000, None)
    h.run(QueueToCancel(prefix="q", orphaned_timeout=1))  # QUEUE ORPHANED only lists
    assert h.store.system_table("queue_prefixes").rows[0][6:] == (7, 45_000, None)
