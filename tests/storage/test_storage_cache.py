"""CACHE engine rules (``docs/dialect.md`` §4, §2.1, §2.4 to §2.7, §5.1, §8 rules 9 to 11), one test each."""

from __future__ import annotations

import pytest

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
    Param,
    Slot,
)
from cubequeue.grammar.errors import InternalError, InvalidTextRepresentation, LimitExceeded
from cubequeue.grammar.results import EMPTY, Column, ColumnType
from cubequeue.storage.cache import CacheStore
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.expiry import REBUILD_AFTER
from cubequeue.storage.limits import Limits
from cubequeue.storage.sizes import format_size
from cubequeue.storage.system_schemas import CACHE_COLUMNS

START = 1_700_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def cache(clock: FakeClock) -> CacheStore:
    return CacheStore(clock, Limits())


def put(cache: CacheStore, key: str, value: str, *, nx: bool = False, ttl: int | None = None):
    return cache.cache_set(CacheSet(key=key, value=value, nx=nx, ttl=ttl)).rows[0][0]


def get(cache: CacheStore, key: str):
    result = cache.cache_get(CacheGet(key=key))
    assert len(result.rows) == 1
    return result.rows[0][0]


def keys(cache: CacheStore, pattern: str) -> list[str]:
    return [row[0] for row in cache.cache_keys(CacheKeys(pattern=pattern)).rows]


def incr(cache: CacheStore, key: str):
    return cache.cache_incr(CacheIncr(key=key)).rows[0][0]


def snapshot(cache: CacheStore):
    return (cache.system_rows().rows, cache.keys, cache.bytes, cache.evictions_total)


# --------------------------------------------------------------------- result shapes


def test_set_returns_one_boolean_success_row(cache):
    result = cache.cache_set(CacheSet(key="a:b", value="v"))
    assert result.columns == (Column("success", ColumnType.BOOLEAN),)
    assert result.rows == [(True,)]


def test_get_returns_one_string_row(cache):
    put(cache, "a:b", "v")
    result = cache.cache_get(CacheGet(key="a:b"))
    assert result.columns == (Column("value", ColumnType.STRING),)
    assert result.rows == [("v",)]


def test_get_missing_is_one_null_row_not_zero_rows(cache):
    result = cache.cache_get(CacheGet(key="nope"))
    assert result.rows == [(None,)]


def test_keys_columns(cache):
    assert cache.cache_keys(CacheKeys(pattern="x")).columns == (Column("key", ColumnType.STRING),)


def test_remove_and_truncate_return_the_empty_frame(cache):
    put(cache, "a", "1")
    assert cache.cache_remove(CacheRemove(key="a")) is EMPTY
    assert cache.cache_truncate(CacheTruncate()) is EMPTY


def test_incr_and_purge_columns(cache):
    assert cache.cache_incr(CacheIncr(key="c")).columns == (Column("value", ColumnType.STRING),)
    assert cache.cache_purge(CachePurge(prefix="x")).columns == (Column("removed", ColumnType.INT),)


# ------------------------------------------------------------------------ CACHE SET


def test_set_then_get_roundtrip(cache):
    assert put(cache, "p:k", "hello") is True
    assert get(cache, "p:k") == "hello"


def test_set_replaces_value(cache):
    put(cache, "p:k", "one")
    assert put(cache, "p:k", "two") is True
    assert get(cache, "p:k") == "two"


def test_set_nx_on_missing_key_inserts(cache):
    assert put(cache, "p:k", "v", nx=True) is True
    assert get(cache, "p:k") == "v"


def test_set_nx_on_existing_key_is_false_and_changes_nothing(cache, clock):
    put(cache, "p:k", "old", ttl=100)
    before = snapshot(cache)
    assert put(cache, "p:k", "new", nx=True, ttl=5) is False
    assert snapshot(cache) == before
    clock.advance(50_000)
    assert get(cache, "p:k") == "old"  # the TTL was not touched either


def test_set_nx_after_expiry_succeeds(cache, clock):
    put(cache, "p:k", "old", ttl=1)
    clock.advance(1000)
    assert put(cache, "p:k", "new", nx=True) is True
    assert get(cache, "p:k") == "new"


def test_set_ttl_expires_after_n_seconds(cache, clock):
    put(cache, "p:k", "v", ttl=2)
    clock.advance(1999)
    assert get(cache, "p:k") == "v"
    clock.advance(1)  # expire <= now → gone (§2.7)
    assert get(cache, "p:k") is None
    assert keys(cache, "p") == []


