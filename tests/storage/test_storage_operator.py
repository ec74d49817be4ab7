"""Operator features (§3.14, §4.8, §5.2): purge, truncate, system.queue_prefixes, system.queue_log,
departure reasons, SYS CLOCK, SYS CACHESTORE, system tables and stats (§5, §8 rule 11)."""

from __future__ import annotations

import pytest
from storage_testkit import START, harness

from cubequeue.grammar.commands import (
    CacheGet,
    CachePurge,
    CacheSet,
    QueuePurge,
    QueueResultBlocking,
    QueueTruncate,
    SysCachestore,
    SysClock,
)
from cubequeue.grammar.errors import (
    FeatureNotSupported,
    InsufficientPrivilege,
    InternalError,
    InvalidParameterValue,
)
from cubequeue.grammar.results import ColumnType
from cubequeue.storage.clock import AdjustableClock, FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

S, I, B, T = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP  # noqa: E741 - column type shorthands

# -- PURGE / TRUNCATE ---------------------------------------------------------------------


def _three(h) -> None:  # type: ignore[no-untyped-def]
    h.add("q:a")
    h.add("q:b")
    h.add("q:c")
    h.add("other:x")
    h.retrieve("q:b", 5)


@pytest.mark.parametrize(("status", "removed", "left"), [
    (None, 3, []), ("pending", 2, ["b"]), ("active", 1, ["a", "c"]),
])
def test_purge_counts_and_leaves_the_rest(status: str | None, removed: int, left: list[str]) -> None:
    h = harness()
    _three(h)
    frame = h.frame(QueuePurge(prefix="q", status=status))  # type: ignore[arg-type]
    assert [(c.name, c.type) for c in frame.columns] == [("removed", I)]
    assert frame.rows == [(removed,)]
    assert sorted(r[0] for r in h.list("q")) == left
    assert h.list("other") == [("x", "4", "pending", None)]
    assert {d.reason for d in h.departures} == {"purged"}


def test_purge_unknown_prefix_removes_zero_and_keeps_results() -> None:
    h = harness()
    h.add("q:a")
    h.ack("q:a", "v")
    assert h.run(QueuePurge(prefix="nothing")) == [(0,)]
    assert h.run(QueuePurge(prefix="q")) == [(0,)]
    assert h.result(1) == [("v", "success", "1", None)]


def test_truncate_removes_items_and_results_and_logs_truncated() -> None:
    h = harness()
    _three(h)
    h.ack("q:a", "v")
    assert h.frame(QueueTruncate()).is_empty_frame
    assert h.store.system_table("queue").rows == []
    assert h.store.system_table("queue_results").rows == []
    assert h.store.system_table("queue_prefixes").rows == []
    assert [d.reason for d in h.departures] == ["acked", "truncated", "truncated", "truncated"]


def test_cache_purge_goes_to_the_cache() -> None:
    h = harness()
    h.run(CacheSet(key="c:1", value="v"))
    h.run(CacheSet(key="c:2", value="v"))
    h.run(CacheSet(key="d:1", value="v"))
    assert h.run(CachePurge(prefix="c")) == [(2,)]
    assert h.run(CacheGet(key="d:1")) == [("v",)]


# -- system.queue_prefixes ----------------------------------------------------------------


def test_queue_prefixes_scripted_workload_exact_rows() -> None:
    h = harness()
    h.add("a:1")
    h.advance(100)
    h.add("a:2")
    h.add("a:3")
    h.add("b:1")
    h.retrieve("a:2", 4)
    h.advance(50)
    h.ack("b:1", "r")
    h.advance(25)
    frame = h.store.system_table("queue_prefixes")
    assert [(c.name, c.type) for c in frame.columns] == [
        ("prefix", S), ("pending", I), ("active", I), ("results", I),
        ("oldest_pending_ms", I), ("max_heartbeat_age_ms", I), ("last_concurrency", I),
        ("last_heartbeat_timeout_ms", I), ("last_orphaned_timeout_ms", I),
    ]
    assert frame.rows == [
        ("a", 2, 1, 0, 175, 75, 4, None, None), ("b", 0, 0, 1, None, None, None, None, None)
    ]


def test_queue_prefixes_heartbeat_age_tracks_stalest_active_item() -> None:
    h = harness()
    h.add("a:1")
    h.add("a:2")
    h.retrieve("a:1", 5)
    h.advance(10)
    h.retrieve("a:2", 5)
    h.advance(10)
    assert h.store.system_table("queue_prefixes").rows[0][5] == 20
    h.heartbeat("a:1")
    assert h.store.system_table("queue_prefixes").rows[0][5] == 10
    h.ack("a:2", None)
    assert h.store.system_table("queue_prefixes").rows[0][5] == 0


# -- system.queue_log and departure reasons --------------------------------------------


