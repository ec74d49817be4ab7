"""QUEUE RETRIEVE (``docs/dialect.md`` §3.3) and ADD_AND_RETRIEVE, the fast track (§8 rule 1)."""

from __future__ import annotations

import pytest
from storage_testkit import START, harness

from cubequeue.grammar.commands import QueueAddAndRetrieve, QueueRetrieve
from cubequeue.grammar.errors import InvalidParameterValue

# -- RETRIEVE -----------------------------------------------------------------------------


def test_retrieve_success_row_and_columns() -> None:
    h = harness()
    h.add("q:a", "payload-a")
    h.add("q:b")
    frame = h.frame(QueueRetrieve(path="q:a", concurrency=2))
    assert [c.name for c in frame.columns] == ["payload", "extra", "pending", "active", "id"]
    assert frame.rows == [("payload-a", None, 1, "a", "1")]


def test_retrieve_sets_status_active_and_heartbeat_now() -> None:
    h = harness()
    h.add("q:a")
    h.advance(500)
    h.retrieve("q:a")
    row = h.store.system_table("queue").rows[0]
    assert (row[4], row[6]) == ("active", START + 500)


def test_retrieve_returns_extra() -> None:
    h = harness()
    h.add("q:a")
    h.merge("q:a", '{"k": 1}')
    assert h.retrieve("q:a")[0][:2] == ("p", '{"k": 1}')


def test_retrieve_concurrency_defaults_to_one() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    assert h.frame(QueueRetrieve(path="q:a")).rows[0][4] == "1"
    assert h.frame(QueueRetrieve(path="q:b")).rows == []


def test_claimed_key_is_appended_last_even_with_lower_id() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.add("q:c")
    h.retrieve("q:c", 5)
    h.retrieve("q:b", 5)
    assert h.retrieve("q:a", 5)[0][3] == "b,c,a"


def test_active_list_is_keys_not_paths_in_id_order() -> None:
    h = harness()
    h.add("x:y:a")
    h.add("x:y:b")
    h.retrieve("x:y:b", 5)
    h.retrieve("x:y:a", 5)
    h.add("x:y:c")
    assert h.retrieve("x:y:c", 5)[0][3] == "a,b,c"


def test_not_enough_concurrency_checked_first_even_for_missing_item() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a")
    assert h.retrieve("q:missing", 1) == [(None, None, 0, "a", None)]


def test_concurrency_zero_never_succeeds() -> None:
    h = harness()
    h.add("q:a")
    assert h.retrieve("q:a", 0) == [(None, None, 1, None, None)]


def test_retrieve_pending_count_plays_no_part() -> None:
    h = harness()
    for k in "abcdef":
        h.add(f"q:{k}")
    assert h.retrieve("q:f", 1)[0][4] == "6"


def test_not_found_without_extended_is_zero_rows() -> None:
    h = harness()
    assert h.retrieve("q:none", extended=False) == []


def test_not_found_extended_row() -> None:
    h = harness()
    h.add("q:a")
    assert h.retrieve("q:none") == [(None, None, 1, None, None)]


def test_lock_failed_on_active_item_and_no_heartbeat_refresh() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a", 5)
    h.advance(1000)
    assert h.retrieve("q:a", 5) == [(None, None, 0, "a", None)]
    assert h.retrieve("q:a", 5, extended=False) == []
    assert h.store.system_table("queue").rows[0][6] == START


def test_failure_changes_nothing() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:a")
    before = h.store.system_table("queue").rows
    h.retrieve("q:b", 1)
    assert h.store.system_table("queue").rows == before


def test_exclusive_item_same_process_can_retrieve() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.retrieve("q:a", pid="p1")[0][4] == "1"


def test_exclusive_item_other_process_fails_silently() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.retrieve("q:a", pid="p2") == [(None, None, 1, None, None)]


def test_exclusive_item_without_connection_process_id_errors() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    with pytest.raises(InvalidParameterValue) as err:
        h.retrieve("q:a")
    assert str(err.value) == (
        "QUEUE RETRIEVE requires a process_id in the connection context (x-process-id header)"
    )
    assert h.store.system_table("queue").rows[0][4] == "pending"


