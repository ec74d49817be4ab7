"""QUEUE ADD (``docs/dialect.md`` §3.1, §2.1, §2.2, §2.5) and the item caps (§6)."""

from __future__ import annotations

import pytest
from storage_testkit import HOUR, START, harness

from cubequeue.grammar.commands import QueueAdd, QueueAddAndRetrieve
from cubequeue.grammar.errors import InvalidParameterValue, LimitExceeded
from cubequeue.storage.limits import Limits


def test_add_returns_id_added_and_pending_count() -> None:
    h = harness()
    frame = h.frame(QueueAdd(path="q:a", payload="x"))
    assert [c.name for c in frame.columns] == ["id", "added", "pending"]
    assert frame.rows == [("1", True, 1)]
    assert h.add("q:b") == ("2", True, 2)


def test_ids_start_at_one_and_are_shared_across_prefixes() -> None:
    h = harness()
    assert h.add("a:1")[0] == "1"
    assert h.add("b:1")[0] == "2"
    assert h.add("nocolon")[0] == "3"


def test_duplicate_path_returns_existing_id_and_changes_nothing() -> None:
    h = harness()
    h.add("q:a", "first", priority=1, external_id="e1")
    assert h.add("q:a", "second", priority=9, orphaned=5, external_id="e2") == ("1", False, 1)
    assert h.get("q:a") == [("first", None)]
    table = h.store.system_table("queue").rows
    assert len(table) == 1
    row = dict(zip([c.name for c in h.store.system_table("queue").columns], table[0], strict=True))
    assert (row["priority"], row["orphaned"], row["external_id"]) == (1, None, "e1")


def test_duplicate_of_active_item_reports_pending_without_plus_one() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:a")
    assert h.add("q:a") == ("1", False, 1)


def test_duplicate_detection_is_by_full_path_not_key() -> None:
    h = harness()
    h.add("x:k")
    assert h.add("y:k") == ("2", True, 1)


def test_pending_counts_exact_prefix_only() -> None:
    h = harness()
    h.add("a:1")
    h.add("a:b:1")
    h.add("a:2")
    assert h.add("a:3") == ("4", True, 3)
    assert h.add("a:b:2") == ("5", True, 2)


def test_pending_count_includes_other_processes_exclusive_items() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.add("q:b", pid="p2") == ("2", True, 2)


def test_path_prefix_split_examples_section_2_1() -> None:
    h = harness()
    h.add("STANDALONE#queue:abc")
    h.add("a:b:c")
    h.add("abc:")
    h.add("nocolon")
    h.add(":lead")
    rows = {r[1]: (r[0], r[2]) for r in h.store.system_table("queue").rows}
    assert rows[1] == ("abc", "STANDALONE#queue")
    assert rows[2] == ("c", "a:b")
    assert rows[3] == ("", "abc")
    assert rows[4] == ("nocolon", "")
    assert rows[5] == ("lead", "")
    # "nocolon" and ":lead" share the index prefix ""
    assert [r[0] for r in h.list("")] == ["nocolon", "lead"]


def test_path_is_free_again_after_ack_and_gets_a_new_id() -> None:
    h = harness()
    h.add("q:a")
    assert h.ack("q:a")
    assert h.add("q:a") == ("2", True, 1)
    h.cancel(2)
    assert h.add("q:a") == ("3", True, 1)


def test_exclusive_without_process_id_is_refused() -> None:
    h = harness()
    with pytest.raises(InvalidParameterValue) as err:
        h.add("q:a", exclusive=True)
    assert err.value.sqlstate == "22023"
    assert str(err.value) == (
        "QUEUE ADD EXCLUSIVE requires a process_id in the connection context (x-process-id header)"
    )
    assert h.store.system_table("queue").rows == []


def test_external_id_may_be_48_bytes_not_49() -> None:
    h = harness()
    h.add("q:a", external_id="e" * 48)
    with pytest.raises(InvalidParameterValue, match=r"^external_id exceeds maximum allowed length of 48 characters$"):
        h.add("q:b", external_id="e" * 49)


def test_external_id_length_counts_utf8_bytes() -> None:
    h = harness()
    with pytest.raises(InvalidParameterValue):
        h.add("q:b", external_id="é" * 25)  # 50 bytes, 25 characters


