"""QUEUE statements, the same scenarios against the in-memory and the PostgreSQL store.

Every expected frame here is the in-memory store's documented answer (docs/dialect.md §3);
the PostgreSQL store must give the same rows, types and errors.
"""

from __future__ import annotations

import pytest
from pgstore_backend import START, Backend, BackendFactory

from cubequeue.grammar.commands import (
    CacheGet,
    CacheSet,
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueGet,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueuePurge,
    QueueResult,
    QueueRetrieve,
    QueueToCancel,
    QueueTruncate,
    SysCachestore,
)
from cubequeue.grammar.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    LimitExceeded,
)
from cubequeue.storage.limits import Limits

HOUR = 3_600_000


def add(b: Backend, path: str, payload: str = "p", pid: str | None = None, **kw: object):
    return b.run(QueueAdd(path=path, payload=payload, **kw), pid)[0]  # type: ignore[arg-type]


def retrieve(b: Backend, path: str, conc: int = 1, pid: str | None = None, extended: bool = True):
    return b.run(QueueRetrieve(path=path, concurrency=conc, extended=extended), pid)


def test_add_counts_pending_and_dedups_by_path(backend: Backend) -> None:
    assert add(backend, "q:a") == ("1", True, 1)
    assert add(backend, "q:b") == ("2", True, 2)
    assert add(backend, "q:a", "other") == ("1", False, 2)
    assert add(backend, "r:a") == ("3", True, 1)
    assert backend.run(QueueGet(key="q:a")) == [("p", None)]
    assert backend.run(QueueGet(key=1)) == [("p", None)]
    assert backend.run(QueueGet(key=99)) == []


def test_add_and_retrieve_fast_track(backend: Backend) -> None:
    first = backend.run(QueueAddAndRetrieve(path="q:a", payload="pa", concurrency=1))
    assert first == [("1", True, 0, "a", "pa", None)]
    second = backend.run(QueueAddAndRetrieve(path="q:b", payload="pb", concurrency=1))
    assert second == [("2", True, 1, "a", None, None)]
    again = backend.run(QueueAddAndRetrieve(path="q:a", payload="x", concurrency=5))
    assert again == [("1", False, 1, "a", None, None)]  # active already: not claimed twice
    third = backend.run(QueueAddAndRetrieve(path="q:c", payload="pc", concurrency=3))
    assert third == [("3", True, 1, "a,c", "pc", None)]  # other pending b counts too


def test_retrieve_concurrency_active_text_and_shapes(backend: Backend) -> None:
    for k in "abc":
        add(backend, f"q:{k}")
    assert retrieve(backend, "q:b", 2) == [("p", None, 2, "b", "2")]
    assert retrieve(backend, "q:a", 2) == [("p", None, 1, "b,a", "1")]  # claimed key last
    assert retrieve(backend, "q:c", 2) == [(None, None, 1, "a,b", None)]  # full; id order now
    assert retrieve(backend, "q:c", 2, extended=False) == []
    assert retrieve(backend, "q:zz", 5) == [(None, None, 1, "a,b", None)]
    assert retrieve(backend, "none:zz", 5) == [(None, None, 0, None, None)]
    assert retrieve(backend, "q:a", 5) == [(None, None, 1, "a,b", None)]  # active: not again


def test_exclusive_items_and_process_ids(backend: Backend) -> None:
    err = backend.outcome(QueueAdd(path="q:x", payload="p", exclusive=True))
    assert err[:3] == ("error", "InvalidParameterValue", "22023")
    add(backend, "q:x", pid="w1", exclusive=True)
    add(backend, "q:y", pid="w1")
    assert backend.outcome(QueueRetrieve(path="q:x", concurrency=5))[:3] == (
        "error", "InvalidParameterValue", "22023")  # fmt: skip
    assert retrieve(backend, "q:x", 5, pid="w2") == [(None, None, 2, None, None)]
    listed = backend.run(QueueList(prefix="q"), "w2")
    assert [r[0] for r in listed] == ["y"]
    assert [r[0] for r in backend.run(QueueList(prefix="q"), "w1")] == ["x", "y"]
    assert retrieve(backend, "q:x", 5, pid="w1") == [("p", None, 1, "x", "1")]


