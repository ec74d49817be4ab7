"""The data directory's lock: ``flock`` on ``LOCK``, held for the process's life (etcd
locks its WAL files the same way), so a second server on the same directory refuses to
start instead of interleaving its log with ours."""

from __future__ import annotations

import fcntl
import os

from cubequeue.storage.durable.errors import DataDirLocked

__all__ = ["DirectoryLock"]


class DirectoryLock:
    __slots__ = ("_fd", "path")

    def __init__(self, data_dir: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, "LOCK")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            os.close(fd)
            raise DataDirLocked(
                f"--data-dir {data_dir} is in use by process {holder} (lock {self.path})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
