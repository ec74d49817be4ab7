"""Optional store capabilities: small Protocols that a store implements or not.

The server checks each one once, where the store is built (``isinstance`` against a
``runtime_checkable`` Protocol), and keeps the typed result; nothing on the statement path
probes a store's attributes. :class:`~cubequeue.storage.interface.StoreBackend` is what
every store implements; what only some stores can do lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["PoolHealth", "ReportsPoolHealth"]


@dataclass(frozen=True, slots=True)
class PoolHealth:
    """The PostgreSQL store's connections and failures, for metrics and the console."""

    #: connections open to the database now
    open: int
    #: of which are running a statement
    in_use: int
    #: the pool's upper bound
    max_size: int
    #: whether the last attempt to reach a writable database succeeded
    reachable: bool
    #: statements that failed, cumulative, by kind: ``unreachable`` (never sent: no writable
    #: database), ``in_doubt`` (sent, the connection died before the answer), ``timeout``
    #: (the per-call deadline passed), ``database`` (an error the database answered)
    errors: Mapping[str, int] = field(default_factory=dict)


@runtime_checkable
class ReportsPoolHealth(Protocol):
    """A store that talks to a database through a pool (the PostgreSQL store)."""

    def pool_health(self) -> PoolHealth:
        """The pool and error counts now; cheap, no I/O (read at scrape time)."""
        ...
