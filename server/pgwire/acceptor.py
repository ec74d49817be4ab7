"""The PostgreSQL listeners' own accept loop: a burst waits in the kernel, a squatter goes.

asyncio's and uvloop's servers accept whenever a listening socket is readable and have no
public way to pause, so a cap on connections could only be kept by refusing the ones
past it. This loop is built from public APIs instead (``loop.add_reader`` on the
listening socket, ``socket.accept``, ``loop.connect_accepted_socket``), so it can stop:

* at most ``cap`` accepted connections are unauthenticated at once
  (``--max-unauthenticated-connections``). At the cap the readers are removed and the
  kernel's listen backlog (sized to ``somaxconn``) holds the rest; accepting resumes as
  handshakes finish. A burst waits; nothing is refused for it.
* A connection that has sent nothing for :data:`SILENT_GRACE_S` is *silent*. When the cap
  is full and a client waits (the listening socket is readable), the oldest silent one is
  closed to let it in, so sockets that only squat cannot lock a real client out.
* Descriptors are short when ``accept`` fails with EMFILE/ENFILE, or when the accepted
  descriptor's number reaches the soft ``RLIMIT_NOFILE`` minus :func:`reserve` (Linux
  hands out the lowest free number, so a number that high means every lower one is
  taken: the check costs no system call). Then accepting pauses, the oldest silent
  connection is shed, and a probe (a closing connection, or one a second) resumes it: the
  reserve stays for the store, the logs and the HTTP port, and no accept spins.

Each connection shed is logged and counted by its reason
(``cubequeue_connections_shed{reason}``: :data:`~cubequeue.server.metrics.events.SHED_REASONS`).

One :class:`Admission` serves the TCP and the Unix-socket listeners together: they share
the cap and the descriptors. The connection objects it makes are told when to go
(:meth:`Admitted.shed`) and tell it when they were heard, logged in, or lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import stat
from collections.abc import Callable
from typing import Final

from cubequeue.server.metrics.events import SHED_FOR_DESCRIPTORS, SHED_FOR_WAITING_CLIENT

__all__ = [
    "ACCEPT_BATCH",
    "RETRY_S",
    "SILENT_GRACE_S",
    "Admission",
    "Admitted",
    "bind_tcp",
    "bind_unix",
    "descriptor_limit",
    "file_id",
    "listen_backlog",
    "reserve",
]

_log = logging.getLogger("cubequeue.pg")

#: how long a connection may have sent nothing before it counts as silent (and may be
#: shed for a waiting client); a real client's startup packet is there long before
SILENT_GRACE_S: Final = 2.0
#: how often accepting is retried while descriptors are short and nothing closes
RETRY_S: Final = 1.0
#: connections accepted per readable event, so one burst does not hold the loop
ACCEPT_BATCH: Final = 64
#: the most descriptors kept back from PostgreSQL-wire connections (see :func:`reserve`)
MAX_RESERVE: Final = 64
_SHORT: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: the peer gave up between the kernel's handshake and accept: take the next one
_GONE: Final = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ECONNRESET})


def reserve(soft_limit: int) -> int:
    """Descriptors kept free for everything but new PostgreSQL-wire connections (the
    store's files and connections, logs, the HTTP port): an eighth of the limit, at most
    :data:`MAX_RESERVE`."""
    return min(MAX_RESERVE, soft_limit // 8)


def listen_backlog() -> int:
    """The largest listen backlog the kernel grants (``net.core.somaxconn``): a burst
    past the cap waits there, not in a refusal."""
    try:
        with open("/proc/sys/net/core/somaxconn", encoding="ascii") as file:
            return max(int(file.read()), socket.SOMAXCONN)
    except (OSError, ValueError):
        return max(4096, socket.SOMAXCONN)


def descriptor_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE``, or None without one (read each time: an operator's
    ``prlimit`` takes effect at once)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


class Admitted(asyncio.Protocol):
    """A protocol the loop makes, and may ask to go."""

    def shed(self, reason: str, why: str) -> None:
        """Close at once (a silent connection making room), counted under ``reason`` (a
        :data:`~cubequeue.server.metrics.events.SHED_REASONS` value), logging ``why``."""
        raise NotImplementedError


#: a connection being set up (``loop.connect_accepted_socket``)
_SetUp = asyncio.Task[tuple[asyncio.BaseTransport, Admitted]]


class _Listener:
    __slots__ = ("factory", "sock", "watched")

    def __init__(self, sock: socket.socket, factory: Callable[[], Admitted]) -> None:
        self.sock = sock
        self.factory = factory
        self.watched = False


class Admission:
    """The accept loop of the PostgreSQL listeners and its gate (module docstring)."""

    def __init__(
        self,
        cap: int,
        *,
        grace_s: float = SILENT_GRACE_S,
        on_shortage: Callable[[str], None] | None = None,
    ) -> None:
        self.cap = cap
        self.grace_s = grace_s
        self._on_shortage = on_shortage
        self._loop = asyncio.get_running_loop()
        self._listeners: list[_Listener] = []
        #: accepted, not yet logged in nor lost (a dict: ordered, hashable members)
        self._pending: dict[Admitted, None] = {}
        #: pending ones that have sent nothing yet → when accepted, oldest first
        self._silent: dict[Admitted, float] = {}
        #: shed, still counted until they are lost (their descriptor is closed then)
        self._shedding: set[Admitted] = set()
        self._tasks: set[_SetUp] = set()
        self._paused = False
        self._short = False
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        """Accepted connections not yet logged in."""
        return len(self._pending)

    # --- listeners --------------------------------------------------------------------

    def listen(self, sock: socket.socket, factory: Callable[[], Admitted]) -> None:
        """Accept on ``sock`` (bound and listening) into ``factory()``'s protocols."""
        sock.setblocking(False)
        listener = _Listener(sock, factory)
        self._listeners.append(listener)
        if not self._paused:
            self._watch(listener)

    def close(self) -> None:
        """Stop accepting and close the listening sockets; open connections stay."""
        self._closed = True
        self._cancel_timer()
        for listener in self._listeners:
            self._unwatch(listener)
            listener.sock.close()

    # --- what connections report ------------------------------------------------------

    def heard(self, conn: Admitted) -> None:
        """``conn`` sent its first bytes: it is no longer silent."""
        self._silent.pop(conn, None)

    def authenticated(self, conn: Admitted) -> None:
        """``conn`` logged in: its place among the unauthenticated is free."""
        self.lost(conn)

    def lost(self, conn: Admitted) -> None:
        """``conn`` is gone (its descriptor is closed once this returns; the readers'
        callback runs in a later loop turn)."""
        if conn in self._pending:
            del self._pending[conn]
            self._silent.pop(conn, None)
            self._shedding.discard(conn)
        if self._paused:
            self._resume()

    # --- the loop ---------------------------------------------------------------------

    def _on_readable(self, listener: _Listener) -> None:
        soft = descriptor_limit()
        ceiling = None if soft is None else soft - reserve(soft)
        for _ in range(ACCEPT_BATCH):
            if len(self._pending) >= self.cap:
                self._pause()
                self._shed_oldest(SHED_FOR_WAITING_CLIENT, "a waiting client "
                                  f"(--max-unauthenticated-connections is {self.cap})")
                return
            try:
                conn, _address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                if exc.errno in _SHORT:
                    self._shortage(exc.strerror or os.strerror(exc.errno or 0))
                else:  # unexpected: say so, and retry later rather than spin
                    _log.error("accepting a PostgreSQL connection failed: %s", exc)
                    self._pause()
                    self._wake(RETRY_S)
                return
            fd = conn.fileno()
            self._start(listener, conn)
            if soft is not None and ceiling is not None and fd >= ceiling:
                self._shortage(f"{fd + 1} of {soft} descriptors in use, "
                               f"{reserve(soft)} kept in reserve")
                return

    def _start(self, listener: _Listener, conn: socket.socket) -> None:
        conn.setblocking(False)
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol = listener.factory()
        self._pending[protocol] = None
        self._silent[protocol] = self._loop.time()
        task = self._loop.create_task(
            self._loop.connect_accepted_socket(lambda: protocol, conn))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._started(done, protocol, conn))

    def _started(self, task: _SetUp, protocol: Admitted, conn: socket.socket) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                _log.info("a PostgreSQL connection could not be set up: %s", task.exception())
            conn.close()
            self.lost(protocol)

    def _shortage(self, reason: str) -> None:
        """Out of descriptors (or into the reserve): pause, shed, probe again later."""
        self._short = True
        self._pause()
        if self._on_shortage is not None:
            self._on_shortage(reason)
        self._shed_oldest(SHED_FOR_DESCRIPTORS, "descriptors (the limit is nearly reached)")
        self._wake(RETRY_S)

    def _shed_oldest(self, reason: str, why: str) -> None:
        """Close the oldest silent connection, once it has been silent for the grace
        (else wake when it has); one at a time: its loss resumes accepting."""
        if self._shedding or not self._silent:
            return
        conn, since = next(iter(self._silent.items()))
        wait = since + self.grace_s - self._loop.time()
        if wait > 0:
            self._wake(wait)
            return
        del self._silent[conn]
        self._shedding.add(conn)
        conn.shed(reason, f"closing the oldest silent connection (nothing sent for "
                  f"{self._loop.time() - since:.1f} s) to make room for {why}")

    def _resume(self) -> None:
        if not self._paused or self._closed:
            return
        if self._short:
            if _descriptors_short():
                self._shed_oldest(SHED_FOR_DESCRIPTORS,
                                  "descriptors (the limit is nearly reached)")
                self._wake(RETRY_S)
                return
            self._short = False
        self._cancel_timer()
        self._paused = False
        for listener in self._listeners:
            self._watch(listener)

    def _pause(self) -> None:
        if not self._paused:
            self._paused = True
            for listener in self._listeners:
                self._unwatch(listener)

    def _wake(self, delay: float) -> None:
        """Try to resume after ``delay`` s (a silent connection's grace, a probe), or
        sooner if a wake-up is set for sooner."""
        when = self._loop.time() + delay
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._woken)

    def _woken(self) -> None:
        self._timer = None
        self._resume()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _watch(self, listener: _Listener) -> None:
        if not listener.watched and not self._closed:
            self._loop.add_reader(listener.sock.fileno(), self._on_readable, listener)
            listener.watched = True

    def _unwatch(self, listener: _Listener) -> None:
        if listener.watched:
            self._loop.remove_reader(listener.sock.fileno())
            listener.watched = False


