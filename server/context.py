"""What every connection of either wire shares: the store, the executor, the limits.

One :class:`ServerContext` exists per server process. The :class:`ConnectionRegistry`
enforces ``--max-connections`` / ``--max-connections-per-user`` across both wires (a
connection cap: 53300) on authenticated connections only, so sockets that never finish
a login cannot lock a user out; those wait in a pool of their own, capped by
``--max-unauthenticated-connections``. It writes the one log line per connection
open and close, keeps the PostgreSQL cancel keys, and tells every open connection to
end when the server shuts down.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING

from cubequeue.server.errors import TooManyConnections
from cubequeue.server.heap import HeapPolicy, process_heap_policy

if TYPE_CHECKING:
    from cubequeue.server.config import Config
    from cubequeue.server.executor import Executor
    from cubequeue.server.metrics import Metrics
    from cubequeue.storage.clock import AdjustableClock
    from cubequeue.storage.interface import StoreBackend

__all__ = [
    "PG_SERVER_VERSION",
    "ConnectionInfo",
    "ConnectionRegistry",
    "ServerContext",
    "load_users",
]

_log = logging.getLogger("cubequeue.conn")

#: the PostgreSQL release cubequeue claims (``server_version``, ``SELECT version()``): a
#: major that psql 15 accepts
PG_SERVER_VERSION = "15.18"


@dataclass(slots=True, eq=False)
class ConnectionInfo:
    id: int
    protocol: str
    user: str | None
    peer: str
    on_shutdown: Callable[[], None]
    opened_at: float = field(default_factory=time.monotonic)
    #: admitted by :meth:`ConnectionRegistry.open_pending`, not yet authenticated
    pending: bool = False


class _Observer:
    """The metrics hooks the registry needs (a subset of :class:`Metrics`)."""

    def connection_opened(self, protocol: str) -> None: ...

    def connection_closed(self, protocol: str) -> None: ...

    def connection_refused(self, cap: str) -> None: ...


class ConnectionRegistry:
    def __init__(
        self,
        *,
        max_connections: int,
        max_per_user: int,
        max_unauthenticated: int = 100,
        metrics: _Observer | Metrics | None = None,
    ) -> None:
        self._max = max_connections
        self._max_per_user = max_per_user
        self._max_pending = max_unauthenticated
        self._pending: dict[int, ConnectionInfo] = {}
        self._metrics = metrics
        self._ids = count(1)
        self._open: dict[int, ConnectionInfo] = {}
        self._per_user: Counter[str] = Counter()
        self._backends: dict[int, tuple[int, Callable[[], None]]] = {}

    def __len__(self) -> int:
        return len(self._open) + len(self._pending)

    def open_pending(
        self, protocol: str, peer: str, on_shutdown: Callable[[], None]
    ) -> ConnectionInfo:
        """Admit a socket that has not authenticated yet (counted only against
        ``--max-unauthenticated-connections``), or raise 53300 naming that cap."""
        if len(self._pending) >= self._max_pending:
            self._refused("max_unauthenticated_connections")
            raise TooManyConnections(
                "sorry, too many connections waiting to authenticate "
                f"(--max-unauthenticated-connections is {self._max_pending})"
            )
        info = ConnectionInfo(next(self._ids), protocol, None, peer, on_shutdown, pending=True)
        self._pending[info.id] = info
        return info

    def authenticate(self, info: ConnectionInfo, user: str) -> None:
        """Move a pending connection to the authenticated ones under ``user``, or raise
        53300 naming the cap that refused it (the connection stays pending: close it)."""
        self._check_caps(user)
        del self._pending[info.id]
        info.pending = False
        info.user = user
        self._admit(info)

    def open(
        self, protocol: str, user: str | None, peer: str, on_shutdown: Callable[[], None]
    ) -> ConnectionInfo:
        """Admit a connection, or raise 53300 naming the cap that refused it."""
        self._check_caps(user)
        info = ConnectionInfo(next(self._ids), protocol, user, peer, on_shutdown)
        self._admit(info)
        return info

    def _check_caps(self, user: str | None) -> None:
        if len(self._open) >= self._max:
            self._refused("max_connections")
            raise TooManyConnections(
                f"sorry, too many clients already (--max-connections is {self._max})"
            )
        if user is not None and self._per_user[user] >= self._max_per_user:
            self._refused("max_connections_per_user")
            raise TooManyConnections(
                f'too many connections for role "{user}" '
                f"(--max-connections-per-user is {self._max_per_user})"
            )

    def _refused(self, cap: str) -> None:
        if self._metrics is not None:
            self._metrics.connection_refused(cap)

    def _admit(self, info: ConnectionInfo) -> None:
        self._open[info.id] = info
        if info.user is not None:
            self._per_user[info.user] += 1
        if self._metrics is not None:
            self._metrics.connection_opened(info.protocol)
        _log.info(
            "connection opened",
            extra={"conn_id": info.id, "protocol": info.protocol, "peer": info.peer,
                   "user": info.user or ""},
        )

    def close(self, info: ConnectionInfo) -> None:
        """Forget a connection; closing twice is harmless."""
        if self._pending.pop(info.id, None) is not None:
            return  # never authenticated: never logged as opened nor counted
        if self._open.pop(info.id, None) is None:
            return
        if info.user is not None:
            self._per_user[info.user] -= 1
            if self._per_user[info.user] <= 0:
                del self._per_user[info.user]
        if self._metrics is not None:
            self._metrics.connection_closed(info.protocol)
        seconds = time.monotonic() - info.opened_at
        _log.info(
            "connection closed",
            extra={"conn_id": info.id, "protocol": info.protocol, "peer": info.peer,
                   "ms": round(seconds * 1000, 3)},
        )

    def shutdown_all(self) -> None:
        """Ask every open connection to end (57P01 on the PostgreSQL wire)."""
        for info in [*self._open.values(), *self._pending.values()]:
            try:
                info.on_shutdown()
            except Exception:  # one broken connection must not stop the others' shutdown
                _log.exception("error while shutting down connection %d", info.id)

    # PostgreSQL cancel keys (BackendKeyData / CancelRequest)

    def new_backend_key(self) -> tuple[int, int]:
        while True:
            pid = secrets.randbelow(2**31 - 2) + 1
            if pid not in self._backends:
                return pid, secrets.randbits(32) - 2**31

    def register_backend(self, pid: int, secret: int, cancel: Callable[[], None]) -> None:
        self._backends[pid] = (secret, cancel)

    def unregister_backend(self, pid: int) -> None:
        self._backends.pop(pid, None)

    def cancel(self, pid: int, secret: int) -> bool:
        """Run the cancel callback if pid and secret match; a mismatch does nothing."""
        entry = self._backends.get(pid)
        if entry is None or not secrets.compare_digest(
            entry[0].to_bytes(4, "big", signed=True), secret.to_bytes(4, "big", signed=True)
        ):
            return False
        entry[1]()
        return True


def load_users(config: Config) -> dict[str, str] | None:
    """user → password from ``--users-file``, or None when only ``--password`` (the
    password of every user) or nothing is set. One parser serves the server and the
    healthcheck: :func:`cubequeue.server.options.read_users_file`."""
    if config.users_file is None:
        return None
    from cubequeue.server.options import read_users_file

    return read_users_file(config.users_file)


@dataclass(slots=True, eq=False)
class ServerContext:
    config: Config
    store: StoreBackend
    clock: AdjustableClock
    executor: Executor
    metrics: Metrics
    connections: ConnectionRegistry
    users: dict[str, str] | None
    version: str
    started_at: float = field(default_factory=time.time)
    shutting_down: bool = False
    #: something has asked ``/readyz`` (a load balancer, an orchestrator's probe): on
    #: shutdown the HTTP port then stays up through ``--shutdown-grace`` answering 503
    readiness_watched: bool = False
    #: the cyclic collector's policy over a large store (server/heap.py)
    heap: HeapPolicy = field(default_factory=process_heap_policy)

    @property
    def server_version(self) -> str:
        """What ``server_version`` reports on either wire."""
        return f"{PG_SERVER_VERSION} (cubequeue {self.version})"

    def password_for(self, user: str) -> str | None:
        """The password ``user`` must present, or None when the user is unknown."""
        if self.users is not None:
            return self.users.get(user)
        return self.config.password