def test_departure_reasons_and_times() -> None:
    h = harness(Limits(queue_log_size=10))
    h.add("q:a")
    h.advance(100)
    h.retrieve("q:a")
    h.advance(50)
    h.ack("q:a")
    h.add("q:b")
    h.advance(5)
    h.cancel("q:b")
    frame = h.store.system_table("queue_log")
    assert [(c.name, c.type) for c in frame.columns] == [
        ("id", I), ("path", S), ("reason", S), ("at", T), ("queued_ms", I), ("active_ms", I),
    ]
    assert frame.rows == [
        (1, "q:a", "acked", START + 150, 100, 50),
        (2, "q:b", "cancelled", START + 155, 5, None),
    ]


def test_cancel_of_stalled_item_under_latest_to_cancel_is_cancelled_stalled() -> None:
    h = harness()
    h.add("q:a")
    h.retrieve("q:a")
    h.advance(2000)
    assert h.to_cancel("q", 1000, 1000) == [("a", "1")]
    h.cancel(1)
    assert h.departures[-1].reason == "cancelled_stalled"


def test_cancel_of_orphaned_item_is_cancelled_orphaned() -> None:
    h = harness()
    h.add("q:a")
    h.to_cancel("q", 1000, 1000)  # timeouts recorded even before the item is orphaned
    h.advance(1001)
    h.cancel("q:a")
    assert h.departures[-1].reason == "cancelled_orphaned"


def test_cancel_without_matching_timeouts_is_plain_cancelled() -> None:
    h = harness()
    h.add("q:a")
    h.add("q:b")
    h.retrieve("q:b")
    h.advance(1500)
    h.to_cancel("q", 1000, None)  # STALLED only: pending items are never orphaned here
    h.cancel("q:a")
    assert h.departures[-1].reason == "cancelled"
    h.run(QueueTruncate())
    h.add("q:c")
    h.advance(5000)
    h.cancel("q:c")  # the truncate forgot the prefix's timeouts
    assert h.departures[-1].reason == "cancelled"


def test_queue_log_keeps_the_last_n_rows() -> None:
    h = harness(Limits(queue_log_size=3))
    for i in range(5):
        h.add(f"q:{i}")
        h.ack(f"q:{i}", None)
    assert [r[0] for r in h.store.system_table("queue_log").rows] == [3, 4, 5]
    assert len(h.departures) == 5


def test_on_departure_runs_after_commit() -> None:
    clock = FakeClock(START)
    seen: list[object] = []
    store: MemoryStore

    def hook(departure: object) -> None:
        seen.append(store.system_table("queue").rows)

    from cubequeue.grammar.commands import QueueAck, QueueAdd

    store = MemoryStore(clock, Limits(), on_departure=hook)
    store.execute(QueueAdd(path="q:a", payload="p"))
    store.execute(QueueAck(key="q:a", result=None))
    assert seen == [[]]


# -- SYS CLOCK ------------------------------------------------------------------------------


def test_sys_clock_refused_without_clock_control() -> None:
    h = harness()
    with pytest.raises(InsufficientPrivilege) as err:
        h.run(SysClock())
    assert err.value.sqlstate == "42501"
    assert str(err.value) == "clock control is disabled; start the server with --test-clock"


def test_sys_clock_show_advance_freeze_resume() -> None:
    source = FakeClock(START)
    clock = AdjustableClock(source)
    store = MemoryStore(clock, Limits(clock_control=True))
    frame = store.execute(SysClock())
    assert [(c.name, c.type) for c in frame.columns] == [
        ("now", T), ("offset_ms", I), ("frozen", B)
    ]
    assert frame.rows == [(START, 0, False)]
    assert store.execute(SysClock(action="advance", ms=120_001)).rows == [
        (START + 120_001, 120_001, False)
    ]
    assert store.execute(SysClock(action="freeze")).rows == [(START + 120_001, 120_001, True)]
    source.advance(10)
    assert store.execute(SysClock()).rows[0][0] == START + 120_001
    assert store.execute(SysClock(action="resume")).rows[0][2] is False
    with pytest.raises(InvalidParameterValue):
        store.execute(SysClock(action="advance", ms=-1))


def test_sys_clock_advance_makes_item_orphaned_without_sleeping() -> None:
    store = MemoryStore(AdjustableClock(FakeClock(START)), Limits(clock_control=True))
    from cubequeue.grammar.commands import QueueAdd, QueueToCancel

    store.execute(QueueAdd(path="q:a", payload="p", orphaned=120))
    cmd = QueueToCancel(prefix="q", heartbeat_timeout=1000, orphaned_timeout=120_000)
    assert store.execute(cmd).rows == []
    store.execute(SysClock(action="advance", ms=120_001))
    assert store.execute(cmd).rows == [("a", "1")]


# -- SYS CACHESTORE -------------------------------------------------------------------


