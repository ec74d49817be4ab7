"""The system tables, SYS CACHESTORE INFO/EVICTION rows and store stats, read with SQL.

Same columns, types and order as the in-memory store (storage/queue_tables.py,
storage/cachestore_info.py, storage/cache.py; the columns are storage/system_schemas.py's);
every row is live at the database's ``cq_now()``.
Sorting by prefix uses the "C" collation, which is the code-point order Python sorts in.
"""

from __future__ import annotations

from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.cachestore_info import InfoRow, totals_rows
from cubequeue.storage.postgres.database import Database
from cubequeue.storage.sizes import format_size
from cubequeue.storage.stats import PrefixCounts, StoreStats
from cubequeue.storage.system_schemas import (
    CACHE_COLUMNS,
    QUEUE_COLUMNS,
    QUEUE_LOG_COLUMNS,
    QUEUE_PREFIXES_COLUMNS,
    QUEUE_RESULTS_COLUMNS,
)

__all__ = ["Tables"]



_DELETE_SKIPPED = (
    "Number of rows which was scheduled for deletion (from eviction), but were deleted by "
    "another process (compaction / delete)"
)

_QUEUE = """
select i.key::text, i.id, i.prefix::text, i.created_ms,
       case when i.status = 1 then 'active' else 'pending' end, i.priority, i.heartbeat_ms,
       i.orphaned_ms, i.payload, i.extra, i.process_id, i.exclusive, i.external_id
from cq_item i where i.expire_ms > cq_now() order by i.id
"""
_RESULTS = """
select r.id, r.path::text, r.expire_ms, r.deleted, r.value, r.external_id
from cq_result r where r.expire_ms >= cq_now() and not r.removed_by_event order by r.id
"""
_CACHE = """
select c.key, c.idx_prefix::text, c.expire_ms, c.value from cq_cache c
where c.expire_ms is null or c.expire_ms > cq_now() order by c.id
"""
_PREFIXES = """
with n as (select cq_now() as v),
items as (
  select i.prefix, count(*) filter (where i.status = 0) as pending,
         count(*) filter (where i.status = 1) as active,
         min(i.created_ms) filter (where i.status = 0) as oldest,
         min(i.heartbeat_ms) filter (where i.status = 1) as beat
  from cq_item i, n where i.expire_ms > n.v group by i.prefix),
res as (
  select r.prefix, count(*) as results from cq_result r, n
  where r.expire_ms >= n.v and not r.removed_by_event group by r.prefix)
select coalesce(i.prefix, r.prefix)::text as prefix, coalesce(i.pending, 0),
       coalesce(i.active, 0), coalesce(r.results, 0), n.v - i.oldest, n.v - i.beat,
       x.last_concurrency, case when x.to_cancel_set then x.last_hb_timeout end,
       case when x.to_cancel_set then x.last_orph_timeout end
from items i full join res r on r.prefix = i.prefix cross join n
left join cq_prefix x on x.prefix = coalesce(i.prefix, r.prefix)
order by 1
"""
_LOG = """
select l.id, l.path, l.reason, l.at_ms, l.queued_ms, l.active_ms
from (select * from cq_log order by seq desc limit $1) l order by l.seq
"""
# (count, total, expired keys, expired size, min, max) per table
_ITEM_SIZES = """
with n as (select cq_now() as v), s as (
  select octet_length(i.path) + octet_length(i.payload) + coalesce(octet_length(i.extra), 0) as b,
         i.expire_ms <= n.v as expired from cq_item i, n)
select count(*), coalesce(sum(b), 0)::bigint, count(*) filter (where expired),
       coalesce(sum(b) filter (where expired), 0)::bigint, coalesce(min(b), 0), coalesce(max(b), 0) from s
"""
_RESULT_SIZES = """
with n as (select cq_now() as v), s as (
  select octet_length(r.path) + octet_length(r.value) as b, r.expire_ms < n.v as expired
  from cq_result r, n where not r.removed_by_event)
select count(*), coalesce(sum(b), 0)::bigint, count(*) filter (where expired),
       coalesce(sum(b) filter (where expired), 0)::bigint, coalesce(min(b), 0), coalesce(max(b), 0) from s
"""
_CACHE_SIZES = """
with n as (select cq_now() as v), s as (
  select c.size_bytes as b, c.expire_ms is not null and c.expire_ms <= n.v as expired
  from cq_cache c, n)
select count(*), coalesce(sum(b), 0)::bigint, count(*) filter (where expired),
       coalesce(sum(b) filter (where expired), 0)::bigint, coalesce(min(b), 0), coalesce(max(b), 0) from s
"""
_CACHE_EXPIRE = "delete from cq_cache where expire_ms <= cq_now()"
_EVICTED = "select evicted_keys, evicted_bytes from cq_stats"
_STATS = """
with n as (select cq_now() as v),
items as (
  select i.prefix, count(*) filter (where i.status = 0) as pending,
         count(*) filter (where i.status = 1) as active
  from cq_item i, n where i.expire_ms > n.v group by i.prefix),
res as (
  select r.prefix, count(*) as results from cq_result r, n
  where r.expire_ms >= n.v and not r.removed_by_event group by r.prefix)
select coalesce(i.prefix, r.prefix)::text, coalesce(i.pending, 0), coalesce(i.active, 0),
       coalesce(r.results, 0)
from items i full join res r on r.prefix = i.prefix order by 1
"""
_CACHE_TOTALS = """
select count(*), coalesce(sum(c.size_bytes), 0)::bigint from cq_cache c
where c.expire_ms is null or c.expire_ms > cq_now()
"""


