"""``open_store``: lock the data directory, recover it, and hand back a durable store.

Recovery reads files, so it runs in a worker thread (:func:`asyncio.to_thread`) while the
server answers PostgreSQL clients with 57P03 and ``/readyz`` with 503; the listeners start
accepting commands only once this returns. Meanwhile its progress (:mod:`.progress`)
goes to the given :class:`ProgressWatch` (the console reads it) and to the log once a
second.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import time
from collections.abc import Callable

from cubequeue.storage.durable.files import Files, OsFiles, disk_error
from cubequeue.storage.durable.lock import DirectoryLock
from cubequeue.storage.durable.log import DurableLog, FsyncPolicy
from cubequeue.storage.durable.progress import ProgressWatch, RecoveryProgress
from cubequeue.storage.durable.recovery import (
    OnRecord,
    Policy,
    Recovered,
    RecoveryReport,
    recover,
)
from cubequeue.storage.durable.snapshots import prune
from cubequeue.storage.durable.store import DurableSettings, DurableStore
from cubequeue.storage.store import MemoryStore

__all__ = ["open_store"]

_log = logging.getLogger("cubequeue.durable")

#: the progress line's period while recovering, in seconds
PROGRESS_LOG_S = 1.0


async def _log_progress(watch: ProgressWatch) -> None:
    while True:
        await asyncio.sleep(PROGRESS_LOG_S)
        latest = watch.latest
        if latest is not None and latest.phase != "done":
            _log.info("durable: %s", latest.line())


async def open_store(
    store: MemoryStore,
    *,
    data_dir: str,
    fsync: FsyncPolicy = "everysec",
    recovery: Policy = "salvage",
    max_disk_bytes: int | None = None,
    segment_bytes: int = 64 * 1024 * 1024,
    snapshot_min_log_bytes: int = 64 * 1024 * 1024,
    snapshot_interval_s: float = 600.0,
    wall_ms: Callable[[], int],
    on_fatal: Callable[[str], None],
    files: Files | None = None,
    progress: ProgressWatch | None = None,
    on_record: OnRecord | None = None,
) -> tuple[DurableStore, RecoveryReport]:
    """``store`` (empty, fresh) filled from ``data_dir`` and wrapped; raises
    :class:`~.errors.DataDirLocked` or :class:`~.recovery.RecoveryRefused` with one line.
    ``progress`` receives the recovery's reports; ``on_record`` is :func:`recover`'s."""
    watch = progress if progress is not None else ProgressWatch()
    started = time.perf_counter()
    ticker = asyncio.get_running_loop().create_task(_log_progress(watch))
    try:
        return await _open(store, data_dir, fsync, recovery, max_disk_bytes, segment_bytes,
                           snapshot_min_log_bytes, snapshot_interval_s, wall_ms, on_fatal,
                           files, watch, on_record, started)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        # the caller prints strerror after the directory: make it say what to change
        raise OSError(errno.ENOSPC, disk_error(err)) from err
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker


def _recover_and_prune(disk: Files, data_dir: str, recovery: Policy, store: MemoryStore,
                       wall_ms: Callable[[], int], watch: ProgressWatch,
                       on_record: OnRecord | None) -> Recovered:
    """Recovery, then the files it no longer needs: segments wholly covered by the
    snapshots kept (a crash loop never reaches the snapshot that would prune them)."""
    recovered = recover(disk, data_dir, recovery, store.limits, wall_ms,
                        on_progress=watch.update, on_record=on_record)
    prune(disk, data_dir)
    return recovered


async def _open(store: MemoryStore, data_dir: str, fsync: FsyncPolicy, recovery: Policy,
                max_disk_bytes: int | None, segment_bytes: int, snapshot_min_log_bytes: int,
                snapshot_interval_s: float, wall_ms: Callable[[], int],
                on_fatal: Callable[[str], None], files: Files | None, watch: ProgressWatch,
                on_record: OnRecord | None, started: float,
                ) -> tuple[DurableStore, RecoveryReport]:
    lock = DirectoryLock(data_dir) if files is None else None
    disk: Files = OsFiles() if files is None else files
    # Recovery allocates an object graph the size of the state and frees nothing, so the
    # cyclic collector's full passes over it are pure cost (a third of the time at 10^6
    # items); it is paused meanwhile, and what was loaded is frozen out of later passes.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            recovered = await asyncio.to_thread(
                _recover_and_prune, disk, data_dir, recovery, store, wall_ms, watch, on_record)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        image = recovered.image
        last = watch.latest
        if last is not None:  # the indexes are built on the loop: say so meanwhile
            watch.update(RecoveryProgress("restore", last.records, last.bytes_total,
                                          last.bytes_total, time.perf_counter() - started))
        await asyncio.sleep(0)  # let a console poll see that before the loop is busy
        store.restore(image.items.values(), image.results.values(), image.cache.values(),
                      image.next_id, image.prefixes.values())
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    clock = store.clock
    if image.clock_offset and hasattr(clock, "advance"):
        clock.advance(max(0, image.clock_offset - getattr(clock, "offset_ms", 0)))
    try:
        log = DurableLog(asyncio.get_running_loop(), disk, data_dir, recovered.directory,
                         policy=fsync, segment_bytes=segment_bytes,
                         first_lsn=recovered.last_lsn + 1, on_fatal=on_fatal,
                         resume=recovered.tail)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    settings = DurableSettings(data_dir=data_dir, max_disk_bytes=max_disk_bytes,
                               snapshot_min_log_bytes=snapshot_min_log_bytes,
                               snapshot_interval_s=snapshot_interval_s)
    durable = DurableStore(store, log, disk, recovered.directory, settings,
                           reserved=image.next_id, max_ts=image.max_ts)
    durable.lock = lock
    if recovered.log_bytes >= snapshot_min_log_bytes:
        # restarts that each wrote less than the threshold (a crash loop) would otherwise
        # keep the log growing: what was replayed counts towards the next snapshot
        durable.snapshot_soon()
    report = recovered.report
    durable.recovery = report
    records = watch.latest.records if watch.latest is not None else report.records
    total = watch.latest.bytes_total if watch.latest is not None else 0
    watch.update(RecoveryProgress("done", records, total, total, time.perf_counter() - started))
    _log.info("durable: recovered %s in %.3f s: snapshot lsn %d, %d segments, %d records, "
              "%d expired, %d torn tails, %d corrupt frames, %d quarantined records; "
              "items=%d results=%d cache=%d, next id %d", data_dir, report.seconds,
              report.snapshot_lsn, report.segments, report.records, report.expired,
              report.torn_tails, report.corrupt_frames, report.quarantined_records,
              len(image.items), len(image.results), len(image.cache), image.next_id)
    return durable, report
