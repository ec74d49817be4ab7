"""CANCEL, GET, HEARTBEAT, MERGE_EXTRA, LIST/PENDING/ACTIVE and TO_CANCEL (``docs/dialect.md``
§3.5 to §3.10, §8 rule 2)."""

from __future__ import annotations

import pytest
from storage_testkit import START, harness

from cubequeue.grammar.commands import QueueCancel, QueueHeartbeat, QueueList, QueueMergeExtra
from cubequeue.grammar.errors import InvalidTextRepresentation
from cubequeue.grammar.results import EMPTY

# -- CANCEL / GET ---------------------------------------------------------------------------


def test_cancel_returns_payload_and_extra_and_deletes_any_status() -> None:
    h = harness()
    h.add("q:a", "pa")
    h.add("q:b", "pb")
    h.retrieve("q:b", 5)
    h.merge("q:b", "{}")
    frame = h.frame(QueueCancel(key="q:a"))
    assert [c.name for c in frame.columns] == ["payload", "extra"]
    assert frame.rows == [("pa", None)]
    assert h.cancel(2) == [("pb", "{}")]
    assert h.store.system_table("queue").rows == []


def test_cancel_unknown_is_zero_rows_with_columns() -> None:
    h = harness()
    frame = h.frame(QueueCancel(key=3))
    assert frame.rows == [] and not frame.is_empty_frame


def test_cancel_creates_no_result_and_ignores_exclusivity() -> None:
    h = harness()
    h.add("q:a", pid="p1", exclusive=True)
    assert h.store.execute(QueueCancel(key="q:a"), "p2").rows == [("p", None)]
    assert h.result(1) == []


def test_get_is_read_only_and_unfiltered() -> None:
    h = harness()
    h.add("q:a", "x", pid="p1", exclusive=True)
    assert h.get("q:a") == [("x", None)]
    assert h.get(1) == [("x", None)]
    assert h.get("q:zz") == []
    assert h.get(2) == []


def test_quoted_digits_are_a_path_not_an_id() -> None:
    h = harness()
    h.add("3")
    h.add("q:x")
    assert h.get("3") == [("p", None)]
    assert h.get(3) == []


# -- HEARTBEAT ----------------------------------------------------------------------------


def test_heartbeat_returns_empty_frame_and_sets_time() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a")
    h.advance(700)
    assert h.frame(QueueHeartbeat(key=1)) is EMPTY
    assert h.store.system_table("queue").rows[0][6] == START + 700


def test_heartbeat_on_pending_item_and_unknown_key() -> None:
    h = harness()
    h.add("q:a")
    h.advance(5)
    h.heartbeat("q:a")
    h.heartbeat("q:none")
    h.heartbeat(42)
    assert h.store.system_table("queue").rows[0][4:7] == ("pending", 0, START + 5)


def test_heartbeat_does_not_extend_expiry() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a")
    h.advance(4 * 3_600_000 - 1)
    h.heartbeat("q:a")
    h.advance(1)
    assert h.get("q:a") == []


# -- MERGE_EXTRA -------------------------------------------------------------------------


def test_merge_extra_first_write_verbatim() -> None:
    h = harness()
    h.add("q:a")
    assert h.frame(QueueMergeExtra(key="q:a", json='{"first": true}')) is EMPTY
    assert h.get(1) == [("p", '{"first": true}')]


def test_merge_extra_first_write_validated() -> None:
    """the first write used to be stored unchecked; now it is refused
    with 22P02 like every later one, and the item keeps no extra."""
    h = harness()
    h.add("q:a")
    with pytest.raises(InvalidTextRepresentation) as err:
        h.merge("q:a", "not json")
    assert err.value.sqlstate == "22P02"
    assert h.get(1) == [("p", None)]


def test_merge_extra_shallow_merge_sorted_compact() -> None:
    h = harness()
    h.add("q:a")
    h.merge("q:a", '{"z": 1, "a": {"x": 1}}')
    h.merge(1, '{"m": "é", "a": {"y": 2}}')
    assert h.get(1) == [("p", '{"a":{"y":2},"m":"é","z":1}')]


