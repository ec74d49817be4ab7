"""CACHE and SYS statements, the same scenarios against both stores."""

from __future__ import annotations

from pgstore_backend import START, Backend, BackendFactory

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
    QueueAdd,
    SysCachestore,
    SysClock,
)
from cubequeue.storage.limits import Limits


def cset(b: Backend, key: str, value: str, **kw: object) -> bool:
    return b.run(CacheSet(key=key, value=value, **kw))[0][0]  # type: ignore[arg-type, return-value]


def test_set_get_nx_ttl_and_keys_in_row_id_order(backend: Backend) -> None:
    assert cset(backend, "c:b", "1") is True
    assert cset(backend, "c:a", "2", ttl=10) is True
    assert cset(backend, "c:b", "3", nx=True) is False
    assert cset(backend, "c:b", "4") is True  # replace keeps the row id: b stays first
    assert backend.run(CacheKeys(pattern="c:*")) == [("c:b",), ("c:a",)]
    assert backend.run(CacheKeys(pattern="c")) == [("c:b",), ("c:a",)]
    assert backend.run(CacheGet(key="c:b")) == [("4",)]
    backend.advance(10_000)
    assert backend.run(CacheGet(key="c:a")) == [(None,)]
    assert cset(backend, "c:a", "5", nx=True) is True  # expired: NX may write
    assert cset(backend, "c:a", "6", ttl=0) is True  # a TTL already over: removed
    assert backend.run(CacheGet(key="c:a")) == [(None,)]
    assert cset(backend, "plain", "x") is True
    assert backend.run(CacheKeys(pattern="plain")) == []
    assert backend.table("cache") == [("b", "c", None, "4"), ("plain", "", None, "x")]


def test_incr_remove_purge_truncate(backend: Backend) -> None:
    assert backend.run(CacheIncr(key="c:n")) == [("1",)]
    assert backend.run(CacheIncr(key="c:n")) == [("2",)]
    cset(backend, "c:t", "41", ttl=5)
    assert backend.run(CacheIncr(key="c:t")) == [("42",)]
    backend.advance(5_000)
    assert backend.run(CacheIncr(key="c:t")) == [("1",)]  # expired: a new key without TTL
    for value, message in [("x", "invalid digit found in string"), ("", "cannot parse integer from empty string"),
                           ("9223372036854775807", "number too large to fit in target type"),
                           ("-99999999999999999999", "number too small to fit in target type")]:
        cset(backend, "c:bad", value)
        assert backend.outcome(CacheIncr(key="c:bad")) == (
            "error", "InvalidTextRepresentation", "22P02", message)  # fmt: skip
    backend.run(CacheRemove(key="c:bad"))
    backend.run(CacheRemove(key="c:never"))
    assert backend.run(CachePurge(prefix="c:*")) == [(2,)]
    cset(backend, "d:x", "1")
    backend.run(CacheTruncate())
    assert backend.table("cache") == []
    cset(backend, "d:y", "1")
    assert backend.run(CacheKeys(pattern="d:")) == [("d:y",)]


def test_entry_size_cap(make_backend: BackendFactory) -> None:
    b = make_backend(Limits(cache_max_entry_bytes=5, clock_control=True))
    assert b.outcome(CacheSet(key="c:k", value="12345")) == (
        "error", "LimitExceeded", "54000",
        "Unable to SET cache with 'k' key, exceeds maximum allowed size for payload: 5 B, "
        "max allowed: 5 B")  # fmt: skip
    assert cset(b, "c:k", "1234") is True


def test_eviction_command_evicts_least_recently_used(make_backend: BackendFactory) -> None:
    """SYS CACHESTORE EVICTION brings the cache within its limits, LRU first (the in-memory
    store evicts inside each write already, the PostgreSQL store when asked or by its leader)."""
    b = make_backend(Limits(cache_max_keys=2, clock_control=True))
    cset(b, "c:a", "1")
    cset(b, "c:b", "2")
    b.run(CacheGet(key="c:a"))  # a is now the most recently used
    cset(b, "c:c", "3")
    rows = b.run(SysCachestore(action="eviction"))
    assert rows[0] == ("stats_total_keys", "2", None)
    assert rows[2] == ("total_keys_removed", "1", "Keys evicted since start")
    assert [r[0] for r in b.table("cache")] == ["a", "c"]


def test_sys_clock_and_its_refusals(make_backend: BackendFactory) -> None:
    off = make_backend(Limits())
    assert off.outcome(SysClock(action="show"))[:3] == ("error", "InsufficientPrivilege", "42501")
    b = make_backend()
    assert b.outcome(SysClock(action="advance", ms=-1)) == (
        "error", "InvalidParameterValue", "22023",
        "SYS CLOCK ADVANCE needs a non-negative number of milliseconds, actual: -1")  # fmt: skip


def test_info_rows(backend: Backend) -> None:
    cset(backend, "c:k", "v")
    backend.run(QueueAdd(path="q:a", payload="payload"))
    rows = backend.run(SysCachestore(action="info"))
    assert [r[:2] for r in rows if r[0].endswith(("keys_total", "size_total"))] == [
        ("CacheItems.keys_total", "1"), ("CacheItems.size_total", "4 B"),
        ("CacheItems.expired_keys_total", "0"), ("CacheItems.expired_size_total", "0 B"),
        ("QueueItems.keys_total", "1"), ("QueueItems.size_total", "10 B"),
        ("QueueItems.expired_keys_total", "0"), ("QueueItems.expired_size_total", "0 B"),
        ("QueueResults.keys_total", "0"), ("QueueResults.size_total", "0 B"),
        ("QueueResults.expired_keys_total", "0"), ("QueueResults.expired_size_total", "0 B"),
    ]
    assert backend.run(SysCachestore(action="healthcheck")) == []
    assert START > 0