def test_set_ttl_zero_is_invisible_at_once(cache):
    assert put(cache, "p:k", "v", ttl=0) is True
    assert get(cache, "p:k") is None
    assert keys(cache, "p") == []
    assert cache.keys == 0
    assert put(cache, "p:k", "again", nx=True) is True


def test_set_ttl_zero_over_existing_key_removes_it(cache):
    put(cache, "p:k", "v")
    assert put(cache, "p:k", "w", ttl=0) is True
    assert get(cache, "p:k") is None
    assert cache.keys == 0
    assert cache.bytes == 0


def test_set_without_ttl_removes_previous_ttl(cache, clock):
    put(cache, "p:k", "v", ttl=1)
    put(cache, "p:k", "w")
    clock.advance(10_000_000)
    assert get(cache, "p:k") == "w"


def test_set_with_new_ttl_replaces_expiry(cache, clock):
    put(cache, "p:k", "v", ttl=1)
    put(cache, "p:k", "w", ttl=10)
    clock.advance(5000)
    assert get(cache, "p:k") == "w"
    clock.advance(5000)
    assert get(cache, "p:k") is None


def test_set_replace_keeps_row_id_position_in_keys(cache):
    put(cache, "p:a", "1")
    put(cache, "p:b", "2")
    put(cache, "p:a", "3")
    assert keys(cache, "p") == ["p:a", "p:b"]


def test_set_after_expiry_gets_a_new_row_id(cache, clock):
    put(cache, "p:a", "1", ttl=1)
    put(cache, "p:b", "2")
    clock.advance(1000)
    put(cache, "p:a", "3")
    assert keys(cache, "p") == ["p:b", "p:a"]


def test_set_value_at_max_entry_size_is_refused(clock):
    cache = CacheStore(clock, Limits(cache_max_entry_bytes=10))
    with pytest.raises(LimitExceeded) as info:
        put(cache, "a:b:key", "x" * 10)
    assert info.value.sqlstate == "54000"
    assert str(info.value) == (
        "Unable to SET cache with 'key' key, exceeds maximum allowed size for payload: "
        "10 B, max allowed: 10 B"
    )
    assert cache.keys == 0
    assert put(cache, "a:b:key", "x" * 9) is True


def test_set_size_error_uses_decimal_sizes_and_byte_length(clock):
    cache = CacheStore(clock, Limits(cache_max_entry_bytes=1024 * 1024))
    with pytest.raises(LimitExceeded) as info:
        put(cache, "STANDALONE#cache:big", "x" * (2 * 1024 * 1024))
    assert str(info.value) == (
        "Unable to SET cache with 'big' key, exceeds maximum allowed size for payload: "
        "2.10 MB, max allowed: 1.05 MB"
    )
    # the limit counts UTF-8 bytes, not characters: 4 chars of 3 bytes = 12 bytes, over 10
    small = CacheStore(clock, Limits(cache_max_entry_bytes=10))
    with pytest.raises(LimitExceeded):
        put(small, "k", "€€€€")


def test_refused_set_changes_nothing(clock):
    cache = CacheStore(clock, Limits(cache_max_entry_bytes=5))
    put(cache, "p:k", "old")
    before = snapshot(cache)
    with pytest.raises(LimitExceeded):
        put(cache, "p:k", "much too long")
    assert snapshot(cache) == before
    assert get(cache, "p:k") == "old"


def test_default_max_entry_size_is_66_06_mb(clock):
    assert Limits().cache_max_entry_bytes == 66_060_288
    assert format_size(66_060_288) == "66.06 MB"


# ------------------------------------------------------------------------ paths


def test_path_splits_at_last_colon(cache):
    put(cache, "a:b:c", "v")
    put(cache, "abc:", "w")
    rows = cache.system_rows().rows
    assert rows == [("c", "a:b", None, "v"), ("", "abc", None, "w")]


def test_path_without_colon_has_empty_prefix(cache):
    """system.cache's prefix is text, not NULL (§8 rule 11), as in system.queue."""
    put(cache, "plain", "v")
    assert cache.system_rows().rows == [("plain", "", None, "v")]
    assert keys(cache, "") == ["plain"]


# ------------------------------------------------------------------------ CACHE KEYS