def _info_rows(table: str, sizes: tuple[int, ...]) -> list[InfoRow]:
    count, total, expired_keys, expired_size, smallest, largest = sizes
    return totals_rows(table, count, total, expired_keys, expired_size, smallest, largest)


class Tables:
    __slots__ = ("_db", "_log_size")

    def __init__(self, db: Database, queue_log_size: int) -> None:
        self._db = db
        self._log_size = queue_log_size

    async def _rows(self, sql: str, *args: object) -> list[Row]:
        return [tuple(r) for r in await self._db.fetch("SELECT", sql, *args)]

    async def table(self, name: str) -> ResultSet | None:
        """``system.<name>``, or None for a name that is not a system table."""
        if name == "queue":
            return ResultSet(QUEUE_COLUMNS, await self._rows(_QUEUE))
        if name == "queue_results":
            return ResultSet(QUEUE_RESULTS_COLUMNS, await self._rows(_RESULTS))
        if name == "cache":
            return ResultSet(CACHE_COLUMNS, await self._rows(_CACHE))
        if name == "queue_prefixes":
            return ResultSet(QUEUE_PREFIXES_COLUMNS, await self._rows(_PREFIXES))
        if name == "queue_log":
            return ResultSet(QUEUE_LOG_COLUMNS, await self._rows(_LOG, max(0, self._log_size)))
        return None

    async def info_rows(self) -> list[Row]:
        """SYS CACHESTORE INFO: CacheItems.*, QueueItems.*, QueueResults.* (sizes in
        humansize DECIMAL). The cache is swept first, as in memory; queue rows past their
        expiry that the leader has not removed yet are counted as expired."""
        await self._db.fetch("SYS CACHESTORE", _CACHE_EXPIRE)
        cache = tuple(await self._db.fetchrow("SYS CACHESTORE", _CACHE_SIZES))
        items = tuple(await self._db.fetchrow("SYS CACHESTORE", _ITEM_SIZES))
        results = tuple(await self._db.fetchrow("SYS CACHESTORE", _RESULT_SIZES))
        return [*_info_rows("CacheItems", cache), *_info_rows("QueueItems", items),
                *_info_rows("QueueResults", results)]  # fmt: skip

    async def eviction_rows(self) -> list[Row]:
        count, total = await self._db.fetchrow("SYS CACHESTORE", _CACHE_TOTALS)
        keys, size = await self._db.fetchrow("SYS CACHESTORE", _EVICTED)
        return [
            ("stats_total_keys", str(count), None),
            ("stats_total_raw_size", format_size(total), None),
            ("total_keys_removed", str(keys), "Keys evicted since start"),
            ("total_size_removed", format_size(size), "Bytes evicted since start"),
            ("total_delete_skipped", "0", _DELETE_SKIPPED),
        ]

    async def stats(self, waiters: int) -> StoreStats:
        rows = await self._db.fetch("stats", _STATS)
        cache_keys, cache_bytes = await self._db.fetchrow("stats", _CACHE_TOTALS)
        evicted, _ = await self._db.fetchrow("stats", _EVICTED)
        return StoreStats(
            prefixes=[PrefixCounts(p, pending, active) for p, pending, active, _ in rows],
            items_total=sum(r[1] + r[2] for r in rows),
            results_total=sum(r[3] for r in rows),
            waiters=waiters,
            cache_keys=cache_keys,
            cache_bytes=cache_bytes,
            evictions_total=evicted,
        )
