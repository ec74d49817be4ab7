"""PostgresStore: the store seam over PostgreSQL, for stateless front ends.

Every QUEUE, CACHE and SYS statement is one call of a PL/pgSQL function, so one database
transaction; the front end keeps no queue state, only its RESULT_BLOCKING waiters
(:mod:`.waiters`) and a copy of the test clock for ``now_ms``. Frames, errors and
SQLSTATEs are the in-memory store's (storage/store.py); the deliberate differences are
listed in docs/topology.md: eviction and the physical removal of expired rows
are done by the elected housekeeping front end (every lookup still ignores expired rows),
and an ACK's waiter delivery happens when its event reaches the waiter's front end.

Start with :meth:`PostgresStore.start` (connects, migrates under an advisory lock, starts
the session) and stop with :meth:`PostgresStore.close`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from cubequeue.grammar.commands import (
    Command,
    QueueResultBlocking,
    SysCachestore,
    SysClock,
)
from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage import bound_fields as bound
from cubequeue.storage.capabilities import PoolHealth
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.cache_steps import CacheSteps
from cubequeue.storage.postgres.database import Database
from cubequeue.storage.postgres.migrate import migrate
from cubequeue.storage.postgres.queue_steps import QueueSteps, text_arg
from cubequeue.storage.postgres.session import Session
from cubequeue.storage.postgres.tables import Tables
from cubequeue.storage.postgres.waiters import AckEvent, Waiter, WaiterHub
from cubequeue.storage.stats import StoreStats
from cubequeue.storage.steps import no_step, step_table
from cubequeue.storage.sys_steps import (
    cachestore_action,
    cachestore_actions,
    cachestore_frame,
    clock_frame,
    clock_request,
)

__all__ = ["PostgresStore"]

_log = logging.getLogger("cubequeue.store.postgres")

_Handler = Callable[[Any, str | None], Coroutine[Any, Any, ResultSet]]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class PostgresStore:
    """The store seam over one PostgreSQL database (see the module docstring)."""

    kind = "postgresql"

    def __init__(
        self,
        dsn: str,
        limits: Limits | None = None,
        *,
        session_dsn: str | None = None,
        pool_size: int = 10,
        statement_cache_size: int = 256,
        poll_s: float = 0.2,
        housekeeping_s: float = 1.0,
        housekeeping: bool = True,
        listen: bool = True,
    ) -> None:
        self.limits = limits if limits is not None else Limits()
        self.db = Database(dsn, max_size=pool_size, statement_cache_size=statement_cache_size)
        self.waiters = WaiterHub()
        self.session = Session(
            session_dsn or dsn, self.db, self.waiters, self.limits,
            on_event=self._event, on_clock=self.refresh_clock, poll_s=poll_s,
            housekeeping_s=housekeeping_s, housekeeping=housekeeping, listen=listen,
        )
        self._queue = QueueSteps(self.db, self.limits)
        self._cache = CacheSteps(self.db, self.limits)
        self._tables = Tables(self.db, self.limits.queue_log_size)
        #: the database clock: frozen instant, or the skew of (db time + offset) vs ours
        self._frozen: int | None = None
        self._skew = 0
        self._tasks: set[asyncio.Task[None]] = set()
        #: command class -> its step, found by the commands' step names (storage/steps.py)
        self._dispatch: dict[type[Command], _Handler] = step_table(
            self._queue, self._cache, self)
        self._cachestore = cachestore_actions(self)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, migrate (once across front ends), start the session; 57P03 if down."""
        await self.db.open()
        try:
            async with self.db.connection() as conn:
                applied = await migrate(conn)
            if applied:
                _log.info("queue database migrated to version %d", applied[-1])
            await self.refresh_clock()
            await self.session.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await self.session.close()
        for task in list(self._tasks):
            task.cancel()
        await self.db.close()

    @property
    def available(self) -> bool:
        """Serving: the pool reached the database and the session listens (``/readyz``)."""
        return self.db.available and self.session.listening

    # -- the seam -----------------------------------------------------------------------

    def execute(self, cmd: Command, process_id: str | None = None) -> Awaitable[ResultSet]:
        """One bound command as one database transaction (an awaitable of its frame)."""
        handler = self._dispatch.get(type(cmd))
        if handler is None:
            raise no_step(cmd)
        if process_id is not None:
            text_arg(process_id, "the process id")
        return handler(cmd, process_id)

    def result_blocking(
        self,
        cmd: QueueResultBlocking,
        callback: Callable[[ResultSet], None],
        process_id: str | None = None,
    ) -> Awaitable[ResultSet | Waiter]:
        return self._result_blocking(cmd, callback)

    async def _result_blocking(
        self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None]
    ) -> ResultSet | Waiter:
        """RESULT_BLOCKING as docs/topology.md §3 tells it: listener up, register before
        the one look (consuming by path), so an ACK after the look arrives as an event
        (:mod:`.waiters`); then wait without holding a connection; the server owns the
        timeout."""
        key = bound.key(cmd.key)
        timeout_ms = bound.num(cmd.timeout)
        # not longer than the statement's own deadline (none if 0); at once if the database is away
        await self.session.ready(timeout_ms / 1000 if timeout_ms > 0 else None)
        waiter = self.waiters.register(key, callback)
        try:
            row, watermark = await self._queue.lookup_result(cmd.tag, key, None, lock=True)
        except BaseException:
            waiter.cancel()
            raise
        waiter.watermark = watermark
        waiter.looking = False
        if row is not None:
            waiter.cancel()
            return ResultSet(cmd.RESULT_COLUMNS, [row])
        deferred, waiter.deferred = waiter.deferred, []
        for event in deferred:
            self._event(event)
        return waiter

    def system_table(self, name: str) -> Awaitable[ResultSet]:
        return self._system_table(name.lower().removeprefix("system."))

    async def _system_table(self, table: str) -> ResultSet:
        result = await self._tables.table(table)
        if result is None:
            raise FeatureNotSupported(f"unknown system table: system.{table}")
        return result

    def stats(self) -> Awaitable[StoreStats]:
        return self._tables.stats(self.waiters.count)

    def pool_health(self) -> PoolHealth:
        """The command pool's connections and failures by kind (``ReportsPoolHealth``)."""
        return self.db.health()

    def now_ms(self) -> int:
        """The database's clock as of the last refresh (what UNIX_TIMESTAMP() reads)."""
        frozen = self._frozen
        return frozen if frozen is not None else _wall_ms() + self._skew

    # -- RESULT_BLOCKING events -----------------------------------------------------------

    def _event(self, event: AckEvent) -> None:
        """An ACK committed somewhere: answer the local waiters it concerns."""
        by_id, by_path = self.waiters.matching(event)
        ready: list[tuple[Waiter, bool]] = []
        for group, is_path in ((by_id, False), (by_path, True)):
            for waiter in group:
                if waiter.looking:
                    waiter.deferred.append(event)
                elif event.seq == 0 or event.seq > waiter.watermark:
                    ready.append((waiter, is_path))
        if not ready:
            return
        for waiter, _ in ready:
            waiter.take()  # a later event for it finds nothing
        task = asyncio.get_running_loop().create_task(self._deliver(event, ready))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, event: AckEvent, ready: list[tuple[Waiter, bool]]) -> None:
        value: str | None = None
        if event.has_result:
            path_waiters = any(is_path for _, is_path in ready)
            id_waiters = any(not is_path for _, is_path in ready)
            try:
                value = await self.db.fetchval(
                    "QUEUE RESULT_BLOCKING", "select cq_result_event($1, $2, $3)",
                    event.id, path_waiters, id_waiters,
                )
            except Exception as exc:  # the re-check after reconnect answers them
                _log.warning("RESULT_BLOCKING delivery of %d failed: %s", event.id, exc)
                for waiter, _ in ready:
                    waiter.restore()
                return
            if value is None:  # removed meanwhile (TRUNCATE, a newer ACK with its external id)
                for waiter, _ in ready:
                    waiter.restore()
                return
        result = QueueSteps.delivered(value, event.id)
        for waiter, _ in ready:
            try:
                waiter.fire(result)
            except Exception:
                _log.exception("RESULT_BLOCKING callback failed")

    # -- SYS ----------------------------------------------------------------------------

    async def sys_cachestore(self, cmd: SysCachestore, process_id: str | None) -> ResultSet:
        """§5.1: the action's ``cachestore_<action>`` method (storage/sys_steps.py)."""
        return cachestore_frame(cmd, await cachestore_action(self._cachestore, cmd)())

    async def cachestore_healthcheck(self) -> list[Row]:
        await self.db.fetch(SysCachestore.tag, "select 1")
        return []

    async def cachestore_persist(self) -> list[Row]:
        """The database has every step once it answered: PERSIST checks it is there."""
        return await self.cachestore_healthcheck()

    async def cachestore_wipe(self) -> list[Row]:
        """QUEUE TRUNCATE plus CACHE TRUNCATE, one transaction."""
        await self.db.fetch(SysCachestore.tag, "select cq_wipe()")
        return []

    async def cachestore_compaction(self) -> list[Row]:
        await self.session.housekeep()
        return []

    async def cachestore_eviction(self) -> list[Row]:
        await self.db.fetch(SysCachestore.tag, "select cq_cache_evict($1, $2)",
                            self.limits.cache_max_keys, self.limits.cache_max_bytes)
        return await self._tables.eviction_rows()

    async def cachestore_info(self) -> list[Row]:
        return await self._tables.info_rows()

    async def sys_clock(self, cmd: SysClock, process_id: str | None) -> ResultSet:
        """The test clock, shared by every front end (kept in cq_clock)."""
        ms = clock_request(cmd, self.limits)
        now, offset, frozen = await self.db.fetchrow(
            cmd.tag, "select * from cq_clock($1, $2)", cmd.action, ms
        )
        self._set_clock(now, frozen)
        return clock_frame(now, offset, frozen)

    async def refresh_clock(self) -> None:
        now, _, frozen = await self.db.fetchrow("SYS CLOCK", "select * from cq_clock('show', null)")
        self._set_clock(now, frozen)

    def _set_clock(self, now: int, frozen: bool) -> None:
        self._frozen = now if frozen else None
        self._skew = now - _wall_ms()