def test_exclusive_error_records_no_last_concurrency() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    with pytest.raises(InvalidParameterValue):
        h.retrieve("q:a", 7)
    assert h.store.system_table("queue_prefixes").rows[0][6] is None


def test_non_exclusive_item_of_another_process_can_be_retrieved() -> None:
    h = harness()
    h.add("q:a", pid="p1")
    assert h.retrieve("q:a", pid="p2")[0][4] == "1"
    h.add("q:b", pid="p1")
    assert h.retrieve("q:b", 5)[0][4] == "2"


def test_retrieve_ignores_priority() -> None:
    h = harness()
    h.add("q:low", priority=-5)
    h.add("q:high", priority=100)
    assert h.retrieve("q:low")[0][4] == "1"


def test_retrieve_path_is_exact() -> None:
    h = harness()
    h.add("q:a")
    assert h.retrieve("q:A") == [(None, None, 1, None, None)]


def test_retrieve_records_last_concurrency_even_on_failure() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:zzz", 3)
    assert h.store.system_table("queue_prefixes").rows[0][6] == 3


# -- ADD_AND_RETRIEVE (§8 rule 1) ---------------------------------------------------------


def test_fast_track_claims_on_idle_prefix() -> None:
    h = harness()
    frame = h.frame(QueueAddAndRetrieve(path="q:a", payload="x", concurrency=2))
    assert [c.name for c in frame.columns] == [
        "id", "added", "pending", "active", "payload", "extra"
    ]
    assert frame.rows == [("1", True, 0, "a", "x", None)]
    row = h.store.system_table("queue").rows[0]
    assert (row[4], row[6]) == ("active", START)


def test_fast_track_burst_claims_first_concurrency_items_then_steps_aside() -> None:
    h = harness()
    assert h.add_retrieve("q:a", 2)[3:5] == ("a", "p")
    assert h.add_retrieve("q:b", 2)[3:5] == ("a,b", "p")
    assert h.add_retrieve("q:c", 2) == ("3", True, 1, "a,b", None, None)
    h.ack("q:a")
    # one active + one other pending = 2 >= concurrency: no claim, priority is respected
    assert h.add_retrieve("q:d", 2) == ("4", True, 2, "b", None, None)


def test_fast_track_counts_other_pending_items() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    assert h.add_retrieve("q:c", 2)[4] is None
    assert h.add_retrieve("q:d", 3)[4] is None
    assert h.add_retrieve("q:e", 10) == ("5", True, 4, "e", "p", None)


def test_fast_track_claims_existing_pending_item_and_keeps_its_payload() -> None:
    h = harness()
    h.add("q:a", "original")
    h.merge("q:a", '{"x":1}')
    assert h.add_retrieve("q:a", 1, "ignored") == ("1", False, 0, "a", "original", '{"x":1}')


def test_fast_track_does_not_reclaim_active_item() -> None:
    h = harness()
    h.add_retrieve("q:a", 5)
    assert h.add_retrieve("q:a", 5) == ("1", False, 0, "a", None, None)


def test_fast_track_skips_other_process_exclusive_item_without_error() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.add_retrieve("q:a", 5, pid="p2") == ("1", False, 1, None, None, None)
    assert h.add_retrieve("q:a", 5) == ("1", False, 1, None, None, None)
    assert h.add_retrieve("q:a", 5, pid="p1")[4] == "p"


def test_fast_track_exclusive_new_item_claimed_by_its_process() -> None:
    h = harness()
    assert h.add_retrieve("q:a", 1, pid="p1", exclusive=True)[4] == "p"


def test_fast_track_exclusive_needs_process_id() -> None:
    h = harness()
    with pytest.raises(InvalidParameterValue, match="QUEUE ADD EXCLUSIVE"):
        h.add_retrieve("q:a", 1, exclusive=True)
    assert h.store.system_table("queue").rows == []


def test_fast_track_concurrency_zero_only_adds() -> None:
    h = harness()
    assert h.add_retrieve("q:a", 0) == ("1", True, 1, None, None, None)


def test_fast_track_counts_all_processes_items() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.add_retrieve("q:b", 1, pid="p2")[4] is None


def test_fast_track_records_last_concurrency() -> None:
    h = harness()
    h.add_retrieve("q:a", 9)
    assert h.store.system_table("queue_prefixes").rows[0][6] == 9
