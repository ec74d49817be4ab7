"""Build, open and close the configured store: memory, durable or PostgreSQL.

The server asks this module for its store and never names a store class itself:

* ``--store memory`` (the default) without ``--data-dir``: the in-memory store, ready at
  once;
* ``--store memory`` with ``--data-dir``: the durable store, whose recovery reads the data
  directory (:func:`cubequeue.storage.durable.opening.open_store`);
* ``--store postgresql://…``: the PostgreSQL store (stateless front ends), which must
  connect, migrate and start its notification session inside the event loop. It is
  imported only when configured, so a memory-only server does not pay for asyncpg.

The server holds a :class:`StoreSlot` from the start, and :func:`open_store` fills it.
Until then every command answers 57P03 ("the database system is starting up", as
PostgreSQL does during recovery) and :func:`store_ready` is False, so ``/readyz`` answers
503. What the attached store can do beyond the seam (deferred work, closing, readiness,
the durable log's figures) is found once, when it is attached (:attr:`StoreSlot.capabilities`).
The statement path does not go through the slot: the executor watches it and calls the
attached store itself (:meth:`StoreSlot.watch`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.results import ResultSet
from cubequeue.server.options import parse_store
from cubequeue.storage.capabilities import Capabilities, capabilities_of
from cubequeue.storage.clock import Clock
from cubequeue.storage.durable.errors import StartingUp
from cubequeue.storage.interface import BlockingOutcome, StepResult, StoreBackend, Table
from cubequeue.storage.limits import Limits
from cubequeue.storage.stats import StoreStats
from cubequeue.storage.store import MemoryStore

if TYPE_CHECKING:
    from cubequeue.server.config import Config
    from cubequeue.storage.durable.progress import ProgressWatch
    from cubequeue.storage.queue_log import Departure

__all__ = [
    "MEMORY",
    "StartupRefused",
    "StoreSlot",
    "build_store",
    "close_store",
    "open_store",
    "parse_store",
    "store_ready",
]

_log = logging.getLogger("cubequeue.server")

MEMORY = "memory"
_STARTING = "the database system is starting up"
#: the PostgreSQL store's first connection is retried this often (at most), in seconds
_RETRY_MAX_S = 5.0
#: a scrape reads PostgreSQL counts taken at most this long ago
STATS_MAX_AGE_S = 1.0
#: the exit status when the durable log cannot go on (``--fsync always`` failed)
EXIT_FATAL = 70


class StartupRefused(Exception):
    """The store cannot start (data directory locked, recovery refused, unreadable);
    ``str(err)`` is the one line to print."""


#: what :func:`open_store` runs to get the store (recovery, connecting)
Opener = Callable[[], Awaitable[StoreBackend]]


#: what :meth:`StoreSlot.watch` calls with the store now and with every store attached
OnAttach = Callable[[StoreBackend, Capabilities], None]


class _Execute(Protocol):
    """:meth:`StoreBackend.execute`'s signature, as a bound method."""

    def __call__(self, cmd: Command, process_id: str | None = None) -> StepResult: ...


class _ResultBlocking(Protocol):
    """:meth:`StoreBackend.result_blocking`'s signature, as a bound method."""

    def __call__(
        self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
        process_id: str | None = None,
    ) -> BlockingOutcome: ...


class _StartingUp:
    """The store until one is attached: every step answers 57P03, the clock still runs."""

    def __init__(self, kind: str, clock: Clock | None) -> None:
        self.kind = kind
        self._clock = clock

    def execute(self, cmd: Command, process_id: str | None = None) -> StepResult:
        raise StartingUp(_STARTING)

    def result_blocking(
        self,
        cmd: QueueResultBlocking,
        callback: Callable[[ResultSet], None],
        process_id: str | None = None,
    ) -> BlockingOutcome:
        raise StartingUp(_STARTING)

    def system_table(self, name: str) -> Table:
        raise StartingUp(_STARTING)

    def stats(self) -> StoreStats:
        return StoreStats()

    def now_ms(self) -> int:
        return self._clock() if self._clock is not None else time.time_ns() // 1_000_000