def test_ack_results_consumed_once_by_path_read_many_by_id(backend: Backend) -> None:
    add(backend, "q:a")
    retrieve(backend, "q:a")
    assert backend.run(QueueAck(key="q:a", result="R")) == [(True,)]
    assert backend.run(QueueAck(key="q:a", result="R")) == [(False,)]
    assert backend.run(QueueAck(key=77, result=None)) == [(False,)]
    assert backend.run(QueueResult(key=1)) == [("R", "success", "1", None)]
    assert backend.run(QueueResult(key="q:a")) == [("R", "success", "1", None)]
    assert backend.run(QueueResult(key="q:a")) == []
    assert backend.run(QueueResult(key=1)) == [("R", "success", "1", None)]
    assert backend.table("queue_results") == [(1, "q:a", START + 60_000, True, "R", None)]
    add(backend, "q:b")
    assert backend.run(QueueAck(key=2, result=None)) == [(True,)]  # ACK NULL: no result row
    assert backend.run(QueueResult(key=2)) == []


def test_external_ids_and_ack_replacing_an_older_result(backend: Backend) -> None:
    add(backend, "q:a", external_id="e1")
    backend.run(QueueAck(key="q:a", result="first"))
    add(backend, "q:a", external_id="e1")
    backend.run(QueueAck(key="q:a", result="second"))
    assert backend.table("queue_results") == [(2, "q:a", START + 60_000, False, "second", "e1")]
    assert backend.run(QueueResult(key="q:a", external_id="e1")) == [
        ("second", "success", "2", "e1")]  # fmt: skip
    assert backend.run(QueueResult(key="q:a", external_id="e1"))  # by ext: not consumed
    err = backend.outcome(QueueResult(key=2, external_id="other"))
    assert err == ("error", "InvalidParameterValue", "22023",
                   'Queue result (id = 2) external_id mismatch: expected other, got Some("e1")')
    long = backend.outcome(QueueAdd(path="q:z", payload="p", external_id="x" * 49))
    assert long[:3] == ("error", "InvalidParameterValue", "22023")


def test_expiry_is_enforced_in_every_lookup(backend: Backend) -> None:
    add(backend, "q:a")
    add(backend, "q:o", orphaned=3 * 3600)  # expires 3 h + 2 h after its ADD
    backend.advance(4 * HOUR)
    assert backend.run(QueueGet(key=1)) == []
    assert backend.run(QueueGet(key="q:a")) == []
    assert backend.run(QueueAck(key=1, result="r")) == [(False,)]
    assert [r[0] for r in backend.run(QueueList(prefix="q"))] == ["o"]
    assert add(backend, "q:a") == ("3", True, 2)  # a new item under the expired path
    backend.advance(HOUR)
    assert [r[0] for r in backend.table("queue")] == ["a"]


def test_results_expire_after_results_expire(backend: Backend) -> None:
    add(backend, "q:a")
    backend.run(QueueAck(key="q:a", result="R"))
    backend.advance(60_000)
    assert backend.run(QueueResult(key=1)) == [("R", "success", "1", None)]  # expire >= now
    backend.advance(1)
    assert backend.run(QueueResult(key=1)) == []
    assert backend.table("queue_results") == []