def test_keys_returns_full_paths(cache):
    put(cache, "STANDALONE#cache:x", "1")
    assert keys(cache, "STANDALONE#cache") == ["STANDALONE#cache:x"]


def test_keys_strips_trailing_colon_star(cache):
    put(cache, "p:x", "1")
    assert keys(cache, "p:*") == ["p:x"]


def test_keys_strips_one_trailing_colon(cache):
    put(cache, "p:x", "1")
    put(cache, "p::y", "2")  # prefix "p:"
    assert keys(cache, "p:") == ["p:x"]
    assert keys(cache, "p::") == ["p::y"]


def test_keys_is_exact_prefix_equality_not_nesting(cache):
    put(cache, "a:b:c", "1")
    put(cache, "ab:c", "2")
    assert keys(cache, "a") == []
    assert keys(cache, "a:b") == ["a:b:c"]


def test_keys_has_no_glob(cache):
    put(cache, "p:x", "1")
    assert keys(cache, "*") == []
    assert keys(cache, "p*") == []


def test_keys_empty_pattern_lists_keys_without_colon(cache):
    put(cache, "plain", "1")
    put(cache, "p:x", "2")
    put(cache, ":odd", "3")  # prefix "" as well
    assert keys(cache, "") == ["plain", ":odd"]
    assert keys(cache, ":*") == ["plain", ":odd"]


def test_keys_omits_expired(cache, clock):
    put(cache, "p:a", "1", ttl=1)
    put(cache, "p:b", "2")
    clock.advance(1000)
    assert keys(cache, "p") == ["p:b"]


def test_keys_order_is_first_insertion(cache):
    for name in ("z", "a", "m"):
        put(cache, f"p:{name}", "1")
    put(cache, "p:a", "updated")
    incr(cache, "p:z")
    assert keys(cache, "p") == ["p:z", "p:a", "p:m"]


def test_keys_after_remove_and_reinsert_goes_last(cache):
    put(cache, "p:a", "1")
    put(cache, "p:b", "2")
    cache.cache_remove(CacheRemove(key="p:a"))
    put(cache, "p:a", "3")
    assert keys(cache, "p") == ["p:b", "p:a"]


def test_keys_does_not_touch_lru(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=2))
    put(cache, "p:a", "1")
    put(cache, "p:b", "2")
    keys(cache, "p")
    put(cache, "p:c", "3")
    assert keys(cache, "p") == ["p:b", "p:c"]


# ------------------------------------------------------------------ GET / REMOVE


def test_get_expired_is_null(cache, clock):
    put(cache, "k", "v", ttl=3)
    clock.advance(3000)
    assert get(cache, "k") is None


def test_remove_deletes(cache):
    put(cache, "p:k", "v")
    cache.cache_remove(CacheRemove(key="p:k"))
    assert get(cache, "p:k") is None
    assert cache.keys == 0
    assert cache.bytes == 0


def test_remove_missing_is_not_an_error(cache):
    assert cache.cache_remove(CacheRemove(key="nothing")) is EMPTY


# --------------------------------------------------------------------- TRUNCATE


def test_truncate_deletes_everything(cache):
    put(cache, "a", "1")
    put(cache, "p:b", "2", ttl=10)
    cache.cache_truncate(CacheTruncate())
    assert cache.keys == 0
    assert cache.bytes == 0
    assert get(cache, "a") is None
    assert keys(cache, "p") == []
    assert cache.system_rows().rows == []


def test_truncate_does_not_reset_row_ids(cache):
    put(cache, "p:a", "1")
    cache.cache_truncate(CacheTruncate())
    put(cache, "p:b", "2")
    put(cache, "p:a", "3")
    assert keys(cache, "p") == ["p:b", "p:a"]


# ------------------------------------------------------------------------ INCR


def test_incr_missing_inserts_one_without_ttl(cache, clock):
    assert incr(cache, "p:counter") == "1"
    clock.advance(10**10)
    assert get(cache, "p:counter") == "1"


def test_incr_existing_adds_one(cache):
    put(cache, "p:c", "41")
    assert incr(cache, "p:c") == "42"
    assert get(cache, "p:c") == "42"


def test_incr_keeps_ttl(cache, clock):
    put(cache, "p:c", "5", ttl=10)
    clock.advance(5000)
    assert incr(cache, "p:c") == "6"
    clock.advance(4999)
    assert get(cache, "p:c") == "6"
    clock.advance(1)
    assert get(cache, "p:c") is None