class StoreSlot:
    """The server's store: 57P03 until :meth:`attach`, then the store itself.

    ``execute``, ``result_blocking`` and ``system_table`` are the current store's own bound
    methods (read through properties: no delegation, nothing rebound); :attr:`store` is
    that store and :attr:`capabilities` what it can do, found when it was attached.
    """

    def __init__(self, kind: str, clock: Clock | None = None, opener: Opener | None = None) -> None:
        self.kind = kind
        #: the attached store, None until :meth:`attach`
        self.target: StoreBackend | None = None
        #: what calls reach now: the attached store, or one that answers 57P03
        self.store: StoreBackend = _StartingUp(kind, clock)
        #: what the attached store can do beyond the seam (nothing before it is attached)
        self.capabilities = Capabilities()
        self.opener = opener
        #: a durable store's recovery progress, which the console reads
        self.recovery_progress: ProgressWatch | None = None
        self._watchers: list[OnAttach] = []
        #: the store answers its figures later (the PostgreSQL store): they are sampled
        self._sampled = False
        self._stats = StoreStats()
        self._stats_at = float("-inf")
        self._stats_task: asyncio.Task[None] | None = None

    def attach(self, store: StoreBackend) -> None:
        """Serve ``store`` from now on: its capabilities are found here, once, and every
        watcher is told."""
        self.target = self.store = store
        self.kind = store.kind
        self.capabilities = Capabilities.of(store)
        self._sampled = False
        for on_attach in self._watchers:
            on_attach(store, self.capabilities)

    def watch(self, on_attach: OnAttach) -> None:
        """Call ``on_attach`` with the store now, and again whenever one is attached."""
        self._watchers.append(on_attach)
        on_attach(self.store, self.capabilities)

    # -- the seam -------------------------------------------------------------------------

    @property
    def execute(self) -> _Execute:
        return self.store.execute

    @property
    def result_blocking(self) -> _ResultBlocking:
        return self.store.result_blocking

    @property
    def system_table(self) -> Callable[[str], Table]:
        return self.store.system_table

    def now_ms(self) -> int:
        """The current store's clock (also through a bound method taken before attach)."""
        return self.store.now_ms()

    def stats(self) -> StoreStats:
        """The store's figures. /metrics' collector is synchronous, so a store that answers
        them later (an awaitable: the PostgreSQL store) is read through a sample, at most
        :data:`STATS_MAX_AGE_S` old and refreshed on demand (empty until the first)."""
        if not self._sampled:
            got = self.store.stats()
            if isinstance(got, StoreStats):
                return got
            self._sampled = True
            self._refresh(got)
        elif time.monotonic() - self._stats_at >= STATS_MAX_AGE_S:
            self._refresh(None)
        return self._stats

    def _refresh(self, pending: Awaitable[StoreStats] | None) -> None:
        loop = _running_loop()
        if self._stats_task is not None or loop is None:
            if inspect.iscoroutine(pending):
                pending.close()  # a sample is on its way already (or no loop to run it)
            return
        self._stats_task = loop.create_task(self._sample(pending))

    async def _sample(self, pending: Awaitable[StoreStats] | None) -> None:
        try:
            got = pending if pending is not None else self.store.stats()
            self._stats = got if isinstance(got, StoreStats) else await got
            self._stats_at = time.monotonic()
        except Exception as exc:  # the database is away: keep the last sample
            _log.debug("store stats unavailable: %s", exc)
        finally:
            self._stats_task = None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def build_store(
    config: Config,
    *,
    clock: Clock,
    limits: Limits,
    on_departure: Callable[[Departure], None] | None = None,
    wall_ms: Callable[[], int] | None = None,
) -> StoreSlot:
    """The slot for the store ``config`` names (no I/O: :func:`open_store` does that). The
    in-memory store is attached at once; the others when :func:`open_store` has run."""
    target = parse_store(config.store)
    if target != MEMORY:
        assert config.data_dir is None, "options.py refuses --data-dir with --store postgresql"
        dsn, session_dsn = target, config.store_session_dsn

        async def postgres() -> StoreBackend:
            from cubequeue.storage.postgres import PostgresStore, StoreRefused

            try:  # a URL that can never work (no such database or role): one line, exit 2
                store = PostgresStore(dsn, limits, session_dsn=session_dsn)
                await _start_postgres(store)
            except StoreRefused as err:
                raise StartupRefused(str(err)) from err
            return store

        return StoreSlot("postgresql", clock, postgres)
    memory = MemoryStore(clock, limits, on_departure=on_departure)
    data_dir = config.data_dir
    if data_dir is None:
        slot = StoreSlot(MEMORY, clock)
        slot.attach(memory)
        return slot

    from cubequeue.storage.durable.progress import ProgressWatch

    watch = ProgressWatch()  # the console reads the recovery's progress here

    async def durable() -> StoreBackend:
        from cubequeue.storage.durable.errors import DataDirLocked
        from cubequeue.storage.durable.opening import open_store as open_durable
        from cubequeue.storage.durable.recovery import RecoveryRefused

        try:
            store, _ = await open_durable(
                memory, data_dir=data_dir, fsync=config.fsync,  # type: ignore[arg-type]
                recovery=config.recovery,  # type: ignore[arg-type]
                max_disk_bytes=config.max_disk_bytes, segment_bytes=config.segment_bytes,
                snapshot_min_log_bytes=config.snapshot_min_log_bytes,
                snapshot_interval_s=float(config.snapshot_interval),
                wall_ms=wall_ms or _wall_ms, on_fatal=_fatal, progress=watch,
            )
        except (DataDirLocked, RecoveryRefused) as err:
            raise StartupRefused(str(err)) from err  # its line names the directory
        except OSError as err:
            raise StartupRefused(f"--data-dir {data_dir}: {err.strerror or err}") from err
        return store

    slot = StoreSlot("durable", clock, durable)
    slot.recovery_progress = watch
    return slot


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _fatal(reason: str) -> None:
    """The durable log cannot keep its promise (``--fsync always``): stop at once, as
    PostgreSQL PANICs, rather than acknowledge writes that may not be on disk."""
    _log.critical("durable log failed, stopping: %s", reason)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(EXIT_FATAL)