def test_merge_extra_null_clears_then_verbatim_again() -> None:
    h = harness()
    h.add("q:a")
    h.merge("q:a", '{"a": 1}')
    h.merge("q:a", "null")
    assert h.get(1) == [("p", None)]
    h.merge("q:a", '{"b":  2}')
    assert h.get(1) == [("p", '{"b":  2}')]


def test_merge_extra_non_object_replaces() -> None:
    h = harness()
    h.add("q:a")
    h.merge("q:a", '{"a": 1}')
    h.merge("q:a", "[3, 2]")
    assert h.get(1) == [("p", "[3,2]")]
    h.merge("q:a", '{"b": 1}')
    assert h.get(1) == [("p", '{"b":1}')]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('{"a":1}', "nope", "invalid JSON: Expecting value at line 1 column 1"),
        ("nope", '{"a":1}', "invalid JSON: Expecting value at line 1 column 1"),
        ('{"a":1}', "", "invalid JSON: Expecting value at line 1 column 1"),
        ('{"a":1}', '{"a":1} x', "invalid JSON: Extra data at line 1 column 9"),
        ('{"a":1}', "NaN", "invalid JSON: NaN is not JSON"),
        ('{"a":1}', "1e400", "invalid JSON: number out of range: 1e400"),
    ],
)
def test_merge_extra_invalid_json_is_22p02_and_changes_nothing(
    old: str, new: str, message: str
) -> None:
    h = harness()
    h.add("q:a")
    item = h.store._queue.by_id(1)  # an invalid old text can only come from an older log
    assert item is not None
    item.extra = old
    with pytest.raises(InvalidTextRepresentation) as err:
        h.merge("q:a", new)
    assert err.value.sqlstate == "22P02"
    assert str(err.value) == message
    assert h.get(1) == [("p", old)]


def test_merge_extra_unknown_key_ignored() -> None:
    h = harness()
    assert h.frame(QueueMergeExtra(key=9, json="garbage")) is EMPTY


# -- LIST / PENDING / ACTIVE ---------------------------------------------------------------


def test_list_columns_with_and_without_payload() -> None:
    h = harness()
    h.add("q:a", "pa")
    frame = h.frame(QueueList(prefix="q"))
    assert [c.name for c in frame.columns] == ["id", "queue_id", "status", "extra"]
    assert frame.rows == [("a", "1", "pending", None)]
    frame = h.frame(QueueList(prefix="q", with_payload=True))
    assert [c.name for c in frame.columns][-1] == "payload"
    assert frame.rows == [("a", "1", "pending", None, "pa")]


def test_list_orders_priority_desc_created_asc_id_asc_mixing_statuses() -> None:
    h = harness()
    h.add("q:old_low", priority=0)
    h.advance(10)
    h.add("q:new_high", priority=5)
    h.add("q:new_high2", priority=5)
    h.advance(10)
    h.add("q:negative", priority=-1)
    h.add("q:mid", priority=0)
    h.retrieve("q:new_high2", 10)
    h.retrieve("q:old_low", 10)
    assert [(r[0], r[2]) for r in h.list("q")] == [
        ("new_high", "pending"),
        ("new_high2", "active"),
        ("old_low", "active"),
        ("mid", "pending"),
        ("negative", "pending"),
    ]
    assert [r[0] for r in h.list("q", "pending")] == ["new_high", "mid", "negative"]


def test_active_is_in_id_order_not_retrieval_or_priority() -> None:
    h = harness()
    h.add("q:a", priority=0)
    h.add("q:b", priority=9)
    h.add("q:c", priority=5)
    h.retrieve("q:c", 5)
    h.retrieve("q:a", 5)
    h.retrieve("q:b", 5)
    assert [r[0] for r in h.list("q", "active")] == ["a", "b", "c"]


def test_list_prefix_is_exact_and_keys_not_paths() -> None:
    h = harness()
    h.add("a:b:c")
    h.add("a:x")
    assert [r[0] for r in h.list("a")] == ["x"]
    assert [r[0] for r in h.list("a:b")] == ["c"]
    assert h.list("a:") == []


