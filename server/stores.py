"""Build the configured store: ``--store memory`` (the default) or ``--store postgresql://…``.

The server asks this module for its store and never names a store class itself. The
PostgreSQL store is imported only when configured, so a memory-only server does not pay
for asyncpg at start-up. A PostgreSQL store must be started (connect, migrate, listen)
inside the event loop before serving and closed at shutdown: :func:`open_store` and
:func:`close_store` do nothing for the memory store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cubequeue.storage.clock import Clock
from cubequeue.storage.interface import StoreBackend
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import Store

if TYPE_CHECKING:
    from cubequeue.storage.queue_log import Departure

__all__ = ["MEMORY", "build_store", "close_store", "open_store", "parse_store", "store_ready"]

MEMORY = "memory"
_SCHEMES = ("postgresql", "postgres")


def parse_store(text: str) -> str:
    """``memory`` or a PostgreSQL URL (``postgresql://`` or ``postgres://``); ValueError
    with a one-line reason otherwise (for the option table's parser)."""
    value = text.strip()
    if value.lower() == MEMORY:
        return MEMORY
    parts = urlsplit(value)
    if parts.scheme.lower() not in _SCHEMES:
        raise ValueError("must be 'memory' or a postgresql://user@host:port/database URL")
    if not parts.netloc and "host=" not in parts.query:
        raise ValueError("names no host (postgresql://user@host:port/database)")
    return value


def build_store(
    store: str,
    *,
    clock: Clock,
    limits: Limits,
    session_dsn: str | None = None,
    on_departure: Callable[[Departure], None] | None = None,
) -> StoreBackend:
    """The store ``--store`` names. The in-memory store reads ``clock``; the PostgreSQL
    store reads the database's (plus the shared test-clock offset) and takes
    ``session_dsn`` (``--store-session-dsn``) for LISTEN and the housekeeping lock."""
    if parse_store(store) == MEMORY:
        return Store(clock, limits, on_departure=on_departure)
    from cubequeue.storage.postgres import PostgresStore

    return PostgresStore(store, limits, session_dsn=session_dsn)


async def open_store(store: StoreBackend) -> None:
    """Connect and migrate a PostgreSQL store (57P03 ``StoreUnavailable`` if it cannot)."""
    start = getattr(store, "start", None)
    if start is not None:
        await start()


async def close_store(store: StoreBackend) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        await close()


def store_ready(store: StoreBackend) -> bool:
    """For ``/readyz``: the memory store always is; the PostgreSQL store while it reaches
    its database and its notification session is up."""
    return bool(getattr(store, "available", True))