async def _start_postgres(store: Any) -> None:
    """Connect, migrate and listen; while the database is unreachable keep trying (the
    slot answers 57P03 and /readyz 503 meanwhile), so front ends may start before it."""
    from cubequeue.storage.postgres import StoreUnavailable

    delay = 0.2
    while True:
        try:
            await store.start()
            return
        except StoreUnavailable as err:
            _log.warning("queue database not reachable yet, retrying in %.1f s: %s", delay, err)
        await asyncio.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX_S)


async def open_store(slot: StoreBackend) -> None:
    """Recover the durable store or connect the PostgreSQL one, then attach it; raises
    :class:`StartupRefused` when it cannot start at all. The memory store is open."""
    if not isinstance(slot, StoreSlot) or slot.target is not None:
        return
    assert slot.opener is not None, "a slot is built attached or with an opener"
    slot.attach(await slot.opener())
    _log.info("store ready: %s", slot.kind)


async def close_store(slot: StoreBackend) -> None:
    """The durable store's final snapshot, the PostgreSQL store's connections."""
    closes = capabilities_of(slot).closes
    if closes is not None:
        await closes.close()


def store_ready(store: StoreBackend) -> bool:
    """For ``/readyz``: attached, and then the memory store always is; the durable store
    while its log works; the PostgreSQL store while it reaches its database and its
    notification session is up."""
    if isinstance(store, StoreSlot) and store.target is None:
        return False
    availability = capabilities_of(store).availability
    return availability is None or availability.available
