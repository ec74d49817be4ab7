"""The durable store: the in-memory :class:`~cubequeue.storage.store.MemoryStore` behind the
store seam, with its journal drained into the log after every step.

:meth:`DurableStore.execute` answers at once when the step's lsn is already released (a
read that saw nothing unwritten), else with an awaitable that resolves once the log has
written (``no``, ``everysec``) or fsynced (``always``) that lsn. RESULT_BLOCKING wake-ups
wait for the ACK's records the same way. Queue ids are reserved ahead in the log and that
reservation is fsynced whatever the policy, so an id is never handed out twice, even after
a lost tail (Cube's ``getResultBlocking`` waits by numeric id).

Refusals: while the log is stopped, every mutating command gets 58030 naming the cause;
above ``--max-disk-bytes``, commands that grow state get 53100 naming the limit, while
ACK, CANCEL, RESULT and REMOVE keep working.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cubequeue.grammar.commands import Command, QueueResultBlocking, SysCachestore, SysClock
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.storage.clock import AdjustableClock
from cubequeue.storage.durable.errors import DiskFull, LogFailed
from cubequeue.storage.durable.files import Files
from cubequeue.storage.durable.lock import DirectoryLock
from cubequeue.storage.durable.log import DurableLog, LogStopped
from cubequeue.storage.durable.records import Record
from cubequeue.storage.durable.recovery import RecoveryReport
from cubequeue.storage.durable.snapshots import SnapshotInfo, disk_usage, prune, write_snapshot
from cubequeue.storage.interface import BlockingOutcome, StepResult, Table
from cubequeue.storage.record_kinds import CLOCK, ID_RESERVE
from cubequeue.storage.stats import StoreStats
from cubequeue.storage.steps import step_table
from cubequeue.storage.store import MemoryStore

__all__ = ["DurableSettings", "DurableStore"]

_log = logging.getLogger("cubequeue.durable")
_R = TypeVar("_R")
_OwnStep = Callable[[Any, str | None], StepResult]

#: ids reserved per ID_RESERVE record; renewed when half is used
RESERVE_IDS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class DurableSettings:
    data_dir: str
    max_disk_bytes: int | None = None
    snapshot_min_log_bytes: int = 64 * 1024 * 1024
    snapshot_interval_s: float = 600.0


class DurableStore:
    kind = "durable"

    def __init__(self, store: MemoryStore, log: DurableLog, files: Files, directory: uuid.UUID,
                 settings: DurableSettings, *, reserved: int, max_ts: int) -> None:
        self.store = store
        self.log = log
        self._files = files
        self._directory = directory
        self.settings = settings
        self._journal: list[Record] = []
        store.attach_journal(self._journal)
        #: log bytes since the last snapshot from which a step checks the snapshot
        #: threshold (at least --snapshot-min-log-bytes unless a disk cap is set)
        self._snapshot_check_bytes = (
            0 if settings.max_disk_bytes is not None else settings.snapshot_min_log_bytes)
        self._reserved = reserved
        #: the queue's next id, read twice per mutating step (one call, not a property's two)
        self._peek_id = store.id_counter()
        #: the next id at which a new block is reserved (half of the current one used)
        self._renew_at = reserved - RESERVE_IDS // 2
        self._reserve_lsn = 0
        self._durable_reserved = reserved
        self._max_ts = max_ts
        self._snapshot_task: asyncio.Task[SnapshotInfo] | None = None
        self.last_snapshot: SnapshotInfo | None = None
        self.snapshots_total = 0
        #: what the recovery that opened this store found (set by ``open_store``)
        self.recovery: RecoveryReport | None = None
        self._disk = disk_usage(files, settings.data_dir)
        self._changed = False
        self._repair_timer: asyncio.TimerHandle | None = None
        #: the data directory's lock, held until :meth:`close`
        self.lock: DirectoryLock | None = None
        loop = asyncio.get_running_loop()
        self._interval = loop.call_later(settings.snapshot_interval_s, self._on_interval)
        log.on_stopped = self.repair_soon
        self._reserve()
        #: the commands the durable store runs its own way, before or after the in-memory
        #: step: those it has a step for (``sys_cachestore``, ``sys_clock``)
        self._own: dict[type[Command], _OwnStep] = step_table(self, every=False)

    # -- the seam -----------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.store.now_ms()

    @property
    def has_deferred(self) -> bool:
        """The in-memory store's leftover bulk work (its releases write no records: the
        step that detached the items journaled them)."""
        return self.store.has_deferred

    def run_deferred(self, budget: int | None = None) -> bool:
        """A slice of bulk work; the few records it may leave (a prefix forgotten by the
        sweep) are written with it, not with the next step."""
        more = self.store.run_deferred(budget)
        if self._journal:
            self._drain()
        return more

    def execute(self, cmd: Command, process_id: str | None = None) -> StepResult:
        if cmd.mutating:
            if self.log.failed is not None or self.settings.max_disk_bytes is not None:
                self._admit(cmd)
            if self._peek_id() >= self._renew_at:
                self._reserve()
        own = self._own.get(type(cmd))
        if own is not None:
            return own(cmd, process_id)
        return self._reply(self.store.execute(cmd, process_id))

    def sys_cachestore(self, cmd: SysCachestore, process_id: str | None) -> StepResult:
        """PERSIST writes a snapshot, WIPE an empty one too, INFO adds the log's figures;
        the other actions are the in-memory store's."""
        action = cmd.action
        if action == "persist":
            return self._persist()
        if action == "wipe":
            return self.wipe()
        result = self.store.execute(cmd, process_id)
        if action == "info":
            assert isinstance(result, ResultSet), "INFO is one small frame"
            result = ResultSet(result.columns, [*result.rows, *self.info_rows()])
        return self._reply(result)

    def sys_clock(self, cmd: SysClock, process_id: str | None) -> StepResult:
        """The in-memory store moves its clock; its new reading is journaled (CLOCK)."""
        result = self.store.execute(cmd, process_id)
        clock = self.store.clock
        offset = clock.offset_ms if isinstance(clock, AdjustableClock) else 0
        self._journal.append((CLOCK, clock(), offset))
        return self._reply(result)

    def _cache_next_id(self) -> int:
        return self.store.next_cache_id

    def result_blocking(self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
                        process_id: str | None = None) -> BlockingOutcome:
        log = self.log

        def wake(rows: ResultSet) -> None:
            self._drain()  # the ACK's records, appended in the step that wakes us
            log.when_released(log.last_lsn, lambda error: None if error else callback(rows))

        outcome = self.store.result_blocking(cmd, wake, process_id)
        self._drain()
        lsn = log.last_lsn
        if lsn <= log.released_lsn or not isinstance(outcome, ResultSet):
            return outcome
        return self._after(lsn, outcome)

    def system_table(self, name: str) -> Table:
        return self._reply(self.store.system_table(name))

    def stats(self) -> StoreStats:
        return self.store.stats()

    # -- replies ------------------------------------------------------------------------

    def _admit(self, cmd: Command) -> None:
        cause = self.log.failed
        if cause is not None:
            raise LogFailed(f"durable log stopped: {cause}; mutating commands are refused "
                            "until a fresh snapshot and a new segment are written")
        limit = self.settings.max_disk_bytes
        if limit is not None and cmd.grows and self.disk_bytes > limit:
            raise DiskFull(f"disk use of {self.disk_bytes} bytes exceeds the limit of {limit} "
                           f"bytes (--max-disk-bytes={limit})")

    def _drain(self) -> None:
        journal = self._journal
        if journal:
            log = self.log
            log.extend(journal)
            journal.clear()
            self._changed = True
            if log.bytes_since_snapshot >= self._snapshot_check_bytes:
                self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        """The log since the last snapshot may have reached the threshold."""
        if self.log.bytes_since_snapshot >= self._snapshot_threshold():
            self.snapshot_soon()

    def _reply(self, result: _R) -> _R | Awaitable[_R]:
        log = self.log
        journal = self._journal
        if journal:  # _drain inlined: every write step runs this
            working = log.failed is None
            released = log.extend(journal)
            journal.clear()
            self._changed = True
            if working and log.failed is not None:  # this step's own write failed
                raise LogFailed(f"durable log stopped: {log.failed}; this command's effect "
                                "may be lost")
            if log.bytes_since_snapshot >= self._snapshot_check_bytes:
                self._maybe_snapshot()
            if self._peek_id() > self._durable_reserved:
                return self._after_reserved(result)
            if released:  # written by the loop just now: nothing older is unreleased
                return result
        elif self._peek_id() > self._durable_reserved:
            return self._after_reserved(result)
        lsn = log.last_lsn
        if lsn <= log.released_lsn or log.failed is not None:
            return result  # a stopped log: reads answer from memory (writes are refused)
        return self._after(lsn, result)

    async def _after(self, lsn: int, result: _R) -> _R:
        try:
            await self.log.wait(lsn)
        except LogStopped as err:
            raise LogFailed(f"durable log stopped: {err.cause}; this command's effect may "
                            "be lost") from None
        return result

    async def _after_reserved(self, result: _R) -> _R:
        """Ids beyond the fsynced reservation: wait for it (rare: half a block ahead)."""
        log = self.log
        if log.durable_lsn < self._reserve_lsn:
            try:
                await log.wait_durable(self._reserve_lsn)
            except OSError as err:
                cause = f"log fsync of {log.segment} failed: {err}"
                log.stop(cause)
                raise LogFailed(f"durable log stopped: {cause}; this command's effect may "
                                "be lost") from None
            log.durable_lsn = max(log.durable_lsn, self._reserve_lsn)
        self._durable_reserved = self._reserved
        return await self._after(self.log.last_lsn, result)

    def _reserve(self) -> None:
        self._reserved = self._peek_id() + RESERVE_IDS
        self._renew_at = self._reserved - RESERVE_IDS // 2
        self.log.append((ID_RESERVE, self._reserved), sync=True)
        self._reserve_lsn = self.log.last_lsn
        reserved, lsn = self._reserved, self._reserve_lsn

        def synced(error: BaseException | None) -> None:
            if error is None and self.log.durable_lsn >= lsn:
                self._durable_reserved = max(self._durable_reserved, reserved)

        self.log.when_released(lsn, synced)

    # -- snapshots ----------------------------------------------------------------------

    @property
    def disk_bytes(self) -> int:
        return sum(self._disk.values()) + self.log.bytes_since_snapshot

    def disk_by_kind(self) -> dict[str, int]:
        return dict(self._disk)

    def _snapshot_threshold(self) -> int:
        last = 0 if self.last_snapshot is None else self.last_snapshot.bytes
        threshold = max(self.settings.snapshot_min_log_bytes, last)
        limit = self.settings.max_disk_bytes
        if limit is not None and self.disk_bytes > limit * 9 // 10:
            return 0  # near the cap: compact now
        return threshold

    def _on_interval(self) -> None:
        loop = asyncio.get_running_loop()
        self._interval = loop.call_later(self.settings.snapshot_interval_s, self._on_interval)
        if self._changed:
            self.snapshot_soon()

    def snapshot_soon(self) -> asyncio.Task[SnapshotInfo]:
        task = self._snapshot_task
        if task is None or task.done():
            task = self._snapshot_task = asyncio.ensure_future(self._snapshot(rotate=True))
            task.add_done_callback(_log_failure)
        return task

    async def snapshot(self) -> SnapshotInfo:
        """A snapshot now (or the one running): SIGTERM, SYS CACHESTORE PERSIST."""
        return await asyncio.shield(self.snapshot_soon())

    async def _persist(self) -> ResultSet:
        await self.snapshot()
        return EMPTY

    async def _snapshot(self, *, rotate: bool) -> SnapshotInfo:
        self._drain()
        log = self.log
        lsn = log.last_lsn
        last = self.last_snapshot
        if last is not None and last.lsn == lsn and log.failed is None:
            return last  # nothing happened since: that snapshot is this one
        self._changed = False
        log.bytes_since_snapshot = 0
        if rotate:
            await log.rotate()
        cache_next = self._cache_next_id()
        info = await write_snapshot(
            log, self._files, self.settings.data_dir, self._directory, lsn,
            self.store.snapshot_slices(2000), self._reserved, cache_next,
            max(self._max_ts, self.store.now_ms()))
        self.last_snapshot = info
        self.snapshots_total += 1
        self._disk = await log.call(self._prune_and_measure)
        _log.info("durable: snapshot at lsn %d: %d objects, %d bytes in %.3f s",
                  info.lsn, info.objects, info.bytes, info.seconds)
        return info

    def _prune_and_measure(self) -> dict[str, int]:
        prune(self._files, self.settings.data_dir)
        return disk_usage(self._files, self.settings.data_dir)

    async def wipe(self) -> ResultSet:
        """SYS CACHESTORE WIPE: empty everything, write an empty snapshot, prune."""
        self.store.wipe()
        self._drain()
        wiped_at = self.log.last_lsn
        while (await self.snapshot()).lsn < wiped_at:
            pass  # that one had begun before the wipe: the next one holds it
        return EMPTY

    # -- failure and shutdown -----------------------------------------------------------

    def repair_soon(self) -> None:
        """After a failed write or sync (not under ``always``): a fresh snapshot, then a
        new segment; retried every second until the disk takes them."""
        if self._repair_timer is None and self.log.failed is not None:
            self._repair_timer = asyncio.get_running_loop().call_later(1.0, self._repair)

    def _repair(self) -> None:
        self._repair_timer = None
        task = asyncio.ensure_future(self.repair())
        task.add_done_callback(lambda t: None if t.cancelled() or t.exception() is None
                               else self.repair_soon())

    async def repair(self) -> None:
        log = self.log
        if log.failed is None:
            return
        lsn = log.last_lsn
        await self._snapshot(rotate=False)
        await log.reopen(lsn + 1)
        self._reserve()

    @property
    def available(self) -> bool:
        """False once the log has stopped (mutating steps get 58030): ``/readyz`` is 503."""
        return self.log.failed is None

    async def close(self) -> None:
        """Graceful stop (SIGTERM): a final snapshot, so the next start replays nothing."""
        self._interval.cancel()
        if self._repair_timer is not None:
            self._repair_timer.cancel()
        if self.log.failed is None:
            try:
                await self.snapshot()
            except OSError as err:
                _log.error("durable: the final snapshot failed: %s", err)
        await self.log.close()
        if self.lock is not None:
            self.lock.release()

    def info_rows(self) -> list[tuple[str, str, str | None]]:
        """Rows for SYS CACHESTORE INFO (name, value, description)."""
        log, stats, snap = self.log, self.log.stats, self.last_snapshot
        mean = stats.fsync_seconds / stats.fsyncs if stats.fsyncs else 0.0
        return [
            ("durable.data_dir", self.settings.data_dir, None),
            ("durable.fsync", log.policy, None),
            ("durable.log_state", "ok" if log.failed is None else f"stopped: {log.failed}", None),
            ("durable.last_lsn", str(log.last_lsn), None),
            ("durable.durable_lsn", str(log.durable_lsn), None),
            ("durable.log_bytes", str(self._disk["log"] + log.bytes_since_snapshot), None),
            ("durable.snapshot_bytes", str(self._disk["snapshot"]), None),
            ("durable.quarantine_bytes", str(self._disk["quarantine"]), None),
            ("durable.last_snapshot_lsn", "" if snap is None else str(snap.lsn), None),
            ("durable.last_snapshot_ms", "" if snap is None else str(snap.finished_ms), None),
            ("durable.fsync_mean_ms", f"{mean * 1000:.3f}", None),
            ("durable.fsync_max_ms", f"{stats.fsync_max_seconds * 1000:.3f}", None),
            ("durable.delayed_fsyncs", str(stats.delayed_fsyncs), None),
        ]


def _log_failure(task: asyncio.Task[SnapshotInfo]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("durable: snapshot failed: %s", task.exception())