def test_incr_expired_key_starts_at_one_without_ttl(cache, clock):
    put(cache, "p:c", "5", ttl=1)
    clock.advance(1000)
    assert incr(cache, "p:c") == "1"
    clock.advance(10**9)
    assert get(cache, "p:c") == "1"


def test_incr_negative_and_signed_values(cache):
    put(cache, "a", "-1")
    assert incr(cache, "a") == "0"
    put(cache, "b", "+7")
    assert incr(cache, "b") == "8"
    put(cache, "c", "-9223372036854775808")
    assert incr(cache, "c") == "-9223372036854775807"


def test_incr_keeps_row_id(cache):
    put(cache, "p:a", "1")
    put(cache, "p:b", "1")
    incr(cache, "p:a")
    assert keys(cache, "p") == ["p:a", "p:b"]


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ("abc", "invalid digit found in string"),
        ("1.5", "invalid digit found in string"),
        (" 1", "invalid digit found in string"),
        ("1_000", "invalid digit found in string"),
        ("-", "invalid digit found in string"),
        ("+", "invalid digit found in string"),
        ("٣", "invalid digit found in string"),  # not an ASCII digit
        ("", "cannot parse integer from empty string"),
        ("9223372036854775808", "number too large to fit in target type"),
        ("99999999999999999999x", "number too large to fit in target type"),
        ("-9223372036854775809", "number too small to fit in target type"),
        ("9x99999999999999999999", "invalid digit found in string"),
    ],
)
def test_incr_non_integer_is_22p02_with_rusts_message(cache, stored, message):
    put(cache, "p:c", stored)
    before = snapshot(cache)
    with pytest.raises(InvalidTextRepresentation) as info:
        incr(cache, "p:c")
    assert info.value.sqlstate == "22P02"
    assert str(info.value) == message
    assert snapshot(cache) == before


def test_incr_i64_max_overflow_is_refused(cache):
    put(cache, "p:c", "9223372036854775807")
    with pytest.raises(InvalidTextRepresentation) as info:
        incr(cache, "p:c")
    assert str(info.value) == "number too large to fit in target type"
    assert get(cache, "p:c") == "9223372036854775807"


def test_incr_updates_byte_accounting(cache):
    incr(cache, "c")
    assert cache.bytes == len("c") + 1
    put(cache, "c", "9")
    incr(cache, "c")
    assert cache.bytes == len("c") + len("10")


# ------------------------------------------------------------------------ PURGE


def test_purge_removes_exact_prefix_and_counts(cache):
    put(cache, "p:a", "1")
    put(cache, "p:b", "2")
    put(cache, "p:x:c", "3")
    put(cache, "q:a", "4")
    result = cache.cache_purge(CachePurge(prefix="p:*"))
    assert result.rows == [(2,)]
    assert keys(cache, "p") == []
    assert keys(cache, "p:x") == ["p:x:c"]
    assert get(cache, "q:a") == "4"
    assert cache.keys == 2
    assert cache.bytes == len("p:x:c3") + len("q:a4")


def test_purge_does_not_count_expired_keys(cache, clock):
    put(cache, "p:a", "1", ttl=1)
    put(cache, "p:b", "2")
    clock.advance(1000)
    assert cache.cache_purge(CachePurge(prefix="p")).rows == [(1,)]


def test_purge_unknown_prefix_removes_zero(cache):
    assert cache.cache_purge(CachePurge(prefix="none")).rows == [(0,)]


def test_purge_empty_pattern_removes_colonless_keys(cache):
    put(cache, "plain", "1")
    put(cache, "p:x", "2")
    assert cache.cache_purge(CachePurge(prefix="")).rows == [(1,)]
    assert get(cache, "plain") is None
    assert get(cache, "p:x") == "2"


def test_purge_is_not_counted_as_eviction(cache):
    put(cache, "p:a", "1")
    cache.cache_purge(CachePurge(prefix="p"))
    assert cache.evictions_total == 0


# --------------------------------------------------------------------- eviction


def test_eviction_by_max_keys_removes_least_recently_used(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=3))
    for name in "abc":
        put(cache, f"p:{name}", "v")
    put(cache, "p:d", "v")
    assert keys(cache, "p") == ["p:b", "p:c", "p:d"]
    assert cache.keys == 3
    assert cache.evictions_total == 1


