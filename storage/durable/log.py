"""The log on the event loop's side: lsns, group commit, release of replies, fsync policy.

A step appends its records (:meth:`DurableLog.append`); the first record of a loop
iteration schedules a flush with ``call_soon``, which runs after every protocol callback
of the iteration, so one frame holds all of them (group commit, as Redis writes its AOF
buffer in ``beforeSleep``). While the writer thread writes a frame, the next one fills.

Under ``no`` and ``everysec`` a step's records are instead written from the loop itself
when the writer thread has nothing queued for the segment (:meth:`DurableLog.extend`):
one ``write(2)`` into the page cache (microseconds), after which the reply is released at
once, with no future, task or thread round trip per step; that handoff was most of the
durable mode's CPU cost per QueryQueue cycle. Redis writes its AOF from the main thread
for the same reason, and leaves only the fsync to a background thread, as ``everysec``
does here. A frame that would not fit the segment, and everything under ``always``, take
the writer thread.

A reply waits for its step's lsn (:meth:`when_released`): until it is written to the OS
under ``no`` and ``everysec``, until it is ``fdatasync``-ed under ``always``. Reads wait
for the lsn they saw, so under ``always`` a read that saw an unsynced write is held too
(Redis's "acknowledged or observed" contract); a read that saw nothing unsynced is
released at once.

A failed write or sync is never retried (see :mod:`.segments`): under ``always`` the owner's
``on_fatal`` ends the process; otherwise the log stops, every reply still waiting gets the
error, and :attr:`failed` names the cause until :meth:`reopen` (after a fresh snapshot)
starts a new segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from cubequeue.storage.durable.files import Files, disk_error
from cubequeue.storage.durable.frames import encode_frame
from cubequeue.storage.durable.layout import SegmentTail
from cubequeue.storage.durable.records import Record
from cubequeue.storage.durable.segments import SegmentWriter

__all__ = ["DurableLog", "FsyncPolicy", "LogStats"]

FsyncPolicy = Literal["always", "everysec", "no"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("always", "everysec", "no")
#: an everysec fsync still running after this long is counted as delayed (Redis: 2 s)
DELAYED_FSYNC_S = 2.0

_log = logging.getLogger("cubequeue.durable")
_T = TypeVar("_T")
Released = Callable[[BaseException | None], None]


@dataclass(slots=True)
class LogStats:
    frames: int = 0
    bytes: int = 0
    records: int = 0
    fsyncs: int = 0
    fsync_seconds: float = 0.0
    fsync_max_seconds: float = 0.0
    delayed_fsyncs: int = 0


class _Stop:
    pass


class DurableLog:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        files: Files,
        data_dir: str,
        directory: uuid.UUID,
        *,
        policy: FsyncPolicy,
        segment_bytes: int,
        first_lsn: int,
        on_fatal: Callable[[str], None],
        resume: SegmentTail | None = None,
    ) -> None:
        self._loop = loop
        self._files = files
        self._dir = data_dir
        self._directory = directory
        self.policy = policy
        self._segment_bytes = segment_bytes
        self._on_fatal = on_fatal
        self._next_lsn = first_lsn
        self._buffer: list[Record] = []
        self._buffer_lsn = first_lsn
        #: the loop may write frames itself (not under ``always``, see the module doc)
        self._inline = policy != "always"
        self._always = not self._inline
        #: writer-thread jobs queued that replace or close the segment (rotate, reopen,
        #: close): while any is, the loop leaves the segment to the thread
        self._exclusive_jobs = 0
        self._force_sync = False
        self._flush_scheduled = False
        self._in_flight = False
        self._sync_in_flight = False
        self._sync_started = 0.0
        self._delayed_noted = False
        self.written_lsn = first_lsn - 1
        self.durable_lsn = first_lsn - 1
        self._waiters: deque[tuple[int, Released]] = deque()
        #: why the log stopped (a write or sync failed), or None while it works
        self.failed: str | None = None
        self.stats = LogStats()
        #: called once the log stopped (not under ``always``): the owner repairs it
        self.on_stopped: Callable[[], None] | None = None
        #: log bytes written since the last snapshot began (the size trigger reads it)
        self.bytes_since_snapshot = 0
        self._jobs: queue.SimpleQueue[Callable[[], object] | _Stop] = queue.SimpleQueue()
        self._writer = SegmentWriter(files, data_dir, directory, segment_bytes, first_lsn,
                                     zero_filled=not self._inline, resume=resume)
        self._thread = threading.Thread(target=self._run, name="cubequeue-log", daemon=True)
        self._thread.start()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._submit(self._writer.prepare_next_quietly)
        if policy == "everysec":
            self._timer = loop.call_later(1.0, self._tick)

    # -- the loop's side ----------------------------------------------------------------

    @property
    def last_lsn(self) -> int:
        """The lsn of the newest record (what a step "saw")."""
        return self._next_lsn - 1

    @property
    def released_lsn(self) -> int:
        return self.durable_lsn if self._always else self.written_lsn

    @property
    def segment(self) -> str:
        return self._writer.name

    def append(self, rec: Record, *, sync: bool = False) -> None:
        """Add one record to the open frame; ``sync``: fdatasync that frame whatever the
        policy (id reservations)."""
        if self.failed is not None:
            return  # the fresh snapshot that reopens the log captures this state
        self._buffer.append(rec)
        self._next_lsn += 1
        if sync:
            self._force_sync = True
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def extend(self, records: list[Record]) -> bool:
        """Add a step's records (see the module doc): written from the loop at once when
        the policy and the writer thread allow it, else into the open frame. True when
        they are written and released already (the reply need not wait)."""
        if self.failed is not None:
            return False  # the fresh snapshot that reopens the log captures this state
        count = len(records)
        if (self._inline and not self._buffer and not self._in_flight
                and not self._exclusive_jobs):
            # the loop's own write (the open frame is empty), inline: every write step
            # of --fsync no|everysec runs this, so it is one call deep
            first = self._next_lsn
            self._next_lsn = self._buffer_lsn = last = first + count
            frame = encode_frame(first, records)
            writer = self._writer
            try:
                written = writer.append_if_fits(frame)
            except OSError as err:
                self._count(frame, count)
                self._stop(f"log write to {writer.name} failed: {disk_error(err)}")
                return False
            if not written:  # a rotation: the thread's job (it fsyncs)
                self._send(frame, first, count, sync=False)
                return False
            stats = self.stats  # _count inlined
            size = len(frame)
            stats.frames += 1
            stats.records += count
            stats.bytes += size
            self.bytes_since_snapshot += size
            self.written_lsn = last - 1
            if self._waiters:
                self._release()
            return True
        self._buffer.extend(records)
        self._next_lsn += count
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return False

    def _count(self, frame: bytes, records: int) -> None:
        stats = self.stats
        stats.frames += 1
        stats.records += records
        stats.bytes += len(frame)
        self.bytes_since_snapshot += len(frame)

    def when_released(self, lsn: int, callback: Released) -> None:
        """Call ``callback(None)`` once ``lsn`` is released, or ``callback(error)``."""
        if lsn <= self.released_lsn:
            callback(None)
        elif self.failed is not None:
            callback(LogStopped(self.failed))
        else:
            self._waiters.append((lsn, callback))

    def wait(self, lsn: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()

        def done(error: BaseException | None) -> None:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        self.when_released(lsn, done)
        return future

    def wait_durable(self, lsn: int) -> asyncio.Future[None]:
        """Resolved once ``lsn`` is fsynced, whatever the policy (snapshots, shutdown)."""
        self._force_sync = True
        self._flush()
        return self.call(self._writer.sync)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._in_flight or not self._buffer or self.failed is not None:
            return
        records, first = self._buffer, self._buffer_lsn
        sync = self.policy == "always" or self._force_sync
        self._force_sync = False
        self._send(encode_frame(first, records), first, len(records), sync=sync)

    def _send(self, frame: bytes, first: int, count: int, *, sync: bool) -> None:
        """Hand the open frame, encoded, to the writer thread."""
        self._buffer, self._buffer_lsn = [], self._next_lsn
        last = first + count - 1
        self._in_flight = True
        self._count(frame, count)
        writer = self._writer

        def job() -> None:
            error: BaseException | None = None
            took = 0.0
            try:
                rotated = writer.write(frame, first)
                if sync:
                    started = time.perf_counter()
                    writer.sync()
                    took = time.perf_counter() - started
                if rotated:
                    writer.prepare_next_quietly()
            except OSError as err:
                error = err
            self._loop.call_soon_threadsafe(self._written, last, sync, took, error)

        self._submit(job)

    def _written(self, last: int, synced: bool, took: float, error: BaseException | None) -> None:
        self._in_flight = False
        if error is not None:
            self._stop(f"log write to {self._writer.name} failed: {_describe(error)}")
            return
        self.written_lsn = last
        if synced:
            self._note_fsync(took)
            self.durable_lsn = last
        self._release()
        if self._buffer:
            self._flush()

    def _note_fsync(self, took: float) -> None:
        stats = self.stats
        stats.fsyncs += 1
        stats.fsync_seconds += took
        stats.fsync_max_seconds = max(stats.fsync_max_seconds, took)

    def _release(self) -> None:
        released = self.released_lsn
        waiters = self._waiters
        while waiters and waiters[0][0] <= released:
            _, callback = waiters.popleft()
            callback(None)

    def _tick(self) -> None:
        """everysec: fdatasync what was written since the last one, off the loop."""
        self._timer = self._loop.call_later(1.0, self._tick)
        if self.failed is not None:
            return
        if self._sync_in_flight:
            if time.monotonic() - self._sync_started > DELAYED_FSYNC_S:
                self.stats.delayed_fsyncs += 1
                if not self._delayed_noted:
                    self._delayed_noted = True
                    _log.warning("durable: an fsync is taking too long (disk is busy?)")
            return
        if self.durable_lsn >= self.written_lsn:
            return
        target = self.written_lsn
        self._sync_in_flight = True
        self._sync_started = time.monotonic()
        writer = self._writer

        def job() -> None:
            error: BaseException | None = None
            started = time.perf_counter()
            try:
                writer.sync()
            except OSError as err:
                error = err
            self._loop.call_soon_threadsafe(self._synced, target, time.perf_counter() - started, error)

        self._submit(job)

    def _synced(self, target: int, took: float, error: BaseException | None) -> None:
        self._sync_in_flight = False
        self._delayed_noted = False
        if error is not None:
            self._stop(f"log fsync of {self._writer.name} failed: {_describe(error)}")
            return
        self._note_fsync(took)
        self.durable_lsn = max(self.durable_lsn, target)
        self._release()

    def stop(self, cause: str) -> None:
        """Stop the log after a failure seen outside the write path (see :meth:`_stop`)."""
        self._stop(cause)

    def _stop(self, cause: str) -> None:
        if self.failed is not None:
            return
        self.failed = cause
        _log.error("durable: %s; the segment is abandoned", cause)
        if self.policy == "always":  # the process ends; nothing waiting is released
            self._on_fatal(f"{cause} under --fsync always: cannot keep the acknowledged state")
        self._buffer = []
        self._buffer_lsn = self._next_lsn
        waiters, self._waiters = self._waiters, deque()
        for _, callback in waiters:
            callback(LogStopped(cause))
        if self.on_stopped is not None and self.policy != "always":
            self.on_stopped()

    def reopen(self, first_lsn: int) -> asyncio.Future[None]:
        """A new segment at ``first_lsn`` after a failure (the caller snapshotted first);
        resolved once it is durable, then the log accepts records again."""

        def job() -> None:
            old = self._writer
            with contextlib.suppress(OSError):
                old.close()
            self._writer = SegmentWriter(self._files, self._dir, self._directory,
                                         self._segment_bytes, first_lsn,
                                         zero_filled=not self._inline)

        future = self.call(job, exclusive=True)

        def reopened(f: asyncio.Future[None]) -> None:
            if not f.cancelled() and f.exception() is None:
                self._next_lsn = self._buffer_lsn = first_lsn
                self.written_lsn = self.durable_lsn = first_lsn - 1
                self.failed = None
                _log.warning("durable: the log accepts writes again in %s", self._writer.name)

        future.add_done_callback(reopened)
        return future

    def rotate(self) -> asyncio.Future[None]:
        """Flush, then start a new segment at the next lsn (a snapshot's boundary)."""
        self._flush()
        first = self._next_lsn
        writer = self._writer
        rotated = self.call(lambda: writer.rotate(first), exclusive=True)
        # the segment after it is prepared in a job of its own, not inside the exclusive
        # one, so the loop may already write into the new segment meanwhile
        self._submit(writer.prepare_next_quietly)
        return rotated

    def call(self, fn: Callable[[], _T], *, exclusive: bool = False) -> asyncio.Future[_T]:
        """Run ``fn`` on the writer thread after everything submitted before it;
        ``exclusive``: it replaces or closes the segment, so the loop writes no frame
        itself until it is done."""
        future: asyncio.Future[_T] = self._loop.create_future()
        if self._closed:
            future.set_exception(LogStopped("the log is closed"))
            return future
        if exclusive:
            self._exclusive_jobs += 1

        def settle(ok: bool, value: object) -> None:
            if exclusive:
                self._exclusive_jobs -= 1
            if future.done():
                return
            if ok:
                future.set_result(value)  # type: ignore[arg-type]  # fn's own result
            else:
                assert isinstance(value, BaseException)
                future.set_exception(value)

        def job() -> None:
            try:
                value: object = fn()
                ok = True
            except BaseException as err:  # handed to the loop, not swallowed
                value, ok = err, False
            self._loop.call_soon_threadsafe(settle, ok, value)

        self._submit(job)
        return future

    async def close(self) -> None:
        """Flush and sync everything, then stop the thread."""
        if self._timer is not None:
            self._timer.cancel()
        while self._in_flight or self._buffer:
            self._flush()
            await asyncio.sleep(0)
        if self.failed is None:
            await self.call(self._writer.sync)
        await self.call(self._writer.close, exclusive=True)
        self._closed = True
        self._jobs.put(_Stop())
        await asyncio.to_thread(self._thread.join)

    # -- the writer thread --------------------------------------------------------------

    def _submit(self, job: Callable[[], object]) -> None:
        self._jobs.put(job)

    def _run(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if isinstance(job, _Stop):
                return
            try:
                job()
            except Exception:  # a job reports its own errors; this is our bug
                _log.exception("durable: writer job failed")


def _describe(error: BaseException) -> str:
    return disk_error(error) if isinstance(error, OSError) else str(error)


class LogStopped(OSError):
    """The log stopped after a failed write or sync; carries the cause."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause if cause else os.strerror(5))
        self.cause = cause