def _descriptors_short() -> bool:
    """Whether the lowest free descriptor lies inside the reserve (or none is free)."""
    soft = descriptor_limit()
    if soft is None:
        return False
    try:
        probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in _SHORT:
            return True
        raise
    os.close(probe)
    return probe >= soft - reserve(soft)


# --- listening sockets -------------------------------------------------------------


async def bind_tcp(host: str, port: int, backlog: int) -> list[socket.socket]:
    """One listening socket per address ``host`` resolves to, as asyncio's
    ``create_server`` binds them (``SO_REUSEADDR``, IPv6 sockets ``IPV6_V6ONLY``), with
    its bind error wording, which :func:`~cubequeue.server.config.listen_error` reads."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC,
                                   type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as err:
                raise OSError(err.errno, f"error while attempting to bind on address "
                              f"{address!r}: {(err.strerror or '').lower()}") from None
            sock.listen(backlog)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def bind_unix(path: str, backlog: int) -> socket.socket:
    """``DIR/.s.PGSQL.<port>``; a stale socket file left by a crashed server is replaced,
    as PostgreSQL does after its lock check."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o777)  # as PostgreSQL's unix_socket_permissions default
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def file_id(path: str) -> tuple[int, int] | None:
    """A file's identity (device, inode), to remove only the socket file we made."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
