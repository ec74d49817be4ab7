"""Recovery: the newest valid snapshot, then the later log, into an :class:`Image`.

Order (etcd's WAL repair and Redis's AOF loading rules, with per-frame checksums):

1. The newest snapshot whose frames and trailer all validate. One that does not is moved to
   ``quarantine/`` and the previous one is used, so a bad snapshot is never loaded twice.
2. Every segment holding lsns after the snapshot's, checking lsn continuity.
3. A **torn tail** (bad bytes with no valid frame after them anywhere: a write cut by a
   crash) is copied to ``quarantine/`` and the segment truncated at the last good frame.
4. **Corruption elsewhere** (bad bytes with valid frames after them, an lsn gap, a foreign
   or unreadable segment) follows the policy: ``salvage`` skips to the next valid frame and
   quarantines the skipped bytes; ``strict`` refuses to start; ``point-in-time`` stops at
   the first corruption and quarantines everything after it.
5. Every record is validated with the live commands' limits; a bad one is written to
   ``quarantine/records.jsonl`` with its reason and skipped, never applied.
6. Expiry is enforced with ``now = max(wall clock, newest timestamp in the data)``, so a
   clock that went back cannot resurrect what had expired.

Nothing here raises on bad data except :class:`RecoveryRefused` under ``strict``. What is
set aside goes through :class:`~cubequeue.storage.durable.quarantine.Quarantine`.

Progress (:mod:`.progress`) goes to an optional callback, so the server can show how far
it is while it answers 57P03; ``on_record`` is called with each record's lsn before it is
applied (tests slow the replay down with it).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import layout
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.files import Files
from cubequeue.storage.durable.image import Image
from cubequeue.storage.durable.layout import SegmentTail
from cubequeue.storage.durable.progress import REPORT_BYTES, Phase, RecoveryProgress
from cubequeue.storage.durable.quarantine import QUARANTINE_MAX_BYTES, Quarantine
from cubequeue.storage.durable.records import InvalidRecord, Record
from cubequeue.storage.limits import Limits

__all__ = [
    "OnProgress",
    "OnRecord",
    "Policy",
    "Recovered",
    "RecoveryRefused",
    "RecoveryReport",
    "SegmentTail",
    "recover",
]

Policy = Literal["salvage", "strict", "point-in-time"]
POLICIES: tuple[Policy, ...] = ("salvage", "strict", "point-in-time")
DIRECTORY_ID = "DIRECTORY_ID"

_log = logging.getLogger("cubequeue.durable")

OnProgress = Callable[[RecoveryProgress], None]
#: a segment header's verdict: read and continued, read only, set aside, or removed
_Header = Literal["good", "damaged", "foreign", "removed"]
OnRecord = Callable[[int], None]


class RecoveryRefused(Exception):
    """``--recovery strict`` found corruption; the one line says where."""


@dataclass(slots=True)
class RecoveryReport:
    snapshot_lsn: int = 0
    snapshot_objects: int = 0
    segments: int = 0
    frames: int = 0
    records: int = 0
    expired: int = 0
    torn_tails: int = 0
    corrupt_frames: int = 0
    quarantined_records: int = 0
    quarantined_files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    clock_behind_ms: int = 0


@dataclass(frozen=True, slots=True)
class Recovered:
    image: Image
    #: the last lsn the state holds: the next segment starts after it
    last_lsn: int
    directory: uuid.UUID
    report: RecoveryReport
    #: the segment the log continues, when it ended cleanly at ``last_lsn``
    tail: SegmentTail | None = None
    #: log bytes after the snapshot: counted towards the next snapshot
    log_bytes: int = 0


_ZEROS = bytes(1 << 20)
_ZERO_BLOCKS = ((1 << 20, _ZEROS), (4096, bytes(4096)))


def _used_bytes(data: bytes) -> int:
    """``len(data)`` without its zero-filled tail, rounded up to the 8-byte frame
    alignment (a frame's padding is its own). Whole zero blocks are compared from the end
    first: ``bytes.rstrip`` alone tests one byte at a time, 0.5 s over an empty segment."""
    end = len(data)
    for size, zeros in _ZERO_BLOCKS:
        while end >= size and data[end - size:end] == zeros:
            end -= size
    used = len(data[max(0, end - 4096):end].rstrip(b"\0")) + max(0, end - 4096)
    return min(len(data), (used + 7) & ~7)


def _directory_id(files: Files, data_dir: str) -> uuid.UUID:
    path = f"{data_dir}/{DIRECTORY_ID}"
    if files.exists(path):
        return uuid.UUID(files.read(path).decode("ascii").strip())
    ident = uuid.uuid4()
    tmp = path + ".tmp"
    if files.exists(tmp):
        files.unlink(tmp)
    handle = files.open(tmp, create=True)
    try:
        files.pwrite(handle, f"{ident}\n".encode("ascii"), 0)
        files.datasync(handle)
    finally:
        files.close(handle)
    files.rename(tmp, path)
    files.sync_dir(data_dir)
    return ident


class _Replay:
    """One recovery run's state (kept apart so each step reads as a method)."""

    def __init__(self, files: Files, data_dir: str, policy: Policy, limits: Limits,
                 directory: uuid.UUID, on_progress: OnProgress | None = None,
                 on_record: OnRecord | None = None,
                 quarantine_max_bytes: int = QUARANTINE_MAX_BYTES) -> None:
        self.files = files
        self.dir = data_dir
        self.policy = policy
        self.limits = limits
        self.directory = directory
        self.report = RecoveryReport()
        self.quarantine = Quarantine(files, data_dir, quarantine_max_bytes)
        self.image = Image()
        self.on_progress = on_progress
        self.on_record = on_record
        self.started = time.perf_counter()
        #: progress by bytes: what was read before the current file, and the total
        self.bytes_base = 0
        self.bytes_total = 0
        self.replayed = 0
        self._reported_at = 0
        #: where the last segment ended cleanly: the log continues there
        self.tail: SegmentTail | None = None
        #: log bytes replayed after the snapshot (the next snapshot's size trigger)
        self.log_bytes = 0

    def progress(self, phase: Phase, offset: int = 0) -> None:
        """Report ``offset`` bytes into the current file (see :mod:`.progress`)."""
        self._reported_at = self.bytes_base + offset
        if self.on_progress is not None:
            self.on_progress(RecoveryProgress(
                phase, self.replayed, self.bytes_base + offset, self.bytes_total,
                time.perf_counter() - self.started))

    def _maybe_progress(self, phase: Phase, offset: int) -> None:
        if self.bytes_base + offset - self._reported_at >= REPORT_BYTES:
            self.progress(phase, offset)

    def file_read(self, data: bytes, counted: int) -> int:
        """``data`` was read; its zero-filled tail leaves the total. Its counted size."""
        used = _used_bytes(data)
        self.bytes_total -= counted - used
        return used

    def file_done(self, used: int) -> None:
        self.bytes_base += used

    def corrupt(self, where: str, reason: str) -> None:
        self.report.corrupt_frames += 1
        if self.policy == "strict":
            raise RecoveryRefused(f"--recovery strict: {where}: {reason}; refusing to start")
        _log.error("durable: %s: %s (--recovery %s)", where, reason, self.policy)

    def apply_frame(self, source: str, frame: fr.Frame, after: int, into: Image) -> None:
        try:
            values = fr.decode_payload(frame)
        except ValueError as err:
            self.quarantine.record(source, frame.first_lsn, None, f"undecodable frame: {err}")
            return
        hook, first = self.on_record, frame.first_lsn
        self.replayed += len(values)
        validate, apply, limits = r.validate, into.apply, self.limits
        start = max(0, after + 1 - first)  # lsns after ``after``
        if hook is None and start == 0 and r.plain_item_puts(values, limits):
            into.load_item_puts(values)  # type: ignore[arg-type]  # validated: tuples
            self.report.records += len(values)
            return
        applied = 0
        for i in range(start, len(values)):
            raw = values[i]
            if hook is not None:
                hook(first + i)
            try:
                rec = validate(raw, limits)
            except InvalidRecord as err:
                self.quarantine.record(source, first + i, raw, str(err))
                continue
            apply(rec)
            applied += 1
        self.report.records += applied

    # -- snapshots ----------------------------------------------------------------------

    def load_snapshot(self, name: str, lsn: int) -> Image | None:
        """The snapshot's image, or None (the file moved to quarantine) if it is bad."""
        path = f"{self.dir}/{name}"
        data = self.files.read(path)
        used = self.file_read(data, self.files.size(path))
        damaged: layout.DamagedHeader | None = None
        try:
            try:
                layout.decode_header(data, layout.SNAP_MAGIC, self.directory)
            except layout.DamagedHeader as err:
                damaged = err  # the frames and the trailer (which names the lsn) decide
            image, objects = self._snapshot_frames(name, data, lsn)
        except ValueError as err:
            self.file_done(used)
            _log.error("durable: snapshot %s is unusable (%s); moved to quarantine/", name, err)
            self.quarantine.move(path, name, str(err))
            self.report.corrupt_frames += 1
            if self.policy == "strict":
                raise RecoveryRefused(
                    f"--recovery strict: snapshot {name}: {err}; refusing to start") from None
            return None
        if damaged is not None:  # a whole snapshot with a damaged header: only it is lost
            self.corrupt(name, f"damaged snapshot header ({damaged}); its frames and trailer "
                               "are whole")
            self.quarantine.bytes(name, 0, data[: layout.HEADER_BYTES],
                                  f"snapshot header: {damaged}")
            self._rewrite_header(name, layout.SNAP_MAGIC, lsn)
        self.report.snapshot_lsn = lsn
        self.report.snapshot_objects = objects
        self.file_done(used)
        self.progress("snapshot")
        return image

    def _snapshot_frames(self, name: str, data: bytes, lsn: int) -> tuple[Image, int]:
        image = Image()
        expected = 1
        trailer: Record | None = None
        hook = self.on_record
        for frame in fr.frames(data, layout.HEADER_BYTES, len(data)):
            if isinstance(frame, fr.BadFrame):
                raise ValueError(f"bad frame at offset {frame.offset}: {frame.reason}")
            if frame.first_lsn != expected or trailer is not None:
                raise ValueError(f"frame at offset {frame.offset} is out of sequence")
            expected = frame.last_lsn + 1
            values = fr.decode_payload(frame)
            self.replayed += len(values)
            if hook is None and r.plain_item_puts(values, self.limits):
                image.load_item_puts(values)  # type: ignore[arg-type]  # validated: tuples
                self._maybe_progress("snapshot", frame.end)
                continue
            for i, raw in enumerate(values):
                if hook is not None:
                    hook(frame.first_lsn + i)
                try:
                    rec = r.validate(raw, self.limits)
                except InvalidRecord as err:
                    self.quarantine.record(name, frame.first_lsn + i, raw, str(err))
                    continue
                if rec[0] == r.TRAILER:
                    trailer = rec
                else:
                    image.apply(rec)
            self._maybe_progress("snapshot", frame.end)
        if trailer is None:
            raise ValueError("no trailer: the snapshot was never finished")
        if trailer[1] != lsn:
            raise ValueError(f"its trailer says lsn {trailer[1]}, its name {lsn}")
        image.reserved = max(image.reserved, int(trailer[3]))  # type: ignore[call-overload]  # validated int
        image.max_ts = max(image.max_ts, int(trailer[5]))  # type: ignore[call-overload]  # validated int
        return image, int(trailer[2])  # type: ignore[call-overload]  # validated int

    # -- segments -----------------------------------------------------------------------

    def replay_segments(self, segments: list[tuple[str, int]], after: int) -> int:
        """Apply every record after lsn ``after``; the last lsn applied (or ``after``)."""
        # a segment whose successor starts at or before after + 1 holds nothing newer
        live = [s for i, s in enumerate(segments)
                if i + 1 >= len(segments) or segments[i + 1][1] > after + 1]
        self.bytes_total = self.bytes_base + sum(
            self.files.size(f"{self.dir}/{name}") for name, _ in live)
        self.progress("log")
        expected = after + 1
        stop = False
        for index, (name, first) in enumerate(live):
            if stop:
                self._drop_segment(name, "after a point-in-time stop")
                continue
            later = live[index + 1:]
            expected, stop = self._replay_segment(name, first, after, expected, later)
            self.report.segments += 1
        return expected - 1

    def _replay_segment(self, name: str, first: int, after: int, expected: int,
                        later: list[tuple[str, int]]) -> tuple[int, bool]:
        path = f"{self.dir}/{name}"
        data = self.files.read(path)
        used = self.file_read(data, self.files.size(path))
        self.tail = None
        self.log_bytes += max(0, used - layout.HEADER_BYTES)
        try:
            return self._replay_frames(name, data, used, first, after, expected, later)
        finally:
            self.file_done(used)
            self.progress("log")

    def _check_header(self, name: str, data: bytes, first: int,
                      later: list[tuple[str, int]]) -> _Header:
        """Whether the segment's frames are read, and whether the log may continue it."""
        try:
            layout.decode_header(data, layout.LOG_MAGIC, self.directory)
            return "good"
        except layout.DamagedHeader as err:
            at = fr.read_frame(data, layout.HEADER_BYTES, len(data))
            if not any(data[: layout.HEADER_BYTES]) and not later and at is None:
                self._cut(name, data, 0, "a segment whose header was never written")
                return "removed"
            # The header holds no records: its lsn is the file name's, its directory
            # DIRECTORY_ID's. Only its bytes are set aside; each frame after it is read
            # by its own checksum and lsn continuity, as in any segment.
            self.corrupt(name, f"damaged segment header ({err}); reading its frames by "
                               "their own checksums")
            self.quarantine.bytes(name, 0, data[: layout.HEADER_BYTES], f"segment header: {err}")
            if at is None or (isinstance(at, fr.Frame) and at.first_lsn == first):
                self._rewrite_header(name, layout.LOG_MAGIC, first)  # derived again
                return "good"
            return "damaged"
        except ValueError as err:  # a valid header, but not ours: another directory
            self.corrupt(name, f"unusable segment: {err}")
            self.quarantine.bytes(name, 0, data[: _used_bytes(data)], str(err))  # once
            return "foreign"

    def _rewrite_header(self, name: str, magic: bytes, lsn: int) -> None:
        header = layout.FileHeader(magic, self.directory, lsn, time.time_ns() // 1_000_000)
        handle = self.files.open(f"{self.dir}/{name}", create=False)
        try:
            self.files.pwrite(handle, layout.encode_header(header), 0)
            self.files.datasync(handle)
        finally:
            self.files.close(handle)
        _log.warning("durable: the header of %s was rewritten from its name and "
                     "DIRECTORY_ID", name)

    def _replay_frames(self, name: str, data: bytes, used: int, first: int, after: int,
                       expected: int, later: list[tuple[str, int]]) -> tuple[int, bool]:
        header = self._check_header(name, data, first, later)
        if header == "removed":
            return expected, False
        if header == "foreign":
            return expected, self.policy == "point-in-time"
        readable = header == "good"
        if first > expected:
            self.corrupt(name, f"lsns {expected}..{first - 1} are missing")
            if self.policy == "point-in-time":
                return expected, True
            expected = first
        offset = layout.HEADER_BYTES
        end = len(data)
        #: the lsn after this segment's last frame (where it would continue)
        continues = first
        while True:
            found = fr.read_frame(data, offset, end)
            if found is None:
                if used > offset and not later:
                    # bytes past the end of the written data (a write the disk kept out
                    # of order): never read, but the log is about to continue here
                    self.report.torn_tails += 1
                    self._cut(name, data, offset, "bytes after the end of the written data")
                self._ended(readable, name, first, offset, continues)
                return expected, False
            if isinstance(found, fr.Frame):
                started = expected > after + 1
                if found.last_lsn > after and (
                    found.first_lsn > expected or (started and found.first_lsn < expected)):
                    self.corrupt(name, f"frame at offset {offset} has lsn {found.first_lsn}, "
                                       f"expected {expected}")
                    if self.policy == "point-in-time":
                        self._cut(name, data, offset, "after an lsn gap")
                        self._ended(readable, name, first, offset, continues)
                        return expected, True
                self.report.frames += 1
                self.apply_frame(name, found, after, self.image)
                expected = max(expected, found.last_lsn + 1)
                continues = found.last_lsn + 1
                offset = found.end
                self._maybe_progress("log", offset)
                continue
            resume = fr.find_next_frame(data, offset, end, expected)
            if resume is None and not self._later_has_frames(later):
                self.report.torn_tails += 1
                _log.warning("durable: torn tail in %s at offset %d (%s): copied to "
                             "quarantine/ and cut off", name, offset, found.reason)
                self._cut(name, data, offset, f"torn tail: {found.reason}")
                self._ended(readable, name, first, offset, continues)
                return expected, False
            self.corrupt(name, f"offset {offset}: {found.reason}")
            if self.policy == "point-in-time":
                self._cut(name, data, offset, f"point-in-time stop: {found.reason}")
                self._ended(readable, name, first, offset, continues)
                return expected, True
            stop_at = resume.offset if resume is not None else end
            self.quarantine.bytes(name, offset, data[offset:stop_at], found.reason)
            if resume is None:
                return expected, False
            offset = resume.offset

    def _ended(self, readable: bool, name: str, first: int, offset: int, continues: int) -> None:
        """The segment's written data ends at ``offset``: the log may continue there."""
        if readable:
            self.tail = SegmentTail(name, first, offset, continues)

    def _later_has_frames(self, later: list[tuple[str, int]]) -> bool:
        for name, _ in later:
            data = self.files.read(f"{self.dir}/{name}")
            if isinstance(fr.read_frame(data, layout.HEADER_BYTES, len(data)), fr.Frame):
                return True
        return False

    def _cut(self, name: str, data: bytes, offset: int, reason: str) -> None:
        """Set aside what follows ``offset`` and zero it in place (the preallocated
        space stays, so the segment can be continued); a segment with no whole header
        is removed."""
        written = max(offset, _used_bytes(data))
        self.quarantine.bytes(name, offset, data[offset:written], reason)
        path = f"{self.dir}/{name}"
        if offset < layout.HEADER_BYTES:
            self.files.unlink(path)
            self.files.sync_dir(self.dir)
            return
        handle = self.files.open(path, create=False)
        try:
            position = offset
            while position < written:
                size = min(len(_ZEROS), written - position)
                self.files.pwrite(handle, _ZEROS[:size], position)
                position += size
            self.files.datasync(handle)
        finally:
            self.files.close(handle)

    def _drop_segment(self, name: str, reason: str) -> None:
        self.quarantine.move(f"{self.dir}/{name}", name, reason)


def recover(files: Files, data_dir: str, policy: Policy, limits: Limits,
            wall_ms: Callable[[], int], *, on_progress: OnProgress | None = None,
            on_record: OnRecord | None = None,
            quarantine_max_bytes: int = QUARANTINE_MAX_BYTES) -> Recovered:
    """Read ``data_dir`` back (see the module docstring); the caller holds its lock."""
    started = time.perf_counter()
    files.makedirs(data_dir)
    directory = _directory_id(files, data_dir)
    replay = _Replay(files, data_dir, policy, limits, directory, on_progress, on_record,
                     quarantine_max_bytes)
    snaps: list[tuple[str, int]] = []
    segments: list[tuple[str, int]] = []
    for name in files.listdir(data_dir):
        if name.endswith(".tmp"):
            files.unlink(f"{data_dir}/{name}")  # an unfinished snapshot or segment
            continue
        parsed = layout.parse_name(name)
        if parsed is not None:
            (snaps if parsed[0] == "snap" else segments).append((name, parsed[1]))
    snaps.sort(key=lambda s: s[1], reverse=True)
    segments.sort(key=lambda s: s[1])
    after = 0
    replay.bytes_total = sum(files.size(f"{data_dir}/{name}") for name, _ in segments)
    for name, lsn in snaps:
        replay.bytes_total += files.size(f"{data_dir}/{name}")
        replay.progress("snapshot")
        image = replay.load_snapshot(name, lsn)
        if image is not None:
            replay.image, after = image, lsn
            break
    last = max(after, replay.replay_segments(segments, after))
    image = replay.image
    now = wall_ms()
    if image.max_ts > now:
        replay.report.clock_behind_ms = image.max_ts - now
        _log.warning("durable: the wall clock is %d ms behind the newest timestamp in the "
                     "data; expiring with the latter", image.max_ts - now)
    replay.report.expired = image.expire(max(now, image.max_ts))
    replay.report.quarantined_files = replay.quarantine.set_aside
    replay.report.quarantined_records = replay.quarantine.records
    replay.report.seconds = time.perf_counter() - started
    tail = replay.tail
    if tail is not None and tail.next_lsn != last + 1:
        tail = None  # the snapshot is ahead of the segment: the log starts a new one
    return Recovered(image, last, directory, replay.report, tail, replay.log_bytes)
