"""The server's settled configuration: one frozen value built at startup.

Field names are the CLI flags of the option table with dashes turned into underscores, in
the units given there (durations in the unit the flag names: ``max_blocking_timeout`` in
ms; ``ws_dedup_ttl``, ``results_expire`` and ``shutdown_grace`` in seconds). How flags,
``CUBEQUEUE_*`` and ``CUBESTORE_*`` variables are combined lives in :mod:`.options`.
"""

from __future__ import annotations

import errno as _errno
import re
from dataclasses import dataclass

__all__ = ["LISTEN_OPTIONS", "Config", "ListenError", "listen_error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 5432
    http_port: int = 3030
    log_level: str = "info"
    log_format: str = "plain"
    slow_command_ms: int = 1000
    auth: str = "trust"
    password: str | None = None
    #: read into ``password`` at startup (keeps it out of the process list)
    password_file: str | None = None
    users_file: str | None = None
    ws_auth: str = "none"
    tls_cert: str | None = None
    tls_key: str | None = None
    max_connections: int = 1000
    max_connections_per_user: int = 500
    max_message_size: int = 67_108_864
    max_blocking_timeout: int = 600_000
    ws_dedup_ttl: int = 120
    cubestore_version: str = "1.7.25"
    results_expire: int = 60
    cache_max_entry_bytes: int = 66_060_288
    cache_max_keys: int = 100_000
    cache_max_bytes: int = 4_294_967_296
    max_items: int = 1_000_000
    max_payload_bytes: int = 66_060_288
    #: a plain-SQL statement (SELECT …, not QUEUE/CACHE) larger than this is 54000
    max_sql_statement_bytes: int = 1_048_576
    max_sql_rows: int = 100_000
    queue_log_size: int = 10_000
    test_clock: bool = False
    shutdown_grace: int = 5
    #: none, basic or off; None means "basic when --auth is not trust, else none"
    console_auth: str | None = None
    #: none, basic or loopback; None means "basic when --auth is not trust, else none"
    metrics_auth: str | None = None
    #: longest label value on /metrics, in UTF-8 bytes; longer ones are cut and marked
    max_metrics_label_bytes: int = 200
    #: peer networks allowed on ``/ws``, comma-separated CIDR (as pg_hba's address
    #: column), normalised; None: any peer
    ws_allow: str | None = None
    #: sockets that have not authenticated yet, capped apart from ``max_connections``
    max_unauthenticated_connections: int = 100
    #: seconds a socket may stay silent before its first byte (authentication: 60 s)
    startup_timeout: int = 10
    #: seconds a PostgreSQL message may take from its first byte to its last
    message_timeout: int = 60
    #: refuse plaintext PostgreSQL connections with 28000, as pg_hba's ``hostssl``
    tls_required: bool = False
    #: serve the HTTP port (``/ws``, probes, metrics) over TLS with ``--tls-cert``
    http_tls: bool = False
    #: also listen on ``DIR/.s.PGSQL.<port>``, where psql looks without ``-h``
    unix_socket_dir: str | None = None
    #: ``memory`` or a ``postgresql://`` URL (stateless front ends over PostgreSQL)
    store: str = "memory"
    #: a direct PostgreSQL connection for LISTEN and the housekeeping lock, when the
    #: ``store`` URL goes through a transaction pooler; None: the ``store`` URL
    store_session_dsn: str | None = None
    #: durable mode: log and snapshots in this directory; None keeps everything in memory
    data_dir: str | None = None
    #: always, everysec or no (durable mode only)
    fsync: str = "everysec"
    #: salvage, strict or point-in-time: what recovery does with corruption before the tail
    recovery: str = "salvage"
    #: above it, commands that grow state get 53100; None: no cap
    max_disk_bytes: int | None = None
    segment_bytes: int = 67_108_864
    snapshot_min_log_bytes: int = 67_108_864
    #: seconds between snapshots when anything changed
    snapshot_interval: int = 600
    #: answers kept for a WebSocket resend, in bytes, per connection_id and in total;
    #: an answer beyond either is replaced by a marker (a resend gets an HttpError)
    max_ws_resend_bytes: int = 67_108_864
    max_ws_resend_total_bytes: int = 268_435_456
    #: RESULT_BLOCKING waits one WebSocket may hold at once, and the largest message one
    #: may be (a waiter holds its message until it is answered)
    max_ws_blocking_waits: int = 1000
    max_blocking_message_bytes: int = 65_536
    #: named prepared statements, and named portals, one PostgreSQL connection may hold
    max_prepared_statements: int = 10_000
    #: the default ``statement_timeout`` of every session, in ms (0: none): how long a
    #: step that waits (a store that answers later, a stream of rows) may take
    statement_timeout: int = 60_000
    #: origins a browser page may open ``/ws`` from, comma-separated, or ``*``; None:
    #: none (an upgrade without ``Origin``, as Cube's driver sends, is always served)
    ws_allowed_origins: str | None = None
    #: host names the console and ``/metrics`` answer besides ``localhost``, IP addresses
    #: and ``--host`` (``.example.com`` for its subdomains), or ``*``; None: those only
    allowed_hosts: str | None = None


#: the listener options whose port a bind error may name, in the order they are bound
LISTEN_OPTIONS = (("port", "--port"), ("http_port", "--http-port"))


class ListenError(OSError):
    """A configured address the server cannot listen on (in use, not local, forbidden).

    ``str(err)`` is the one line for the operator, naming the port and the flag that set
    it, so the console script can print it and exit 2 instead of a traceback."""

    def __init__(self, errno: int, option: str, host: str, port: int, reason: str) -> None:
        super().__init__(errno, reason)
        self.option = option
        self.host = host
        self.port = port
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot listen on {self.host} port {self.port} ({self.option}): {self.reason}"


_BIND_REASONS = {
    _errno.EADDRINUSE: "address already in use",
    _errno.EACCES: "permission denied (ports below 1024 need privileges)",
    _errno.EADDRNOTAVAIL: "address not available on this host",
}
#: the address asyncio's and uvloop's create_server put in a bind error's message
_BIND_ADDRESS = re.compile(r"address \('?([^',]*)'?, (\d+)")


def listen_error(config: Config, exc: OSError) -> ListenError | None:
    """``exc`` as a :class:`ListenError` when it is a bind failure of one of ``config``'s
    listeners, else None (an unrelated error keeps its traceback).

    The port comes from the message asyncio and uvloop write ("error while attempting to
    bind on address ('127.0.0.1', 5432): address already in use"), matched against the
    configured ports, so the flag is named even when the caller raised a plain OSError."""
    if isinstance(exc, ListenError):
        return exc
    reason = _BIND_REASONS.get(exc.errno or 0)
    match = _BIND_ADDRESS.search(str(exc))
    if reason is None or match is None:
        return None
    port = int(match.group(2))
    for field, flag in LISTEN_OPTIONS:
        if getattr(config, field) == port:
            option = "--host" if exc.errno == _errno.EADDRNOTAVAIL else flag
            return ListenError(exc.errno or 0, option, config.host, port, reason)
    return None