def test_list_hides_exclusive_items_of_other_processes() -> None:
    h = harness()
    h.add("q:mine", pid="p1", exclusive=True)
    h.add("q:theirs", pid="p2", exclusive=True)
    h.add("q:shared", pid="p2")
    h.add("q:anon")
    assert [r[0] for r in h.list("q", pid="p1")] == ["mine", "shared", "anon"]
    assert [r[0] for r in h.list("q")] == ["shared", "anon"]
    h.retrieve("q:theirs", 5, pid="p2")
    assert [r[0] for r in h.list("q", "active", pid="p1")] == []
    assert [r[0] for r in h.list("q", "active", pid="p2")] == ["theirs"]


def test_list_shows_extra() -> None:
    h = harness()
    h.add("q:a")
    h.merge(1, '{"k":1}')
    assert h.list("q") == [("a", "1", "pending", '{"k":1}')]


def test_pending_page_limits_rows() -> None:
    h = harness()
    for i in range(30):
        h.add(f"q:{i}", priority=i % 3)
    page = h.store.pending_page("q", 10)
    assert page.rows == h.list("q", "pending")[:10]


# -- TO_CANCEL / STALLED / ORPHANED ------------------------------------------------------


def test_to_cancel_selects_orphaned_pending_strictly_greater() -> None:
    h = harness()
    h.add("q:a")
    h.advance(1000)
    assert h.to_cancel("q", None, 1000) == []
    h.advance(1)
    assert h.to_cancel("q", None, 1000) == [("a", "1")]


def test_to_cancel_pending_needs_orphaned_timeout() -> None:
    h = harness()
    h.add("q:a")
    h.advance(10_000)
    assert h.to_cancel("q", 1, None) == []


def test_to_cancel_item_own_orphaned_wins_over_command_timeout() -> None:
    h = harness()
    h.add("q:own", orphaned=5)  # orphaned at START + 5 s
    h.add("q:plain")
    h.advance(3000)
    assert h.to_cancel("q", None, 1000) == [("plain", "2")]
    h.advance(2000)
    assert h.to_cancel("q", None, 10**9) == []  # orphaned == now is not < now
    h.advance(1)
    assert h.to_cancel("q", None, 10**9) == [("own", "1")]


def test_to_cancel_pending_heartbeat_is_ignored() -> None:
    h = harness()
    h.add("q:a")
    h.advance(2000)
    h.heartbeat("q:a")
    assert h.to_cancel("q", None, 1000) == [("a", "1")]


def test_to_cancel_selects_stalled_active_by_heartbeat() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:a", 5)
    h.advance(500)
    h.retrieve("q:b", 5)
    h.advance(600)
    assert h.to_cancel("q", 1000, None) == [("a", "1")]
    h.heartbeat("q:a")
    assert h.to_cancel("q", 1000, None) == []
    h.advance(1001)
    assert h.to_cancel("q", 1000, None) == [("a", "1"), ("b", "2")]


def test_to_cancel_active_item_own_orphaned_is_ignored() -> None:
    h = harness()
    h.add("q:a", orphaned=1)
    h.retrieve("q:a")
    h.advance(5000)
    assert h.to_cancel("q", None, 1) == []
    assert h.to_cancel("q", 10_000, 1) == []


def test_to_cancel_mixes_in_ascending_id_and_ignores_exclusive() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b", pid="p1", exclusive=True)
    h.add("q:c")
    h.retrieve("q:c", 5)
    h.retrieve("q:a", 5)
    h.advance(10_000)
    assert h.to_cancel("q", 1000, 1000) == [("a", "1"), ("b", "2"), ("c", "3")]


def test_to_cancel_changes_nothing_and_prefix_is_exact() -> None:
    h = harness()
    h.add("q:x:a")
    h.advance(10_000)
    assert h.to_cancel("q", 1, 1) == []
    assert h.to_cancel("q:x", 1, 1) == [("a", "1")]
    assert h.get(1) == [("p", None)]
