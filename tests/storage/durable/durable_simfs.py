"""A simulated disk for the durable tests: what was written but not synced is lost in a
crash (or a random prefix of each file's last write is kept), a rename or create survives
only after its directory was synced, and any operation can be made to fail with an errno.
SQLite's crash VFS (``src/test6.c``) and RocksDB's ``FaultInjectionTestFS`` work this way.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    durable: bytearray = field(default_factory=bytearray)
    #: unsynced writes since the last datasync, in order: (offset, bytes)
    pending: list[tuple[int, bytes]] = field(default_factory=list)


#: (operation, path) → an errno to fail with, or None
Fault = Callable[[str, str], int | None]


class SimFiles:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._visible: dict[str, _Inode] = {}
        self._durable: dict[str, _Inode] = {}
        self._dirs: set[str] = set()
        self._handles: dict[int, tuple[str, _Inode]] = {}
        self._next_handle = 3
        self.fault: Fault | None = None
        self.syncs = 0
        #: bytes the disk holds (visible files together); a write past it fails ENOSPC
        self.capacity: int | None = None

    def _check(self, op: str, path: str) -> None:
        if self.fault is not None:
            code = self.fault(op, path)
            if code is not None:
                raise OSError(code, os.strerror(code), path)

    # -- Files ---------------------------------------------------------------------------

    def open(self, path: str, *, create: bool) -> int:
        with self._lock:
            self._check("open", path)
            if create:
                if path in self._visible:
                    raise FileExistsError(errno.EEXIST, "exists", path)
                self._visible[path] = _Inode()
            elif path not in self._visible:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            handle = self._next_handle
            self._next_handle += 1
            self._handles[handle] = (path, self._visible[path])
            return handle

    def close(self, handle: int) -> None:
        with self._lock:
            self._handles.pop(handle, None)

    def pwrite(self, handle: int, data: bytes, offset: int) -> None:
        with self._lock:
            path, inode = self._handles[handle]
            self._check("write", path)
            end = offset + len(data)
            if self.capacity is not None and end > len(inode.data):
                used = sum(len(i.data) for i in self._visible.values())
                if used + end - len(inode.data) > self.capacity:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            if len(inode.data) < end:
                inode.data.extend(b"\0" * (end - len(inode.data)))
            inode.data[offset:end] = data
            inode.pending.append((offset, bytes(data)))

    def datasync(self, handle: int) -> None:
        with self._lock:
            path, inode = self._handles[handle]
            self._check("sync", path)
            inode.durable = bytearray(inode.data)
            inode.pending.clear()
            self.syncs += 1

    def truncate(self, handle: int, size: int) -> None:
        with self._lock:
            path, inode = self._handles[handle]
            self._check("write", path)
            del inode.data[size:]
            inode.pending.append((size, b""))

    def read(self, path: str) -> bytes:
        with self._lock:
            if path not in self._visible:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return bytes(self._visible[path].data)

    def exists(self, path: str) -> bool:
        with self._lock:
            return path in self._visible or path in self._dirs

    def size(self, path: str) -> int:
        with self._lock:
            return len(self._visible[path].data)

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            prefix = path.rstrip("/") + "/"
            names = {p[len(prefix):].split("/")[0] for p in [*self._visible, *self._dirs]
                     if p.startswith(prefix)}
            return sorted(names)

    def makedirs(self, path: str) -> None:
        with self._lock:
            self._dirs.add(path)

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._check("rename", src)
            self._visible[dst] = self._visible.pop(src)

    def unlink(self, path: str) -> None:
        with self._lock:
            self._check("unlink", path)
            del self._visible[path]

    def sync_dir(self, path: str) -> None:
        with self._lock:
            self._check("syncdir", path)
            prefix = path.rstrip("/") + "/"

            def inside(p: str) -> bool:
                return p.startswith(prefix) and "/" not in p[len(prefix):]

            for p in [p for p in self._durable if inside(p)]:
                del self._durable[p]
            for p, inode in self._visible.items():
                if inside(p):
                    self._durable[p] = inode

    # -- tests ---------------------------------------------------------------------------

    def put(self, path: str, data: bytes) -> None:
        """A durable file with this content (to build a directory by hand)."""
        with self._lock:
            inode = _Inode(bytearray(data), bytearray(data))
            self._visible[path] = inode
            self._durable[path] = inode

    def crashed(self, rng: random.Random | None = None) -> SimFiles:
        """The disk as a power loss now would leave it: synced names and bytes only, plus,
        with ``rng``, a random prefix of each file's last unsynced write."""
        with self._lock:
            out = SimFiles()
            out._dirs = set(self._dirs)
            for path, inode in self._durable.items():
                data = bytearray(inode.durable)
                if rng is not None and inode.pending:
                    offset, chunk = inode.pending[-1]
                    keep = chunk[: rng.randrange(len(chunk) + 1)] if chunk else b""
                    end = offset + len(keep)
                    if len(data) < end:
                        data.extend(b"\0" * (end - len(data)))
                    data[offset:end] = keep
                out._visible[path] = _Inode(bytearray(data), bytearray(data))
                out._durable[path] = out._visible[path]
            return out

    def used(self, under: str = "/") -> int:
        """Bytes in the visible files below ``under``."""
        with self._lock:
            return sum(len(i.data) for p, i in self._visible.items() if p.startswith(under))

    def killed(self) -> SimFiles:
        """The disk as a kill -9 leaves it: everything written is there (the OS has it)."""
        with self._lock:
            out = SimFiles()
            out._dirs = set(self._dirs)
            for path, inode in self._visible.items():
                out.put(path, bytes(inode.data))
            return out