def test_process_id_may_be_96_bytes_not_97() -> None:
    h = harness()
    h.add("q:a", pid="p" * 96)
    with pytest.raises(InvalidParameterValue, match=r"^process_id exceeds maximum allowed length of 96 characters$"):
        h.add("q:b", pid="p" * 97)


def test_check_order_exclusive_before_external_id() -> None:
    h = harness()
    with pytest.raises(InvalidParameterValue, match="EXCLUSIVE"):
        h.add("q:a", exclusive=True, external_id="e" * 60)


def test_process_id_is_recorded_for_every_add() -> None:
    h = harness()
    h.add("q:a", pid="p1")
    h.add("q:b", pid="p1", exclusive=True)
    h.add("q:c")
    table = h.store.system_table("queue").rows
    assert [(r[10], r[11]) for r in table] == [("p1", False), ("p1", True), (None, False)]


def test_times_at_add_without_orphaned() -> None:
    h = harness()
    h.add("q:a")
    row = h.store.system_table("queue").rows[0]
    assert (row[3], row[6], row[7]) == (START, None, None)


def test_orphaned_option_sets_absolute_orphaned_and_later_expiry() -> None:
    h = harness()
    h.add("q:a", orphaned=120)
    assert h.store.system_table("queue").rows[0][7] == START + 120_000
    h.advance(120_000 + 2 * HOUR - 1)
    assert h.get("q:a") == [("p", None)]
    h.advance(1)
    assert h.get("q:a") == []


def test_ids_never_reset_by_truncate() -> None:
    from cubequeue.grammar.commands import QueueTruncate

    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.run(QueueTruncate())
    assert h.add("q:a")[0] == "3"


# -- caps (§6) ----------------------------------------------------------------------------


def test_max_items_refuses_add_with_named_option() -> None:
    h = harness(Limits(max_items=2))
    h.add("q:a")
    h.add("q:b")
    with pytest.raises(LimitExceeded) as err:
        h.add("q:c")
    assert err.value.sqlstate == "54000"
    assert "--max-items=2" in str(err.value)
    assert len(h.store.system_table("queue").rows) == 2


def test_max_items_refuses_add_and_retrieve_and_keeps_id_sequence() -> None:
    h = harness(Limits(max_items=1))
    h.add("q:a")
    with pytest.raises(LimitExceeded, match="--max-items=1"):
        h.run(QueueAddAndRetrieve(path="q:b", payload="x", concurrency=5))
    assert h.store.system_table("queue").rows[0][1] == 1
    h.ack("q:a")
    assert h.add("q:b")[0] == "2"


def test_max_items_allows_duplicate_add() -> None:
    h = harness(Limits(max_items=1))
    h.add("q:a")
    assert h.add("q:a") == ("1", False, 1)


def test_max_items_counts_all_statuses_and_frees_on_ack() -> None:
    h = harness(Limits(max_items=2))
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:a")
    with pytest.raises(LimitExceeded):
        h.add("q:c")
    h.ack("q:a")
    assert h.add("q:c")[1] is True


def test_max_payload_bytes_refuses_add_payload() -> None:
    h = harness(Limits(max_payload_bytes=4))
    h.add("q:a", "abcd")
    with pytest.raises(LimitExceeded) as err:
        h.add("q:b", "abcde")
    assert "--max-payload-bytes=4" in str(err.value)
    assert err.value.sqlstate == "54000"
    assert [r[1] for r in h.store.system_table("queue").rows] == [1]


def test_max_payload_bytes_counts_utf8_bytes() -> None:
    h = harness(Limits(max_payload_bytes=4))
    with pytest.raises(LimitExceeded):
        h.add("q:a", "ééé")  # 6 bytes
    h.add("q:a", "éé")


def test_max_payload_bytes_refuses_ack_result_and_keeps_item() -> None:
    h = harness(Limits(max_payload_bytes=3))
    h.add("q:a", "abc")
    with pytest.raises(LimitExceeded, match="--max-payload-bytes=3"):
        h.ack("q:a", "abcd")
    assert h.get("q:a") == [("abc", None)]
    assert h.ack("q:a", "abc")
    assert h.result(1) == [("abc", "success", "1", None)]