def test_to_cancel_stalled_orphaned_and_cancel_reasons(backend: Backend) -> None:
    add(backend, "q:a")
    add(backend, "q:b")
    add(backend, "q:c", orphaned=1)
    retrieve(backend, "q:a", 5)
    backend.advance(2_000)
    assert backend.run(QueueToCancel(prefix="q", heartbeat_timeout=1_000, orphaned_timeout=None)) == [
        ("a", "1")]  # fmt: skip
    assert backend.run(QueueToCancel(prefix="q", heartbeat_timeout=None, orphaned_timeout=5_000)) == [
        ("c", "3")]  # own ORPHANED time wins  # fmt: skip
    rows = backend.run(QueueToCancel(prefix="q", heartbeat_timeout=1_000, orphaned_timeout=1_000))
    assert rows == [("a", "1"), ("b", "2"), ("c", "3")]
    backend.run(QueueHeartbeat(key="q:a"))
    assert backend.run(QueueToCancel(prefix="q", heartbeat_timeout=1_000, orphaned_timeout=None)) == []
    backend.advance(1_500)
    assert backend.run(QueueCancel(key="q:a")) == [("p", None)]
    assert backend.run(QueueCancel(key=2)) == [("p", None)]
    assert backend.run(QueueCancel(key=2)) == []
    assert [r[2] for r in backend.table("queue_log")] == ["cancelled_stalled", "cancelled"]
    assert backend.run(QueueToCancel(prefix="nothing", heartbeat_timeout=1, orphaned_timeout=1)) == []


def test_merge_extra_first_verbatim_then_merged(backend: Backend) -> None:
    add(backend, "q:a")
    backend.run(QueueMergeExtra(key="q:a", json='{"a": 1}'))
    assert backend.run(QueueGet(key=1)) == [("p", '{"a": 1}')]
    backend.run(QueueMergeExtra(key=1, json='{"b":2}'))
    assert backend.run(QueueGet(key=1)) == [("p", '{"a":1,"b":2}')]
    bad = backend.outcome(QueueMergeExtra(key=1, json="nope"))
    assert bad[:3] == ("error", "InvalidTextRepresentation", "22P02")
    assert backend.outcome(QueueMergeExtra(key=9, json="nope"))[0] == "rows"  # no item: ignored
    assert InvalidTextRepresentation.sqlstate == "22P02"


def test_list_order_pending_active_and_payloads(backend: Backend) -> None:
    add(backend, "q:low", priority=-1)
    add(backend, "q:high", priority=5)
    add(backend, "q:mid")
    retrieve(backend, "q:mid", 5)
    assert backend.run(QueueList(prefix="q")) == [
        ("high", "2", "pending", None), ("mid", "3", "active", None), ("low", "1", "pending", None)]
    assert backend.run(QueueList(prefix="q", status="pending", with_payload=True)) == [
        ("high", "2", "pending", None, "p"), ("low", "1", "pending", None, "p")]
    assert backend.run(QueueList(prefix="q", status="active")) == [("mid", "3", "active", None)]


def test_purge_truncate_and_ids_continue(backend: Backend) -> None:
    for k in "abcd":
        add(backend, f"q:{k}")
    retrieve(backend, "q:a", 5)
    assert backend.run(QueuePurge(prefix="q", status="active")) == [(1,)]
    assert backend.run(QueuePurge(prefix="q", status="pending")) == [(3,)]
    assert backend.run(QueuePurge(prefix="q")) == [(0,)]
    add(backend, "r:x")
    backend.run(QueueTruncate())
    assert backend.table("queue") == []
    assert add(backend, "r:y") == ("6", True, 1)
    assert [(r[0], r[2]) for r in backend.table("queue_log")] == [
        (1, "purged"), (2, "purged"), (3, "purged"), (4, "purged"), (5, "truncated")]


