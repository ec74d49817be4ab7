"""QUEUE ACK, RESULT, RESULT_BLOCKING and waiters (``docs/dialect.md`` §3.4, §3.11, §3.12, §8 rules
8, 9, 13)."""

from __future__ import annotations

import pytest
from storage_testkit import START, harness

from cubequeue.grammar.commands import (
    QueueAck,
    QueuePurge,
    QueueResult,
    QueueResultBlocking,
    QueueTruncate,
)
from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.limits import Limits
from cubequeue.storage.waiters import Waiter

# -- ACK ----------------------------------------------------------------------------------


def test_ack_by_path_and_id_returns_success_column() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    frame = h.frame(QueueAck(key="q:a", result="r"))
    assert [c.name for c in frame.columns] == ["success"]
    assert frame.rows == [(True,)]
    assert h.ack(2)


def test_double_ack_and_unknown_key_return_false() -> None:
    h = harness()
    h.add("q:a")
    assert h.ack("q:a")
    assert h.ack("q:a") is False
    assert h.ack(1) is False
    assert h.ack(99) is False


def test_ack_pending_item_is_allowed() -> None:
    h = harness()
    h.add("q:a")
    assert h.ack("q:a")
    assert h.get("q:a") == []


def test_ack_ignores_exclusivity() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.store.execute(QueueAck(key=1, result="r"), "other").rows == [(True,)]


def test_ack_stores_result_with_item_id_path_and_external_id() -> None:
    h = harness(Limits(results_expire_ms=60_000))
    h.add("q:a", external_id="ext")
    h.advance(10)
    h.ack("q:a", "value")
    assert h.store.system_table("queue_results").rows == [
        (1, "q:a", START + 10 + 60_000, False, "value", "ext")
    ]


def test_ack_null_stores_no_result() -> None:
    h = harness()
    h.add("q:a")
    assert h.ack("q:a", None)
    assert h.store.system_table("queue_results").rows == []
    assert h.result(1) == []
    assert h.result("q:a") == []


def test_ack_replaces_older_result_with_same_path_and_external_id() -> None:
    h = harness()
    h.add("q:a", external_id="e")
    h.ack("q:a", "old")
    h.add("q:a", external_id="e")
    assert h.ack("q:a", "new")
    assert [(r[0], r[4]) for r in h.store.system_table("queue_results").rows] == [(2, "new")]
    assert h.result(1) == []
    assert h.result("q:a", external_id="e") == [("new", "success", "2", "e")]


def test_ack_keeps_older_result_with_other_external_id() -> None:
    h = harness()
    h.add("q:a", external_id="e1")
    h.ack("q:a", "one")
    h.add("q:a", external_id="e2")
    h.ack("q:a", "two")
    assert h.result(1) == [("one", "success", "1", "e1")]
    assert h.result(2) == [("two", "success", "2", "e2")]


# -- RESULT ------------------------------------------------------------------------------


def test_result_columns() -> None:
    h = harness()
    assert [c.name for c in h.frame(QueueResult(key=1)).columns] == [
        "payload", "type", "id", "external_id"
    ]


def test_result_by_id_is_read_many_and_sees_deleted_flag() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "v")
    assert h.result("q:a") == [("v", "success", "1", None)]
    assert h.result(1) == [("v", "success", "1", None)]
    assert h.result(1) == [("v", "success", "1", None)]


def test_result_by_path_consumes_once() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "v")
    assert h.result("q:a") == [("v", "success", "1", None)]
    assert h.result("q:a") == []
    assert h.store.system_table("queue_results").rows[0][3] is True


def test_result_by_path_takes_latest_and_zero_rows_if_latest_consumed() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "one")
    h.add("q:a")
    h.ack("q:a", "two")
    assert h.result("q:a") == [("two", "success", "2", None)]
    # the older unconsumed result is not returned once the latest is consumed
    assert h.result("q:a") == []


def test_result_unknown_is_zero_rows() -> None:
    h = harness()
    assert h.result(5) == []
    assert h.result("q:none") == []


def test_result_by_id_external_id_mismatch_errors() -> None:
    h = harness()
    h.add("q:a", external_id="y")
    h.ack("q:a", "v")
    h.add("q:b")
    h.ack("q:b", "w")
    with pytest.raises(InvalidParameterValue) as err:
        h.result(1, external_id="x")
    assert err.value.sqlstate == "22023"
    assert str(err.value) == 'Queue result (id = 1) external_id mismatch: expected x, got Some("y")'
    with pytest.raises(InvalidParameterValue, match=r"expected x, got None$"):
        h.result(2, external_id="x")
    assert h.result(1, external_id="y") == [("v", "success", "1", "y")]


def test_result_by_id_external_id_on_missing_result_is_zero_rows() -> None:
    h = harness()
    assert h.result(7, external_id="x") == []


def test_result_by_path_and_external_id_is_read_many() -> None:
    h = harness()
    h.add("q:a", external_id="e")
    h.ack("q:a", "v")
    assert h.result("q:a", external_id="e") == [("v", "success", "1", "e")]
    assert h.result("q:a", external_id="e") == [("v", "success", "1", "e")]
    # not flagged: the path form still consumes it once
    assert h.result("q:a") == [("v", "success", "1", "e")]
    assert h.result("q:a") == []


def test_result_unknown_external_id_falls_back_to_path_and_consumes() -> None:
    h = harness()
    h.add("q:a", external_id="e")
    h.ack("q:a", "v")
    assert h.result("q:a", external_id="other") == [("v", "success", "1", "e")]
    assert h.result("q:a", external_id="other") == []
    assert h.result("q:a", external_id="e") == [("v", "success", "1", "e")]


