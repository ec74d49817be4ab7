"""The CACHE statements on PostgreSQL, in the in-memory cache's semantics (storage/cache.py).

Row ids, KEYS order, TTL, NX, INCR's i64 rules and the size cap are the same. Two
differences are deliberate (docs/topology.md): LRU eviction beyond
``--cache-max-keys`` / ``--cache-max-bytes`` is done by the elected housekeeping front end
and by ``SYS CACHESTORE EVICTION``, not inside each write, so the limits are enforced
within one housekeeping interval; and a GET hit records its use with a sequence number
instead of moving an entry in a list.
"""

from __future__ import annotations

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
)
from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.storage import bound_fields as bound
from cubequeue.storage.cache import counter_value  # Rust's str::parse::<i64>, errors included
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.database import Database
from cubequeue.storage.postgres.queue_steps import text_arg
from cubequeue.storage.sizes import format_size, utf8_len

__all__ = ["CacheSteps", "pattern_prefix", "split_path"]

_RUST_POS_OVERFLOW = "number too large to fit in target type"

_SET = "select cq_cache_set($1, $2, $3, $4, $5, $6, $7)"
_GET = "select cq_cache_get($1)"
_KEYS = "select o_path from cq_cache_keys($1)"
_REMOVE = "delete from cq_cache where path = $1"
_TRUNCATE = "delete from cq_cache"
_INCR = "select * from cq_cache_incr($1, $2, $3, $4)"
_PURGE = "select cq_cache_purge($1)"


def split_path(path: str) -> tuple[str, str]:
    """(index prefix, key): before and after the last colon; ``""`` prefix without one."""
    prefix, colon, key = path.rpartition(":")
    return (prefix, key) if colon else ("", path)


def pattern_prefix(pattern: str) -> str:
    """KEYS' pattern: strip a trailing ``:*``, else one trailing ``:``."""
    if pattern.endswith(":*"):
        return pattern[:-2]
    if pattern.endswith(":"):
        return pattern[:-1]
    return pattern


class CacheSteps:
    __slots__ = ("_db", "_limits")

    def __init__(self, db: Database, limits: Limits) -> None:
        self._db = db
        self._limits = limits

    async def cache_set(self, cmd: CacheSet, process_id: str | None) -> ResultSet:
        path = text_arg(bound.text(cmd.key), "the key")
        value = text_arg(bound.text(cmd.value), "the value")
        ttl = bound.opt_num(cmd.ttl)
        value_bytes = utf8_len(value)
        max_entry = self._limits.cache_max_entry_bytes
        prefix, key = split_path(path)
        if value_bytes >= max_entry:
            raise LimitExceeded(
                f"Unable to SET cache with '{key}' key, exceeds maximum allowed "
                f"size for payload: {format_size(value_bytes)}, "
                f"max allowed: {format_size(max_entry)}"
            )
        ok = await self._db.fetchval(
            cmd.tag, _SET, path, prefix, key, value, ttl, cmd.nx, utf8_len(path) + value_bytes
        )
        return ResultSet(cmd.result_columns(), [(bool(ok),)])

    async def cache_get(self, cmd: CacheGet, process_id: str | None) -> ResultSet:
        path = text_arg(bound.text(cmd.key), "the key")
        return ResultSet(cmd.result_columns(), [(await self._db.fetchval(cmd.tag, _GET, path),)])

    async def cache_keys(self, cmd: CacheKeys, process_id: str | None) -> ResultSet:
        prefix = pattern_prefix(text_arg(bound.text(cmd.pattern), "the pattern"))
        rows = await self._db.fetch(cmd.tag, _KEYS, prefix)
        return ResultSet(cmd.result_columns(), [(r[0],) for r in rows])

    async def cache_remove(self, cmd: CacheRemove, process_id: str | None) -> ResultSet:
        await self._db.fetch(cmd.tag, _REMOVE, text_arg(bound.text(cmd.key), "the key"))
        return EMPTY

    async def cache_truncate(self, cmd: CacheTruncate, process_id: str | None) -> ResultSet:
        await self._db.fetch(cmd.tag, _TRUNCATE)
        return EMPTY

    async def cache_incr(self, cmd: CacheIncr, process_id: str | None) -> ResultSet:
        path = text_arg(bound.text(cmd.key), "the key")
        prefix, key = split_path(path)
        ok, value = await self._db.fetchrow(cmd.tag, _INCR, path, prefix, key, utf8_len(path) + 1)
        if not ok:
            counter_value(path, value)  # raises Rust's error, naming the key and value
            raise InvalidTextRepresentation(_RUST_POS_OVERFLOW)  # i64::MAX + 1
        return ResultSet(cmd.result_columns(), [(value,)])

    async def cache_purge(self, cmd: CachePurge, process_id: str | None) -> ResultSet:
        prefix = pattern_prefix(text_arg(bound.text(cmd.prefix), "the prefix"))
        removed = await self._db.fetchval(cmd.tag, _PURGE, prefix)
        return ResultSet(cmd.result_columns(), [(removed,)])
