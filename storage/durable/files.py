"""The file layer the log, snapshots and recovery go through.

Everything touching the disk calls a :class:`Files`, so tests can put a simulated disk
underneath (one that drops what was written but not synced, keeps a random prefix of the
last write, or fails a write or a sync with ENOSPC/EIO) and prove what survives a power
loss. :class:`OsFiles` is the real one: ``pwrite`` into preallocated files, ``fdatasync``,
and an fsync of the directory after every create, rename and unlink, without which a
rename is not durable (etcd ``Create``, Redis ``fsyncFileDir``).
"""

from __future__ import annotations

import errno
import os
from typing import Protocol

__all__ = ["Files", "OsFiles", "disk_error", "preallocate", "zero_fill"]

_ZEROS = b"\0" * (1 << 20)


class Files(Protocol):
    """The operations durable mode needs; paths are absolute, handles opaque ints."""

    def open(self, path: str, *, create: bool) -> int: ...
    def close(self, handle: int) -> None: ...
    def pwrite(self, handle: int, data: bytes, offset: int) -> None: ...
    def datasync(self, handle: int) -> None: ...
    def truncate(self, handle: int, size: int) -> None: ...
    def read(self, path: str) -> bytes: ...
    def exists(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def listdir(self, path: str) -> list[str]: ...
    def makedirs(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def sync_dir(self, path: str) -> None: ...


class OsFiles:
    """The operating system's files."""

    def open(self, path: str, *, create: bool) -> int:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0)
        return os.open(path, flags, 0o600)

    def close(self, handle: int) -> None:
        os.close(handle)

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        written = os.pwrite(handle, data, offset)
        if written == len(data):  # the common case: one call, no view
            return
        view = memoryview(data)[written:]
        offset += written
        while view:
            written = os.pwrite(handle, view, offset)
            view = view[written:]
            offset += written

    def datasync(self, handle: int) -> None:
        os.fdatasync(handle)

    def truncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def zero_fill(files: Files, handle: int, size: int) -> None:
    """Write ``size`` zero bytes: a preallocated segment overwritten later needs no
    metadata journal commit per fdatasync, unlike a growing file."""
    offset = 0
    while offset < size:
        chunk = _ZEROS[: min(len(_ZEROS), size - offset)]
        files.pwrite(handle, chunk, offset)
        offset += len(chunk)


def preallocate(files: Files, handle: int, size: int, *, written: bool) -> None:
    """Reserve ``size`` bytes of a new segment. ``written``: zero-fill it (every block
    written, so an ``fdatasync`` after overwriting it commits no extent metadata, as
    PostgreSQL and etcd fill theirs: ``--fsync always``). Otherwise the blocks are only
    allocated (``posix_fallocate``: they read as zeros), which makes each later
    ``write(2)`` into the page cache several times cheaper on ext4 (bench/RESULTS-notes.md)
    at the price of extent conversion in the once-a-second fsync: the trade
    ``no`` and ``everysec``, whose writes run on the event loop, want. A simulated disk
    is always zero-filled (same contents)."""
    if not written and isinstance(files, OsFiles):
        os.posix_fallocate(handle, 0, size)
        return
    zero_fill(files, handle, size)


def disk_error(err: OSError) -> str:
    """``err`` in words; a full disk also says which options bound the directory."""
    text = str(err)
    if err.errno == errno.ENOSPC:
        text += (" (the data directory's file system is full: free space there, or lower "
                 "--segment-bytes, the size log segments grow to, or "
                 "--snapshot-min-log-bytes, the log kept between snapshots; "
                 "--max-disk-bytes refuses growth before the disk is full)")
    return text
