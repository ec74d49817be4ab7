"""The console's views over hand-made store rows (no server, no clock)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.results import ColumnType, columns
from cubequeue.server.console.views import (
    CUBE_HEARTBEAT_TIMEOUT_MS,
    departures_view,
    item_preview,
    items_view,
    prefix_of,
    prefixes_view,
    truncate_text,
)

_S, _I, _B = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN
PREFIX_COLS = columns(("prefix", _S), ("pending", _I), ("active", _I), ("results", _I),
                      ("oldest_pending_ms", _I), ("max_heartbeat_age_ms", _I),
                      ("last_concurrency", _I))
QUEUE_COLS = columns(("id", _S), ("queue_id", _I), ("prefix", _S), ("created", _I),
                     ("status", _S), ("priority", _I), ("heartbeat", _I), ("orphaned", _I),
                     ("value", _S), ("extra", _S), ("process_id", _S), ("exclusive", _B),
                     ("external_id", _S))
LOG_COLS = columns(("id", _I), ("path", _S), ("reason", _S), ("at", _I), ("queued_ms", _I),
                   ("active_ms", _I))


def test_prefixes_sorted_by_depth_filtered_and_limited() -> None:
    rows = [("a", 1, 0, 0, 10, None, None), ("b", 5, 2, 1, 10, 5, 2),
            ("ab", 3, 0, 0, 10, None, 1), ("c", 0, 0, 3, None, None, None)]
    view = prefixes_view(PREFIX_COLS, rows, limit=2)
    assert [p["prefix"] for p in view["prefixes"]] == ["b", "ab"]  # type: ignore[index]
    assert view["matched"] == 4 and view["shown"] == 2
    view = prefixes_view(PREFIX_COLS, rows, filter_text="A", limit=10)
    assert [p["prefix"] for p in view["prefixes"]] == ["ab", "a"]  # type: ignore[index]


def test_stalled_and_orphan_prone_use_cube_defaults_without_client_timeouts() -> None:
    over = CUBE_HEARTBEAT_TIMEOUT_MS + 1
    rows = [("stuck", 0, 1, 0, None, over, 1), ("old", 1, 0, 0, over, None, None),
            ("fine", 1, 1, 0, 5, 5, 1)]
    by = {p["prefix"]: p for p in prefixes_view(PREFIX_COLS, rows, limit=10)["prefixes"]}  # type: ignore[attr-defined]
    assert by["stuck"]["stalled"] and not by["stuck"]["orphan_prone"]
    assert by["old"]["orphan_prone"] and not by["old"]["stalled"]
    assert not by["fine"]["stalled"] and not by["fine"]["orphan_prone"]
    assert by["fine"]["timeouts_from"] == "cube-defaults"


def test_client_timeouts_win_when_the_store_reports_them() -> None:
    cols = (*PREFIX_COLS, *columns(("last_heartbeat_timeout_ms", _I),
                                   ("last_orphaned_timeout_ms", _I)))
    rows = [("q", 1, 1, 0, 2000, 2000, 1, 1000, 5000)]
    (row,) = prefixes_view(cols, rows, limit=10)["prefixes"]  # type: ignore[misc]
    assert row["timeouts_from"] == "client"
    assert row["stalled"] and not row["orphan_prone"]
    assert row["last_heartbeat_timeout_ms"] == 1000


def _item(qid, prefix, status="pending", hb=None, value="{}"):
    return (f"k{qid}", qid, prefix, 1000, status, 0, hb, None, value, None, "w1", False, None)


def test_items_of_one_prefix_with_ages_and_sizes() -> None:
    rows = [_item(1, "q", value="é" * 3), _item(2, "other"), _item(3, "q", "active", hb=4000)]
    view = items_view(QUEUE_COLS, rows, prefix="q", now_ms=5000, limit=1)
    assert view["total"] == 2 and view["shown"] == 1
    (first,) = view["items"]  # type: ignore[misc]
    assert first["id"] == 3  # the active item comes first
    (_, item) = items_view(QUEUE_COLS, rows, prefix="q", now_ms=5000, limit=2)["items"]  # type: ignore[misc]
    assert item["id"] == 1 and item["age_ms"] == 4000 and item["heartbeat_age_ms"] is None
    assert item["payload_bytes"] == 6  # UTF-8 bytes, not characters
    assert "value" not in item  # payloads only through item_preview
    (active,) = items_view(QUEUE_COLS, rows[2:], prefix="q", now_ms=5000, limit=5)["items"]  # type: ignore[misc]
    assert active["heartbeat_age_ms"] == 1000


def test_preview_truncates_and_reports_missing_items() -> None:
    rows = [_item(7, "q", value="x" * 10)]
    preview = item_preview(QUEUE_COLS, rows, queue_id=7, limit=4)
    assert preview is not None
    assert preview["payload"] == "xxxx" and preview["payload_truncated"] is True
    assert preview["extra"] is None and preview["extra_truncated"] is False
    assert item_preview(QUEUE_COLS, rows, queue_id=8, limit=4) is None
    assert truncate_text("abc", 3) == ("abc", False)


def test_departures_newest_first_of_one_prefix() -> None:
    rows = [(1, "q:a", "acked", 100, 5, 1), (2, "r:b", "purged", 200, 5, None),
            (3, "a:b:q:c", "cancelled", 300, 5, 2), (4, "q:d", "expired", 400, 9, None)]
    view = departures_view(LOG_COLS, rows, prefix="q", now_ms=1000, limit=10)
    assert [d["id"] for d in view["departures"]] == [4, 1]  # type: ignore[index]
    assert view["departures"][0]["ago_ms"] == 600  # type: ignore[index]
    everything = departures_view(LOG_COLS, rows, prefix=None, now_ms=1000, limit=2)
    assert [d["id"] for d in everything["departures"]] == [4, 3]  # type: ignore[index]
    assert prefix_of("a:b:q:c") == "a:b:q" and prefix_of("nocolon") == ""


item_st = st.tuples(st.integers(0, 3), st.sampled_from(["pending", "active"]),
                    st.integers(-2, 2), st.sampled_from(["q", "other"]))


@settings(deadline=None, max_examples=200)
@given(specs=st.lists(item_st, max_size=40), limit=st.integers(1, 10))
def test_items_in_claim_order_as_queue_pending_lists_them(specs, limit) -> None:
    """Active items first (ascending id, as QUEUE ACTIVE), then pending ones in the order
    QUEUE PENDING gives (priority descending, older first, then ascending id): the order
    they will be claimed, whatever order the table hands them in."""
    rows = [(f"k{qid}", qid, prefix, 1000 + created, status, priority, None, None, "{}",
             None, None, False, None)
            for qid, (created, status, priority, prefix) in enumerate(specs, start=1)]
    mine = [r for r in rows if r[2] == "q"]
    active = sorted((r for r in mine if r[4] == "active"), key=lambda r: r[1])
    pending = sorted((r for r in mine if r[4] == "pending"), key=lambda r: (-r[5], r[3], r[1]))
    expected = [r[1] for r in [*active, *pending]][:limit]
    view = items_view(QUEUE_COLS, list(reversed(rows)), prefix="q", now_ms=5000, limit=limit)
    assert [it["id"] for it in view["items"]] == expected  # type: ignore[index]
    assert view["total"] == len(mine)
