"""Expiry enforced, not only hidden (``docs/dialect.md`` §2.2, §2.7, §8 rule 9)."""

from __future__ import annotations

import pytest
from storage_testkit import HOUR, START, harness

from cubequeue.grammar.commands import SysCachestore
from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.expiry import REBUILD_AFTER
from cubequeue.storage.limits import Limits


def test_item_expires_at_created_plus_four_hours_unreachable_by_id_too() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a")
    h.advance(4 * HOUR - 1)
    assert h.get(1) == [("p", None)]
    h.advance(1)
    assert h.get(1) == []
    assert h.get("q:a") == []
    assert h.ack(1) is False
    assert h.cancel(1) == []
    assert h.list("q") == []
    assert h.store.system_table("queue").rows == []


def test_expired_path_is_free_for_a_new_add() -> None:
    h = harness()
    h.add("q:a")
    h.advance(4 * HOUR)
    assert h.add("q:a") == ("2", True, 1)


def test_item_expiry_is_logged_as_departure_expired() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:b", 5)
    h.advance(4 * HOUR + 3)
    h.store.stats()
    assert [(d.id, d.reason, d.queued_ms, d.active_ms) for d in h.departures] == [
        (1, "expired", 4 * HOUR + 3, None),
        (2, "expired", 0, 4 * HOUR + 3),
    ]
    assert [r[2] for r in h.store.system_table("queue_log").rows] == ["expired", "expired"]


def test_expired_items_leave_the_prefix_counts() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b", orphaned=1)
    h.advance(1000 + 2 * HOUR)
    assert h.add("q:c") == ("3", True, 2)
    h.advance(2 * HOUR - 1000)  # q:a (created at START) expires; q:c does not yet
    assert h.store.stats().prefixes[0].pending == 1


def test_result_expires_after_results_expire_ms_inclusive_boundary() -> None:
    h = harness(Limits(results_expire_ms=60_000))
    h.add("q:a")
    h.ack("q:a", "v")
    h.advance(60_000)
    assert h.result(1) == [("v", "success", "1", None)]  # expire >= now is still readable
    h.advance(1)
    assert h.result(1) == []
    assert h.store.system_table("queue_results").rows == []


def test_result_expiry_removes_prefix_results_count_and_row() -> None:
    h = harness(Limits(results_expire_ms=1000))
    h.add("q:a")
    h.ack("q:a", "v")
    assert h.store.system_table("queue_prefixes").rows[0][3] == 1
    h.advance(1001)
    assert h.store.system_table("queue_prefixes").rows == []


def test_older_result_becomes_latest_when_newer_is_consumed_by_blocking_path() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "one")
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking(2, got)
    h.ack("q:a", "two")
    # id waiter only flags; the latest (2) is flagged so RESULT by path gives nothing
    assert h.result("q:a") == []


def test_compaction_runs_the_sweep_and_returns_empty_frame() -> None:
    h = harness()
    h.add("q:a")
    h.advance(4 * HOUR)
    frame = h.frame(SysCachestore(action="compaction"))
    assert frame.is_empty_frame
    assert [d.reason for d in h.departures] == ["expired"]


def test_idle_store_does_no_work_until_a_step() -> None:
    h = harness()
    h.add("q:a")
    h.advance(10 * HOUR)
    assert h.departures == []  # nothing happens without a step
    h.get("q:zzz")
    assert [d.reason for d in h.departures] == ["expired"]


def test_acked_items_do_not_leak_expiry_entries() -> None:
    h = harness()
    for i in range(5000):
        h.add(f"q:{i}")
        h.ack(f"q:{i}", None)
    heap = h.store._queue._item_expiry
    assert len(heap) <= 2 * REBUILD_AFTER + 2


def test_start_plus_ttl_matches_system_table_times() -> None:
    h = harness(Limits(results_expire_ms=5000))
    h.add("q:a")
    h.advance(7)
    h.ack(1, "v")
    assert h.store.system_table("queue_results").rows[0][2] == START + 7 + 5000


def test_failed_step_still_reports_the_expiries_its_sweep_made() -> None:
    h = harness()
    h.add("q:a")
    h.advance(4 * HOUR)
    with pytest.raises(InvalidParameterValue):
        h.add("q:b", exclusive=True)
    assert [(d.id, d.reason) for d in h.departures] == [(1, "expired")]
