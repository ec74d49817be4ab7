"""The in-memory store, :class:`MemoryStore`: the first implementation of the store seam
(:class:`~cubequeue.storage.interface.StoreBackend`), which the durable store wraps.

Each call is one atomic step (``docs/dialect.md`` §1.6, §7): the clock is read once,
expired queue rows are swept (§8 rule 9; O(1) when nothing is due, so an idle store does
no work), the command runs through a table keyed by command class (built at construction
from the commands' step names, storage/steps.py), and only after
it returned are the step's post-commit effects run: RESULT_BLOCKING callbacks (§8 rule 13)
and ``on_departure`` hooks. A command that raises has changed nothing, because every
command validates before it mutates.

The store never waits and never imports asyncio: RESULT_BLOCKING either answers at once or
registers the server's callback (:meth:`MemoryStore.result_blocking`); the server owns the
timeout and withdraws the :class:`~cubequeue.storage.waiters.Waiter`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from cubequeue.grammar.commands import (
    CacheTruncate,
    Command,
    QueueList,
    QueueResultBlocking,
    SysCachestore,
    SysClock,
)
from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.ack_results import Result
from cubequeue.storage.cache import CacheStore
from cubequeue.storage.cachestore_info import queue_info_rows
from cubequeue.storage.clock import AdjustableClock, Clock
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.queue import QueueState, item_record, prefix_record
from cubequeue.storage.queue_commands import QueueCommands
from cubequeue.storage.queue_item import path_prefix
from cubequeue.storage.queue_log import Departure
from cubequeue.storage.queue_tables import (
    queue_prefixes_table,
    queue_results_table,
    queue_stream,
)
from cubequeue.storage.record_kinds import CACHE_PUT, RESULT_PUT
from cubequeue.storage.stats import PrefixCensus, StoreStats
from cubequeue.storage.steps import find_steps, no_step
from cubequeue.storage.sys_steps import (
    cachestore_action,
    cachestore_actions,
    cachestore_frame,
    clock_frame,
    clock_request,
)
from cubequeue.storage.waiters import Callback, Waiter

__all__ = ["MemoryStore"]

_log = logging.getLogger("cubequeue.queue")

_Handler = Callable[..., ResultSet | RowStream]
_C = TypeVar("_C", bound=Command)


class MemoryStore:
    """The in-memory queue and cache behind every QUEUE, CACHE and SYS statement."""

    #: which store this is (see :class:`~cubequeue.storage.interface.StoreBackend`)
    kind: str = "memory"

    def __init__(
        self,
        clock: Clock,
        limits: Limits | None = None,
        *,
        on_departure: Callable[[Departure], None] | None = None,
    ) -> None:
        self.clock = clock
        self.limits = limits if limits is not None else Limits()
        self._queue = QueueState(
            queue_log_size=self.limits.queue_log_size, on_departure=on_departure,
            work_budget=self.limits.work_budget,
        )
        self._commands = QueueCommands(self._queue, self.limits)
        self._cache = CacheStore(clock, self.limits)
        cache = self._cache
        #: command class -> its step, found by the commands' step names (storage/steps.py)
        self._dispatch: dict[type[Command], _Handler] = {
            kind: _cache_step(step) if owner is cache else step
            for kind, (owner, step) in find_steps((self._commands, cache, self)).items()
        }
        self._cachestore = cachestore_actions(self)

    # -- steps --------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The store's clock (what SYS CLOCK moves)."""
        return self.clock()

    def _begin(self) -> int:
        now = self.clock()
        self._queue.sweep(now)
        return now

    def _commit(self) -> None:
        """Run the step's post-commit effects; a failing callback is logged, not raised,
        because the step it follows has committed."""
        effects = self._queue.post_commit
        if not effects:
            return
        self._queue.post_commit = []
        for effect in effects:
            try:
                effect()
            except Exception:
                _log.exception("post-commit callback failed")

    def execute(self, cmd: Command, process_id: str | None = None) -> ResultSet | RowStream:
        """Run one bound command (anything but RESULT_BLOCKING) as one atomic step; a
        listing larger than one work budget is a :class:`RowStream` of that step's rows."""
        handler = self._dispatch.get(type(cmd))
        if handler is None:
            raise no_step(cmd)
        # _begin and _commit inlined: this is every statement's path (bench/RESULTS.md)
        queue = self._queue
        now = self.clock()
        queue.sweep(now)
        effects = queue.post_commit
        swept = len(effects)  # the sweep's departures happen whatever follows
        try:
            result = handler(cmd, process_id, now)
        except BaseException:
            del effects[swept:]
            if queue.has_deferred:
                queue.run_deferred(self.limits.work_budget)
            self._commit()
            raise
        if queue.has_deferred:
            queue.run_deferred(self.limits.work_budget)
        if effects:
            self._commit()
        return result

    @property
    def has_deferred(self) -> bool:
        """Bulk work is left (a truncated queue to release, due items to sweep): the
        server calls :meth:`run_deferred` once per event-loop turn while this holds."""
        return self._queue.has_deferred

    def run_deferred(self, budget: int | None = None) -> bool:
        """One slice (``budget`` units, by default ``Limits.work_budget``) of the bulk
        work steps leave behind, between steps; whether more is left."""
        queue = self._queue
        if queue.has_deferred:
            queue.run_deferred(self.limits.work_budget if budget is None else budget)
            self._commit()
        return queue.has_deferred

    def result_blocking(
        self, cmd: QueueResultBlocking, callback: Callback, process_id: str | None = None
    ) -> ResultSet | Waiter:
        """§3.12: the row at once (consuming by path), or ``callback`` registered until
        the matching ACK, returned as a :class:`Waiter` the server cancels on timeout."""
        now = self._begin()
        try:
            return self._commands.queue_result_blocking(cmd, callback, now)
        finally:
            self._commit()

    # -- SYS ----------------------------------------------------------------------------

    def sys_cachestore(self, cmd: SysCachestore, process_id: str | None, now: int) -> ResultSet:
        """§5.1: the action's ``cachestore_<action>`` method (storage/sys_steps.py)."""
        return cachestore_frame(cmd, cachestore_action(self._cachestore, cmd)(now))

    def cachestore_healthcheck(self, now: int) -> list[Row]:
        return []

    def cachestore_persist(self, now: int) -> list[Row]:
        """Nothing to write in memory (the durable store snapshots)."""
        return []

    def cachestore_wipe(self, now: int) -> list[Row]:
        """In memory, WIPE is QUEUE TRUNCATE plus CACHE TRUNCATE."""
        self._queue.truncate(now)
        self._cache.cache_truncate(CacheTruncate())
        return []

    def cachestore_compaction(self, now: int) -> list[Row]:
        """The cache's expired entries go (the queue was swept at step start, §8 rule 9)."""
        self._cache.sweep()
        return []

    def cachestore_eviction(self, now: int) -> list[Row]:
        self._cache.run_eviction()
        return list(self._cache.eviction_rows())

    def cachestore_info(self, now: int) -> list[Row]:
        self._cache.sweep()
        return [*self._cache.info_rows(), *queue_info_rows(self._queue, now)]

    def sys_clock(self, cmd: SysClock, process_id: str | None, now: int) -> ResultSet:
        """cubequeue's test clock: refused with 42501 unless ``--test-clock``."""
        clock = self.clock
        ms = clock_request(cmd, self.limits, movable=isinstance(clock, AdjustableClock))
        assert isinstance(clock, AdjustableClock), "clock_request refused any other"
        if ms is not None:
            clock.advance(ms)
        elif cmd.action == "freeze":
            clock.freeze()
        elif cmd.action == "resume":
            clock.resume()
        return clock_frame(clock(), clock.offset_ms, clock.frozen)

    # -- durable mode -------------------------------------------------------------------

    def attach_journal(self, journal: list[tuple[object, ...]]) -> None:
        """Every later change appends its state record to ``journal`` (durable mode)."""
        self._queue.journal = journal
        self._cache.journal = journal

    def restore(
        self,
        items: Iterable[Sequence[object]],
        results: Iterable[Sequence[object]],
        cache: Iterable[Sequence[object]],
        next_id: int,
        prefixes: Iterable[Sequence[object]] = (),
    ) -> None:
        """Recovery: rebuild every index from the state records themselves (ITEM_PUT,
        RESULT_PUT, CACHE_PUT and PREFIX, kind first; validated on load). A PREFIX whose
        prefix holds no row any more is dropped, as the live store forgets an empty one."""
        queue = self._queue
        queue.restore_rows(items)
        for row in results:
            _, id_, path, value, expire, external_id, deleted = row
            result = Result(
                id=id_, path=path, prefix=path_prefix(path), value=value,  # type: ignore[arg-type]  # validated record fields
                expire=expire, external_id=external_id,  # type: ignore[arg-type]  # validated record fields
            )
            result.deleted = bool(deleted)
            queue.add_result(result)
        for _, row_id, path, value, expire in cache:
            self._cache.restore(row_id, path, value, expire)  # type: ignore[arg-type]  # validated record fields
        self._cache.sort_prefix_index()
        for _, prefix, concurrency, heartbeat_timeout, orphaned_timeout in prefixes:
            state = queue.prefixes.get(prefix)  # type: ignore[arg-type]  # validated str
            if state is not None:
                state.last_concurrency = concurrency  # type: ignore[assignment]  # validated int
                state.last_to_cancel = (None if heartbeat_timeout is None else  # type: ignore[assignment]  # validated ints
                                        (heartbeat_timeout, orphaned_timeout))
        queue.reserve_ids(next_id)

    def snapshot_slices(self, size: int) -> Iterator[list[tuple[object, ...]]]:
        """The state as state records, ``size`` per slice, each built when asked for from
        the keys held at the call: a fuzzy snapshot (rows that left meanwhile are skipped,
        changed ones show their newer state, and the log from this moment replays over it)."""
        queue, cache = self._queue, self._cache
        item_ids, result_ids, paths = queue.item_ids(), queue.results.ids(), cache.lru_paths()
        next_cache_id = cache.next_id
        # what prefixes remember is small (one record per prefix): taken at the call
        out: list[tuple[object, ...]] = [
            prefix_record(state) for state in queue.prefixes
            if state.last_concurrency is not None or state.last_to_cancel is not None]
        for id_ in item_ids:
            item = queue.by_id(id_)
            if item is not None:
                out.append(item_record(item))
                if len(out) >= size:
                    yield out
                    out = []
        for id_ in result_ids:
            res = queue.results.by_id(id_)
            if res is not None:
                out.append((RESULT_PUT, res.id, res.path, res.value, res.expire,
                            res.external_id, res.deleted))
                if len(out) >= size:
                    yield out
                    out = []
        for path in paths:
            row = cache.row(path)
            if row is not None and row[0] < next_cache_id:
                out.append((CACHE_PUT, row[0], path, row[1], row[2]))
                if len(out) >= size:
                    yield out
                    out = []
        if out:
            yield out

    def id_counter(self) -> Callable[[], int]:
        """A reader of :attr:`next_item_id` (the durable store checks its id reservation
        twice per mutating step: one call instead of a property and a call)."""
        return self._queue.peek_next_id

    @property
    def next_cache_id(self) -> int:
        """The row id the next new cache entry takes (a snapshot's trailer holds it)."""
        return self._cache.next_id

    @property
    def next_item_id(self) -> int:
        """The id the next ADD takes (durable mode reserves ids ahead of it)."""
        return self._queue.peek_next_id()

    def wipe(self) -> None:
        """SYS CACHESTORE WIPE: every item, result and cache entry goes (ids continue)."""
        now = self._begin()
        try:
            self.cachestore_wipe(now)
        finally:
            self._commit()

    # -- views --------------------------------------------------------------------------

    def system_table(self, name: str) -> ResultSet | RowStream:
        """The live rows of ``system.<name>`` (§8 rule 11); see
        :data:`~cubequeue.storage.system_schemas.SYSTEM_TABLES`. ``system.queue`` or
        ``system.queue_prefixes`` larger than one work budget is a :class:`RowStream`
        that knows its length."""
        table = name.lower().removeprefix("system.")
        now = self._begin()
        try:
            if table == "queue":
                return queue_stream(self._queue, self.limits.work_budget)
            if table == "queue_results":
                return queue_results_table(self._queue)
            if table == "cache":
                return self._cache.system_rows()
            if table == "queue_prefixes":
                return queue_prefixes_table(self._queue, now, self.limits.work_budget)
            if table == "queue_log":
                return self._queue.log.table()
        finally:
            self._commit()
        raise FeatureNotSupported(f"unknown system table: system.{table}")

    def pending_page(
        self, prefix: str, limit: int, process_id: str | None = None, *, with_payload: bool = False
    ) -> ResultSet:
        """The first ``limit`` rows QUEUE PENDING would return, in O(limit + log n): for
        benchmarks and operators; not a statement."""
        self._begin()
        try:
            rows = self._commands.list_rows(prefix, "pending", with_payload, process_id, limit)
        finally:
            self._commit()
        return ResultSet(QueueList(prefix=prefix, with_payload=with_payload).result_columns(), rows)

    def stats(self) -> StoreStats:
        """Live figures only: both sides sweep what has expired, as INFO does."""
        self._begin()
        self._commit()
        self._cache.sweep()
        queue = self._queue
        return StoreStats(
            # read when asked: its length at once, its rows in slices (/metrics) or whole
            # (a TRUNCATE replaces queue.prefixes: a walk then ends)
            prefixes=PrefixCensus(len(queue.prefixes), lambda: queue.prefixes, self.clock),
            items_total=len(queue),
            results_total=len(queue.results),
            waiters=queue.waiters.count,
            cache_keys=self._cache.keys,
            cache_bytes=self._cache.bytes,
            evictions_total=self._cache.evictions_total,
            departures=queue.departed.snapshot(),
        )


def _cache_step(method: Callable[[_C], ResultSet]) -> _Handler:
    """Adapt a CacheStore method (which reads the clock itself) to the handler shape."""

    def handler(cmd: _C, process_id: str | None, now: int) -> ResultSet:
        return method(cmd)

    return handler