def test_results_of_other_paths_are_independent() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.ack("q:a", "1")
    h.ack("q:b", "2")
    assert h.result("q:b")[0][0] == "2"
    assert h.result("q:a")[0][0] == "1"


# -- RESULT_BLOCKING ------------------------------------------------------------------


def test_blocking_answers_at_once_when_result_exists() -> None:
    h = harness()
    h.add("q:a", external_id="e")
    h.ack("q:a", "v")
    got: list[ResultSet] = []
    out = h.blocking(1, got)
    assert isinstance(out, ResultSet)
    assert out.rows == [("v", "success", "1", "e")]
    out = h.blocking("q:a", got)
    assert isinstance(out, ResultSet) and out.rows == [("v", "success", "1", "e")]
    # consumed by path
    assert isinstance(h.blocking("q:a", got), Waiter)


def test_blocking_path_waiter_woken_by_ack_and_result_physically_deleted() -> None:
    h = harness()
    h.add("q:a", external_id="e")
    got: list[ResultSet] = []
    waiter = h.blocking("q:a", got)
    assert isinstance(waiter, Waiter) and waiter.pending
    assert h.ack("q:a", "v")
    assert [r.rows for r in got] == [[("v", "success", "1", None)]]
    assert got[0].columns == QueueResultBlocking.RESULT_COLUMNS
    assert not waiter.pending
    assert h.store.system_table("queue_results").rows == []
    assert h.result(1) == []


def test_blocking_id_waiter_flags_result_deleted_but_keeps_it() -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking(1, got)
    h.ack(1, "v")
    assert got[0].rows == [("v", "success", "1", None)]
    assert h.store.system_table("queue_results").rows[0][3] is True
    assert h.result(1) == [("v", "success", "1", None)]
    assert h.result("q:a") == []


def test_blocking_ack_null_delivers_null_payload_row() -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking("q:a", got)
    h.ack("q:a", None)
    assert got[0].rows == [(None, "success", "1", None)]


def test_blocking_every_waiter_on_id_and_path_receives_the_event() -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking("q:a", got)
    h.blocking("q:a", got)
    h.blocking(1, got)
    other: list[ResultSet] = []
    h.blocking("q:b", other)
    h.ack(1, "v")
    assert len(got) == 3 and all(r.rows == [("v", "success", "1", None)] for r in got)
    assert other == []
    assert h.store.stats().waiters == 1


def test_blocking_path_waiter_woken_by_item_added_after_wait_began() -> None:
    h = harness()
    got: list[ResultSet] = []
    h.blocking("q:later", got)
    h.add("q:later")
    h.ack("q:later", "v")
    assert got[0].rows == [("v", "success", "1", None)]


def test_callbacks_run_after_the_step_commits() -> None:
    h = harness()
    h.add("q:a")
    seen: list[object] = []

    def callback(result: ResultSet) -> None:
        seen.append(h.get("q:a"))  # re-enters the store: the ACK is complete

    h.store.result_blocking(QueueResultBlocking(key="q:a", timeout=5), callback)
    h.ack("q:a", "v")
    assert seen == [[]]


def test_waiter_cancel_is_idempotent_and_leaves_no_entry() -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    waiter = h.blocking("q:a", got)
    assert isinstance(waiter, Waiter)
    assert h.store.stats().waiters == 1
    waiter.cancel()
    waiter.cancel()
    assert h.store.stats().waiters == 0
    h.ack("q:a", "v")
    assert got == []
    # nobody consumed it
    assert h.result("q:a") == [("v", "success", "1", None)]


def test_cancel_after_delivery_is_a_no_op() -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    waiter = h.blocking(1, got)
    h.ack(1, "v")
    assert isinstance(waiter, Waiter)
    waiter.cancel()
    assert h.store.stats().waiters == 0


@pytest.mark.parametrize("how", ["cancel", "purge", "truncate"])
def test_cancel_purge_truncate_wake_nobody(how: str) -> None:
    h = harness()
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking("q:a", got)
    h.blocking(1, got)
    if how == "cancel":
        h.cancel("q:a")
    elif how == "purge":
        h.run(QueuePurge(prefix="q"))
    else:
        h.run(QueueTruncate())
    assert got == []
    assert h.store.stats().waiters == 2


def test_failing_callback_does_not_undo_or_raise() -> None:
    h = harness()
    h.add("q:a")

    def boom(result: ResultSet) -> None:
        raise RuntimeError("server bug")

    got: list[ResultSet] = []
    h.store.result_blocking(QueueResultBlocking(key="q:a", timeout=5), boom)
    h.blocking("q:a", got)
    assert h.ack("q:a", "v")
    assert len(got) == 1


def test_older_result_is_latest_again_after_a_path_waiter_took_the_newer() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "one")
    h.add("q:a")
    got: list[ResultSet] = []
    h.blocking("q:a", [])  # consumes "one" at once
    h.blocking("q:a", got)
    h.ack("q:a", "two")  # delivered to the path waiter and deleted
    assert got[0].rows == [("two", "success", "2", None)]
    assert [r[0] for r in h.store.system_table("queue_results").rows] == [1]
    assert h.result("q:a") == []  # "one" was consumed by the first RESULT_BLOCKING
    assert h.result(1) == [("one", "success", "1", None)]


def test_expiry_of_older_result_keeps_the_latest() -> None:
    h = harness(Limits(results_expire_ms=1000))
    h.add("q:a")
    h.ack("q:a", "one")
    h.advance(600)
    h.add("q:a")
    h.ack("q:a", "two")
    h.advance(401)
    assert h.result(1) == []
    assert h.result("q:a") == [("two", "success", "2", None)]