def test_queue_prefixes_table_and_last_concurrency_lifetime(backend: Backend) -> None:
    add(backend, "q:a")
    add(backend, "q:b")
    retrieve(backend, "q:a", 3)
    backend.advance(500)
    assert backend.table("queue_prefixes") == [("q", 1, 1, 0, 500, 500, 3, None, None)]
    backend.run(QueueToCancel(prefix="q", heartbeat_timeout=None, orphaned_timeout=7))
    assert backend.table("queue_prefixes")[0][6:] == (3, None, None)  # ORPHANED only lists
    backend.run(QueueToCancel(prefix="q", heartbeat_timeout=900, orphaned_timeout=800))
    assert backend.table("queue_prefixes")[0][6:] == (3, 900, 800)
    backend.run(QueueToCancel(prefix="q", heartbeat_timeout=600, orphaned_timeout=None))
    assert backend.table("queue_prefixes")[0][6:] == (3, 600, None)  # STALLED clears orphaned
    backend.run(QueueAddAndRetrieve(path="q:x", payload="p", concurrency=4))
    assert backend.table("queue_prefixes") == [("q", 1, 2, 0, 500, 500, 4, 600, None)]
    backend.run(QueueAck(key="q:a", result=None))
    backend.run(QueueCancel(key="q:b"))
    backend.run(QueueCancel(key="q:x"))
    assert backend.table("queue_prefixes") == []
    add(backend, "q:c")  # the prefix lives again: what RETRIEVE/TO_CANCEL said is forgotten
    assert backend.table("queue_prefixes") == [("q", 1, 0, 0, 0, None, None, None, None)]


def test_orphaned_does_not_name_cancel_reason(backend: Backend) -> None:
    add(backend, "q:a")
    backend.advance(2_000)
    assert backend.run(QueueToCancel(prefix="q", heartbeat_timeout=None, orphaned_timeout=1)) == [
        ("a", "1")]  # fmt: skip
    backend.run(QueueCancel(key="q:a"))
    assert [r[2] for r in backend.table("queue_log")] == ["cancelled"]


def test_counts_follow_every_change_and_skip_expired_items(backend: Backend) -> None:
    """RETRIEVE's pending/active after adds, claims, expiry, ACK, CANCEL, PURGE, TRUNCATE
    (the PostgreSQL store keeps them in counters; they must equal the in-memory counts)."""
    for k in "abcd":
        add(backend, f"q:{k}")
    add(backend, "q:old", orphaned=1)  # expires 2 h after its orphaned instant
    assert retrieve(backend, "q:a", 9) == [("p", None, 4, "a", "1")]
    assert retrieve(backend, "q:old", 9) == [("p", None, 3, "a,old", "5")]
    backend.advance(2 * HOUR + 1_001)  # q:old has expired, not swept
    assert retrieve(backend, "q:b", 9) == [("p", None, 2, "a,b", "2")]
    backend.run(QueueAck(key="q:a", result="r"))
    backend.run(QueueCancel(key="q:c"))
    assert retrieve(backend, "q:zz", 9) == [(None, None, 1, "b", None)]
    assert backend.run(QueuePurge(prefix="q", status="pending")) == [(1,)]
    assert retrieve(backend, "q:zz", 9) == [(None, None, 0, "b", None)]
    assert add(backend, "q:old") == ("6", True, 1)  # the expired one made way
    backend.run(QueueTruncate())
    assert add(backend, "q:e") == ("7", True, 1)
    assert retrieve(backend, "q:e", 1) == [("p", None, 0, "e", "7")]


def test_merge_extra_caps_extra_at_max_extra_bytes(make_backend: BackendFactory) -> None:
    b = make_backend(Limits(max_extra_bytes=40, clock_control=True))
    add(b, "q:a")
    big = '{"k":"' + "x" * 40 + '"}'
    assert b.outcome(QueueMergeExtra(key=1, json=big)) == (
        "error", "LimitExceeded", "54000",
        "MERGE_EXTRA argument of 48 bytes exceeds the limit of 40 bytes (max_extra_bytes=40)")
    b.run(QueueMergeExtra(key=1, json='{"a":"' + "y" * 20 + '"}'))
    assert b.outcome(QueueMergeExtra(key=1, json='{"b":"' + "z" * 20 + '"}')) == (
        "error", "LimitExceeded", "54000",
        "merged extra of 55 bytes exceeds the limit of 40 bytes (max_extra_bytes=40)")
    assert b.run(QueueGet(key=1)) == [("p", '{"a":"' + "y" * 20 + '"}')]  # unchanged
    assert b.outcome(QueueMergeExtra(key=9, json=big))[0] == "rows"  # no item: ignored


