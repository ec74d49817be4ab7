"""The data directory's lock, held for the process's life, so a second server on the same
directory refuses to start instead of interleaving its log with ours.

The lock is ``flock`` on the directory itself: a file can be deleted and created again
while a server runs (``rm LOCK``), so a lock on a file name alone would let a second
server in, but the directory cannot be recreated under a running server. ``LOCK`` is also
locked, so a server that predates the directory lock still sees this one, and it names
the process holding the lock, for the refusal's line.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os

from cubequeue.storage.durable.errors import DataDirLocked

__all__ = ["DirectoryLock", "ensure_directory"]

_log = logging.getLogger("cubequeue.durable")
#: flock's answers that mean "held by someone else", not "not supported here"
_HELD = (errno.EWOULDBLOCK, errno.EAGAIN)
_NAMES = "--data-dir names the directory for the log and snapshots (created if missing)"


def ensure_directory(data_dir: str) -> None:
    """Create ``data_dir`` if missing; an OSError naming the option if it is not a
    directory (``os.makedirs`` alone says only "File exists")."""
    if os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise NotADirectoryError(errno.ENOTDIR, f"is a file, not a directory; {_NAMES}", data_dir)
    try:
        os.makedirs(data_dir, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent on the path is a file
        raise NotADirectoryError(
            errno.ENOTDIR, f"a part of the path is a file, not a directory; {_NAMES}",
            data_dir) from None


class DirectoryLock:
    __slots__ = ("_dir_fd", "_fd", "path")

    def __init__(self, data_dir: str) -> None:
        ensure_directory(data_dir)
        self.path = os.path.join(data_dir, "LOCK")
        self._dir_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in _HELD:  # a file system without flock on directories
                _log.warning("durable: cannot lock the directory %s itself (%s); relying "
                             "on %s alone", data_dir, err.strerror, self.path)
            else:
                os.close(self._dir_fd)
                raise self._refusal(data_dir) from None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            os.close(self._dir_fd)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            os.close(self._dir_fd)
            raise self._refusal(data_dir) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def _refusal(self, data_dir: str) -> DataDirLocked:
        holder = ""
        with contextlib.suppress(OSError), open(self.path, "rb") as f:
            holder = f.read(32).decode("ascii", "replace").strip()
        who = f"process {holder}" if holder else "another process (its LOCK file was removed)"
        return DataDirLocked(f"--data-dir {data_dir} is in use by {who} (lock {self.path})")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            os.close(self._dir_fd)
            self._fd = self._dir_fd = -1