def test_get_hit_refreshes_lru(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=2))
    put(cache, "a", "1")
    put(cache, "b", "2")
    assert get(cache, "a") == "1"
    put(cache, "c", "3")
    assert get(cache, "a") == "1"
    assert get(cache, "b") is None


def test_get_miss_does_not_touch_lru(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=2))
    put(cache, "a", "1")
    put(cache, "b", "2")
    assert get(cache, "zzz") is None
    put(cache, "c", "3")
    assert get(cache, "a") is None


def test_replacing_set_and_incr_refresh_lru(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=3))
    put(cache, "a", "1")
    put(cache, "b", "1")
    put(cache, "c", "1")
    put(cache, "a", "2")
    incr(cache, "b")
    put(cache, "d", "1")
    assert keys(cache, "") == ["a", "b", "d"]


def test_refused_nx_does_not_refresh_lru(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=2))
    put(cache, "a", "1")
    put(cache, "b", "1")
    assert put(cache, "a", "2", nx=True) is False
    put(cache, "c", "1")
    assert keys(cache, "") == ["b", "c"]


def test_eviction_by_bytes_counts_path_plus_value(clock):
    # each entry "k<n>" + 8-byte value = 10 bytes; 35 bytes hold three
    cache = CacheStore(clock, Limits(cache_max_bytes=35))
    for n in range(4):
        put(cache, f"k{n}", "x" * 8)
    assert cache.bytes == 30
    assert keys(cache, "") == ["k1", "k2", "k3"]
    assert cache.evictions_total == 1
    rows = dict((name, value) for name, value, _ in cache.eviction_rows())
    assert rows["total_keys_removed"] == "1"
    assert rows["total_size_removed"] == "10 B"


def test_eviction_runs_until_under_both_limits(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=10, cache_max_bytes=100))
    for n in range(5):
        put(cache, f"k{n}", "x" * 8)  # 10 bytes each
    put(cache, "big", "y" * 77)  # 80 bytes: must evict three small ones
    assert keys(cache, "") == ["k3", "k4", "big"]
    assert cache.bytes == 100
    assert cache.evictions_total == 3


def test_set_is_never_refused_for_capacity_and_lone_oversize_entry_stays(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=1, cache_max_bytes=4))
    assert put(cache, "a", "12345678") is True
    assert get(cache, "a") == "12345678"
    assert cache.keys == 1
    assert put(cache, "b", "1") is True
    assert get(cache, "a") is None
    assert get(cache, "b") == "1"


def test_incr_can_trigger_eviction(clock):
    cache = CacheStore(clock, Limits(cache_max_keys=1))
    put(cache, "a", "1")
    assert incr(cache, "b") == "1"
    assert get(cache, "a") is None
    assert cache.evictions_total == 1


def test_expiry_and_remove_are_not_evictions(cache, clock):
    put(cache, "a", "1", ttl=1)
    put(cache, "b", "1")
    cache.cache_remove(CacheRemove(key="b"))
    clock.advance(1000)
    cache.sweep()
    assert cache.evictions_total == 0
    assert cache.expired_total == 1


def test_run_eviction_enforces_limits_and_returns_count(clock):
    cache = CacheStore(clock, Limits())
    for n in range(5):
        put(cache, f"k{n}", "v")
    cache._limits = Limits(cache_max_keys=2)
    assert cache.run_eviction() == 3
    assert keys(cache, "") == ["k3", "k4"]
    assert cache.run_eviction() == 0


def test_eviction_rows_shape(cache):
    put(cache, "p:k", "value")  # 3 + 5 bytes
    rows = cache.eviction_rows()
    assert [row[0] for row in rows] == [
        "stats_total_keys",
        "stats_total_raw_size",
        "total_keys_removed",
        "total_size_removed",
        "total_delete_skipped",
    ]
    assert rows[0][1] == "1"
    assert rows[1][1] == "8 B"
    assert rows[4][1] == "0"
    assert all(isinstance(row[1], str) for row in rows)


# ----------------------------------------------------------------- expiry sweep


def test_sweep_removes_expired_rows_from_memory(cache, clock):
    put(cache, "p:a", "1", ttl=1)
    put(cache, "p:b", "2", ttl=5)
    put(cache, "p:c", "3")
    clock.advance(1000)
    assert cache.sweep() == 1
    assert cache.keys == 2
    assert cache.bytes == len("p:b2") + len("p:c3")
    clock.advance(4000)
    assert cache.sweep() == 1
    assert cache.sweep() == 0
    assert [row[0] for row in cache.system_rows().rows] == ["c"]