def test_merge_extra_refuses_json_nested_too_deep(backend: Backend) -> None:
    add(backend, "q:a")
    deep = "[" * 65 + "]" * 65
    out = backend.outcome(QueueMergeExtra(key=1, json=deep))
    assert out[:3] == ("error", "LimitExceeded", "54000") and "MAX_EXTRA_DEPTH=64" in out[3]
    backend.run(QueueMergeExtra(key=1, json="[" * 64 + "]" * 64))
    assert backend.run(QueueGet(key=1)) == [("p", "[" * 64 + "]" * 64)]


def test_sys_cachestore_wipe_empties_queue_results_and_cache(backend: Backend) -> None:
    add(backend, "q:a")
    add(backend, "q:b")
    retrieve(backend, "q:b", 2)
    backend.run(QueueAck(key="q:b", result="r"))
    add(backend, "q:c")
    backend.run(CacheSet(key="c:k", value="v"))
    assert backend.run(SysCachestore(action="wipe")) == []
    for table in ("queue", "queue_results", "queue_prefixes", "cache"):
        assert backend.table(table) == [], table
    assert backend.run(QueueResult(key=2)) == []
    assert backend.run(CacheGet(key="c:k")) == [(None,)]
    assert [(r[0], r[2]) for r in backend.table("queue_log")] == [
        (2, "acked"), (1, "truncated"), (3, "truncated")]
    assert add(backend, "q:d") == ("4", True, 1)  # ids continue
    backend.run(CacheSet(key="c:k2", value="v"))
    assert backend.table("cache")[0][0] == "k2"


def test_caps_answer_54000_naming_the_limit(make_backend: BackendFactory) -> None:
    b = make_backend(Limits(max_items=2, max_payload_bytes=10, clock_control=True))
    add(b, "q:a")
    add(b, "r:b")
    assert add(b, "q:a") == ("1", False, 1)  # a duplicate is not refused
    assert b.outcome(QueueAdd(path="q:c", payload="p")) == (
        "error", "LimitExceeded", "54000",
        "queue is full: 2 items queued, the limit is 2 (--max-items=2)")  # fmt: skip
    assert b.outcome(QueueAck(key=1, result="x" * 11))[:3] == ("error", "LimitExceeded", "54000")
    b.run(QueueAck(key=1, result=None))
    assert add(b, "q:c", "0123456789") == ("3", True, 1)
    assert b.outcome(QueueAdd(path="q:d", payload="x" * 11))[:3] == (
        "error", "LimitExceeded", "54000")  # fmt: skip
    assert LimitExceeded.sqlstate == "54000" and InvalidParameterValue.sqlstate == "22023"


@pytest.mark.parametrize("key", ["q:a", 1])
def test_result_blocking_answers_at_once_or_on_ack(backend: Backend, key: int | str) -> None:
    add(backend, "q:a")
    got: list = []
    waiter = backend.blocking(key, got)
    assert not got and hasattr(waiter, "cancel")
    backend.run(QueueAck(key="q:a", result="R"))
    backend.settle(got)
    assert [r.rows for r in got] == [[("R", "success", "1", None)]]
    # delivered by path: consumed (later lookups see nothing); by id: flagged
    expect = [] if isinstance(key, str) else [("R", "success", "1", None)]
    assert backend.run(QueueResult(key=1)) == expect
    add(backend, "q:b")
    backend.run(QueueAck(key="q:b", result="S"))
    frame = backend.blocking("q:b", [])
    assert frame.rows == [("S", "success", "2", None)]  # type: ignore[attr-defined]
