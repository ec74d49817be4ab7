"""The log's files as the writer thread sees them: preallocated segments, in order.

Runs on the writer thread, except :meth:`SegmentWriter.append_if_fits`, which the loop
calls itself under ``no`` and ``everysec`` while no thread job replaces the segment (see
:mod:`.log`). A segment is created zero-filled (so an ``fdatasync`` after overwriting it
commits no file-size metadata), with the next one prepared ahead as ``next.tmp`` and
renamed into place, with a directory fsync, when the current one is full (etcd's
``filePipeline``). A frame larger than a whole segment gets a segment of its own size.

Segments are sized to the data: the first is :data:`INITIAL_SEGMENT_BYTES`, and each
one after a full one twice as large, up to ``--segment-bytes``, so a small directory
takes a few MiB, not two 64 MiB files. After a restart the log continues in the last
segment where recovery found its written data ending (:class:`~.layout.SegmentTail`),
so restarts add no files.

A failed write or sync is never retried on the same file (PostgreSQL's fsync rule: the
kernel may have dropped the dirty pages and cleared the error): the error propagates, and
the owner abandons this writer and opens a new segment after a fresh snapshot.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid

from cubequeue.storage.durable import layout
from cubequeue.storage.durable.files import Files, preallocate
from cubequeue.storage.durable.layout import SegmentTail

__all__ = ["INITIAL_SEGMENT_BYTES", "SegmentWriter", "grown_size"]

#: the first segment's size (or --segment-bytes, if smaller)
INITIAL_SEGMENT_BYTES = 1 << 20

_NEXT = "next.tmp"
_log = logging.getLogger("cubequeue.durable")


def grown_size(used: int, limit: int) -> int:
    """The size of the segment after one holding ``used`` bytes: the smallest of
    :data:`INITIAL_SEGMENT_BYTES` doubled that holds twice as much, at most ``limit``."""
    size = INITIAL_SEGMENT_BYTES
    while size < 2 * used and size < limit:
        size *= 2
    return min(size, limit)


class SegmentWriter:
    __slots__ = ("_dir", "_directory", "_files", "_handle", "_offset", "_prepared",
                 "_segment_bytes", "_size", "_zero_filled", "name", "unsynced")

    def __init__(self, files: Files, data_dir: str, directory: uuid.UUID, segment_bytes: int,
                 first_lsn: int, *, zero_filled: bool = True,
                 resume: SegmentTail | None = None) -> None:
        self._files = files
        #: how new segments are preallocated (see :func:`~.files.preallocate`)
        self._zero_filled = zero_filled
        self._dir = data_dir
        self._directory = directory
        #: the largest size a segment grows to (``--segment-bytes``)
        self._segment_bytes = segment_bytes
        #: the size of ``next.tmp`` (0: none prepared)
        self._prepared = 0
        self._handle = -1
        self._offset = 0
        self._size = 0
        self.name = ""
        #: bytes written since the last sync
        self.unsynced = False
        if resume is not None and resume.next_lsn == first_lsn:
            self._resume(resume)
        else:
            self._open(first_lsn, grown_size(0, segment_bytes))

    @property
    def path(self) -> str:
        return f"{self._dir}/{self.name}"

    def _create(self, path: str, size: int) -> int:
        if self._files.exists(path):
            self._files.unlink(path)
        handle = self._files.open(path, create=True)
        preallocate(self._files, handle, size, written=self._zero_filled)
        self._files.datasync(handle)
        return handle

    def _resume(self, tail: SegmentTail) -> None:
        """Continue the segment recovery ended in (zeros from ``tail.offset`` on). Its
        replayed contents are synced first: the state recovered from it is acknowledged
        from now on, whatever the previous process had synced."""
        path = f"{self._dir}/{tail.name}"
        handle = self._files.open(path, create=False)
        try:
            self._files.datasync(handle)
            size = self._files.size(path)
        except OSError:
            self._files.close(handle)
            raise
        self._handle, self.name, self._offset = handle, tail.name, tail.offset
        self._size = max(size, tail.offset)

    def _open(self, first_lsn: int, size: int) -> None:
        name = layout.log_name(first_lsn)
        path = f"{self._dir}/{name}"
        next_path = f"{self._dir}/{_NEXT}"
        if self._prepared == size:
            handle = self._files.open(next_path, create=False)
            self._files.rename(next_path, path)
            self._prepared = 0
        else:
            if self._prepared:  # prepared for a full segment; this one follows a snapshot
                self._prepared = 0
                self._files.unlink(next_path)
            handle = self._create(path + ".tmp", size)
            self._files.rename(path + ".tmp", path)
        header = layout.FileHeader(layout.LOG_MAGIC, self._directory, first_lsn,
                                   time.time_ns() // 1_000_000)
        self._files.pwrite(handle, layout.encode_header(header), 0)
        self._files.datasync(handle)
        self._files.sync_dir(self._dir)
        self._handle, self.name, self._offset, self._size = handle, name, layout.HEADER_BYTES, size

    def prepare_next(self) -> None:
        """Zero-fill the segment that follows this one once it is full, now, off the hot
        path (idempotent)."""
        size = grown_size(self._size, self._segment_bytes)
        if self._prepared != size:
            self._prepared = 0
            handle = self._create(f"{self._dir}/{_NEXT}", size)
            self._files.close(handle)
            self._prepared = size

    def prepare_next_quietly(self) -> None:
        """:meth:`prepare_next`, where a failure (a full disk) only means the rotation
        will create the file itself."""
        try:
            self.prepare_next()
        except OSError as err:
            _log.warning("durable: cannot prepare the next segment yet: %s", err)
            with contextlib.suppress(OSError):
                self._files.unlink(f"{self._dir}/{_NEXT}")

    def append_if_fits(self, frame: bytes) -> bool:
        """Append a frame that fits the open segment (the loop's per-step write, one call);
        False, with nothing written, when it needs a rotation (the thread's job)."""
        offset = self._offset
        end = offset + len(frame)
        if end > self._size:
            return False
        self._files.pwrite(self._handle, frame, offset)
        self._offset = end
        self.unsynced = True
        return True

    def write(self, frame: bytes, first_lsn: int) -> bool:
        """Append one frame; True when it began a new segment."""
        rotated = False
        if self._offset + len(frame) > self._size:
            self._rotate(first_lsn, max(grown_size(self._size, self._segment_bytes),
                                        layout.HEADER_BYTES + len(frame)))
            rotated = True
        self._files.pwrite(self._handle, frame, self._offset)
        self._offset += len(frame)
        self.unsynced = True
        return rotated

    def rotate(self, first_lsn: int) -> None:
        """Close the segment (synced) and continue in ``log-<first_lsn>``, sized to what
        this one held (a snapshot's boundary; an empty segment already is that one, and
        stays)."""
        if self._offset == layout.HEADER_BYTES:
            return
        self._rotate(first_lsn, grown_size(self._offset, self._segment_bytes))

    def _rotate(self, first_lsn: int, size: int) -> None:
        self.sync()
        self._files.close(self._handle)
        self._handle = -1
        self._open(first_lsn, size)

    def sync(self) -> None:
        """``fdatasync`` what was written. The flag is cleared first: under ``no`` and
        ``everysec`` the loop may write (:meth:`write`) while this thread syncs, and a
        write that lands during the sync must leave the flag set for the next one."""
        if self.unsynced:
            self.unsynced = False
            self._files.datasync(self._handle)

    def close(self) -> None:
        if self._handle >= 0:
            self._files.close(self._handle)
            self._handle = -1