def test_sweep_ignores_rows_retimed_since(cache, clock):
    put(cache, "k", "v", ttl=1)
    put(cache, "k", "w", ttl=100)
    clock.advance(1000)
    assert cache.sweep() == 0
    assert get(cache, "k") == "w"


def test_sweep_on_idle_store_does_nothing(cache):
    put(cache, "k", "v", ttl=100)
    assert cache.sweep() == 0
    assert cache.keys == 1


def test_expiry_heap_stays_bounded_under_retiming(cache):
    for n in range(5000):
        put(cache, "k", str(n), ttl=1000 + n)
    assert len(cache._expiry) <= 2 * 1 + REBUILD_AFTER + 1


def test_incr_on_a_ttl_key_does_not_reschedule_its_expiry(cache):
    put(cache, "k", "0", ttl=1000)
    for _ in range(200):
        incr(cache, "k")
    assert len(cache._expiry) == 1


def test_expiry_heap_stays_bounded_after_removes(cache):
    for n in range(2000):
        put(cache, f"k{n}", "v", ttl=1000)
    for n in range(2000):
        cache.cache_remove(CacheRemove(key=f"k{n}"))
    assert len(cache._expiry) <= REBUILD_AFTER + 1


# --------------------------------------------------------------- system tables


def test_system_rows_columns_and_live_rows_only(cache, clock):
    put(cache, "p:a", "1", ttl=10)
    put(cache, "b", "2")
    put(cache, "p:c", "3", ttl=1)
    clock.advance(1000)
    result = cache.system_rows()
    assert result.columns == CACHE_COLUMNS
    assert [(c.name, c.type) for c in result.columns] == [
        ("id", ColumnType.STRING),
        ("prefix", ColumnType.STRING),
        ("expire", ColumnType.TIMESTAMP),
        ("value", ColumnType.STRING),
    ]
    assert result.rows == [("a", "p", START + 10_000, "1"), ("b", "", None, "2")]


def test_system_rows_in_row_id_order_not_lru_order(cache):
    put(cache, "a", "1")
    put(cache, "b", "2")
    get(cache, "a")
    assert [row[0] for row in cache.system_rows().rows] == ["a", "b"]


def test_info_rows(cache, clock):
    put(cache, "a", "1")  # 2 bytes
    put(cache, "p:b", "1234", ttl=1)  # 7 bytes
    put(cache, "c", "x" * 1499)  # 1500 bytes
    clock.advance(1000)  # p:b expired but not yet swept
    rows = cache.info_rows()
    assert [row[0] for row in rows] == [
        "CacheItems.keys_total",
        "CacheItems.size_total",
        "CacheItems.expired_keys_total",
        "CacheItems.expired_size_total",
        "CacheItems.min_row_size",
        "CacheItems.max_row_size",
        "CacheItems.avg_row_size",
    ]
    values = [row[1] for row in rows]
    assert values == ["3", "1.51 kB", "1", "7 B", "2 B", "1.50 kB", "503 B"]
    assert rows[2][2] is not None and rows[0][2] is None
    cache.sweep()
    assert cache.info_rows()[2][1] == "0"


def test_info_rows_on_empty_cache(cache):
    assert [row[1] for row in cache.info_rows()] == ["0", "0 B", "0", "0 B", "0 B", "0 B", "0 B"]


# ---------------------------------------------------------------------- misc


def test_unbound_parameter_is_an_internal_error_and_changes_nothing(cache):
    with pytest.raises(InternalError):
        cache.cache_set(CacheSet(key=Param(1, Slot.TEXT), value="v"))
    with pytest.raises(InternalError):
        cache.cache_set(CacheSet(key="k", value="v", ttl=Param(1, Slot.INT8)))
    assert cache.keys == 0


def test_unicode_bytes_are_utf8_lengths(cache):
    put(cache, "ключ", "значение")
    assert cache.bytes == len("ключ".encode()) + len("значение".encode())


def test_properties_track_counts(cache):
    put(cache, "a", "12")
    put(cache, "b", "345")
    assert (cache.keys, cache.bytes, cache.evictions_total) == (2, 7, 0)