@pytest.mark.parametrize("action", ["healthcheck", "persist", "compaction"])
def test_sys_cachestore_empty_frames(action: str) -> None:
    h = harness()
    assert h.frame(SysCachestore(action=action)).is_empty_frame  # type: ignore[arg-type]


def test_sys_cachestore_info_has_21_rows() -> None:
    h = harness()
    h.add("q:a", "12345")  # row size 3 + 5
    h.add("q:bb", "1")  # 4 + 1
    h.ack("q:bb", "xyz")  # result 4 + 3
    frame = h.frame(SysCachestore(action="info"))
    assert [c.name for c in frame.columns] == ["name", "value", "description"]
    names = [r[0] for r in frame.rows]
    assert len(names) == 21
    for table in ("CacheItems", "QueueItems", "QueueResults"):
        assert [n for n in names if n.startswith(table + ".")] == [
            f"{table}.{k}" for k in (
                "keys_total", "size_total", "expired_keys_total", "expired_size_total",
                "min_row_size", "max_row_size", "avg_row_size",
            )
        ]
    values = {r[0]: r[1] for r in frame.rows}
    assert values["QueueItems.keys_total"] == "1"
    assert values["QueueItems.size_total"] == "8 B"
    assert values["QueueResults.keys_total"] == "1"
    assert values["QueueResults.avg_row_size"] == "7 B"
    assert values["QueueItems.expired_keys_total"] == "0"


def test_sys_cachestore_eviction_rows() -> None:
    h = harness()
    frame = h.frame(SysCachestore(action="eviction"))
    assert [r[0] for r in frame.rows] == [
        "stats_total_keys", "stats_total_raw_size", "total_keys_removed",
        "total_size_removed", "total_delete_skipped",
    ]


# -- system tables, stats, dispatch --------------------------------------------------------


def test_system_queue_columns_and_row() -> None:
    h = harness()
    h.add("q:a", "pay", pid="p1", exclusive=True, priority=3, orphaned=2, external_id="e")
    h.merge(1, "{}")
    frame = h.store.system_table("system.queue")
    assert [(c.name, c.type) for c in frame.columns] == [
        ("id", S), ("queue_id", I), ("prefix", S), ("created", T), ("status", S),
        ("priority", I), ("heartbeat", T), ("orphaned", T), ("value", S), ("extra", S),
        ("process_id", S), ("exclusive", B), ("external_id", S),
    ]
    assert frame.rows == [
        ("a", 1, "q", START, "pending", 3, None, START + 2000, "pay", "{}", "p1", True, "e")
    ]


def test_system_queue_results_columns() -> None:
    h = harness()
    frame = h.store.system_table("queue_results")
    assert [(c.name, c.type) for c in frame.columns] == [
        ("id", I), ("path", S), ("expire", T), ("deleted", B), ("value", S), ("external_id", S),
    ]


def test_system_cache_comes_from_the_cache() -> None:
    h = harness()
    h.run(CacheSet(key="c:1", value="v"))
    assert h.store.system_table("cache").rows == [("1", "c", None, "v")]


def test_unknown_system_table() -> None:
    with pytest.raises(FeatureNotSupported):
        harness().store.system_table("nope")


def test_stats() -> None:
    h = harness()
    h.add("b:1")
    h.add("a:1")
    h.add("a:2")
    h.retrieve("a:1")
    h.add("c:1")
    h.ack("c:1", "r")
    h.blocking("x:1", [])
    h.run(CacheSet(key="k", value="vv"))
    stats = h.store.stats()
    assert [(p.prefix, p.pending, p.active) for p in stats.prefixes] == [
        ("a", 1, 1), ("b", 1, 0), ("c", 0, 0)
    ]
    assert (stats.items_total, stats.results_total, stats.waiters) == (3, 1, 1)
    assert (stats.cache_keys, stats.cache_bytes, stats.evictions_total) == (1, 3, 0)


def test_result_blocking_through_execute_is_an_internal_error() -> None:
    with pytest.raises(InternalError):
        harness().run(QueueResultBlocking(key=1, timeout=1))


def test_unbound_parameter_is_an_internal_error_and_changes_nothing() -> None:
    from cubequeue.grammar.commands import Param, QueueAdd, Slot

    h = harness()
    with pytest.raises(InternalError):
        h.run(QueueAdd(path="q:a", payload=Param(1, Slot.TEXT)))
    assert h.store.system_table("queue").rows == []


def test_queue_prefixes_row_lives_while_results_remain_and_keeps_concurrency() -> None:
    h = harness(Limits(results_expire_ms=1000))
    h.add("a:1")
    h.retrieve("a:1", 3)
    h.ack("a:1", "r")
    assert h.store.system_table("queue_prefixes").rows == [
        ("a", 0, 0, 1, None, None, 3, None, None)
    ]
    h.advance(1001)
    assert h.store.system_table("queue_prefixes").rows == []
