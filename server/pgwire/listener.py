"""The PostgreSQL wire's listening shell: its sockets, their accept loop, TLS's context.

:func:`start_pg_server` binds ``--host``:``--port`` (and, with ``--unix-socket-dir``,
``DIR/.s.PGSQL.<port>``, removed again when the listener closes) and hands each socket
to one :class:`~.acceptor.Admission`: until it authenticates, a connection counts only
against ``--max-unauthenticated-connections``, and a burst past that cap waits in the
listen backlog while the oldest silent connection is closed for it; the user's caps
apply once it has logged in, so silent or failing logins cannot lock the real user out.
Each accepted connection is a :class:`~.connection.PgProtocol`, which speaks the
protocol; ``--tls-cert``/``--tls-key`` give the context its TLS upgrades use.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

from cubequeue.server.pgwire.acceptor import (
    Admission,
    bind_tcp,
    bind_unix,
    file_id,
    listen_backlog,
)
from cubequeue.server.pgwire.connection import PgProtocol

if TYPE_CHECKING:
    from cubequeue.server.context import ServerContext

__all__ = ["PgListener", "start_pg_server", "unix_socket_path"]


def _tls_context(ctx: ServerContext) -> ssl.SSLContext | None:
    cert, key = ctx.config.tls_cert, ctx.config.tls_key
    if not cert:
        return None
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key or None)
    return tls


def unix_socket_path(directory: str, port: int) -> str:
    """Where libpq looks for a server on ``port`` in ``directory`` (psql ``-h DIR``)."""
    return os.path.join(directory, f".s.PGSQL.{port}")


class PgListener:
    """The PostgreSQL wire's listening sockets (TCP, and ``--unix-socket-dir``'s) and
    their one accept loop; :meth:`close` also removes the Unix socket file."""

    def __init__(self, admission: Admission, sockets: list[socket.socket],
                 unix_path: str | None) -> None:
        self.admission = admission
        self.sockets = sockets
        self.unix_path = unix_path
        self._unix_id = file_id(unix_path) if unix_path is not None else None

    def close(self) -> None:
        """Stop accepting; connections already open are ended by the registry."""
        self.admission.close()
        path, self.unix_path = self.unix_path, None
        if path is not None and file_id(path) == self._unix_id:  # still ours
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    async def wait_closed(self) -> None:
        """Nothing to wait for: :meth:`close` closed the sockets (asyncio's name)."""


async def start_pg_server(
    ctx: ServerContext, *, on_shortage: Callable[[str], None] | None = None,
) -> PgListener:
    """Listen on ``--host``:``--port`` for PostgreSQL clients, and on
    ``DIR/.s.PGSQL.<port>`` with ``--unix-socket-dir``; ``on_shortage`` hears when
    descriptors run short (the accept loop waits then)."""
    config = ctx.config
    tls = _tls_context(ctx)
    admission = Admission(config.max_unauthenticated_connections, on_shortage=on_shortage)
    backlog = listen_backlog()
    sockets = await bind_tcp(config.host, config.port, backlog)
    unix_path = None
    try:
        if config.unix_socket_dir is not None:
            unix_path = unix_socket_path(config.unix_socket_dir, config.port)
            sockets.append(bind_unix(unix_path, backlog))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    for sock in sockets:
        admission.listen(sock, lambda: PgProtocol(ctx, tls, admission))
    return PgListener(admission, sockets, unix_path)
