"""Optional store capabilities: small Protocols that a store implements or not.

The server checks each one once, where the store is built (``isinstance`` against a
``runtime_checkable`` Protocol), and keeps the typed result; nothing on the statement path
probes a store's attributes. :class:`~cubequeue.storage.interface.StoreBackend` is what
every store implements; what only some stores can do lives here, and
:class:`Capabilities` holds what one store was found to do
(:meth:`Capabilities.of`; the server's store slot finds them when a store is attached).

The stores implement these structurally and never import this module, so naming the
durable store's types here (for type checkers only) loads nothing at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cubequeue.storage.durable.log import DurableLog
    from cubequeue.storage.durable.recovery import RecoveryReport
    from cubequeue.storage.durable.snapshots import SnapshotInfo
    from cubequeue.storage.durable.store import DurableSettings

__all__ = [
    "Capabilities",
    "Closes",
    "DefersWork",
    "HasCapabilities",
    "PoolHealth",
    "ReportsAvailability",
    "ReportsPersistence",
    "ReportsPoolHealth",
    "capabilities_of",
]


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


@runtime_checkable
class DefersWork(Protocol):
    """A store whose steps may leave bulk work behind (a PURGE's or TRUNCATE's release,
    an expiry sweep's backlog): the server runs a slice of it per event-loop turn while
    :attr:`has_deferred` holds (the memory and durable stores)."""

    @property
    def has_deferred(self) -> bool:
        """Bulk work is left; read after every step, so it must be cheap."""
        ...

    def run_deferred(self, budget: int | None = None) -> bool:
        """One slice of it (``budget`` units, or the store's own); whether more is left."""
        ...


@runtime_checkable
class Closes(Protocol):
    """A store that holds something until it is closed: the durable store's final
    snapshot and directory lock, the PostgreSQL store's connections."""

    async def close(self) -> None: ...


@runtime_checkable
class ReportsAvailability(Protocol):
    """A store that may be attached and still not serve (``/readyz`` answers 503): the
    durable store once its log has failed, the PostgreSQL store while its database or its
    notification session is away. A store without it is available once attached."""

    @property
    def available(self) -> bool: ...


@runtime_checkable
class ReportsPersistence(Protocol):
    """A store that keeps a log and snapshots on disk (the durable store): the figures
    metrics export at scrape time."""

    @property
    def log(self) -> DurableLog: ...

    @property
    def last_snapshot(self) -> SnapshotInfo | None: ...

    @property
    def snapshots_total(self) -> int: ...

    @property
    def recovery(self) -> RecoveryReport | None:
        """What the recovery that opened the store found."""
        ...

    def disk_by_kind(self) -> dict[str, int]:
        """Bytes in the data directory by kind (log, snapshot, quarantine)."""
        ...

    @property
    def settings(self) -> DurableSettings:
        """Where the data directory is (metrics count its log segments)."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one store can do beyond :class:`~cubequeue.storage.interface.StoreBackend`:
    each field is the store itself, typed as the capability, or None."""

    defers_work: DefersWork | None = None
    closes: Closes | None = None
    availability: ReportsAvailability | None = None
    persistence: ReportsPersistence | None = None
    pool_health: ReportsPoolHealth | None = None

    @classmethod
    def of(cls, store: object) -> Capabilities:
        """Check ``store`` against every capability, once."""
        return cls(
            defers_work=store if isinstance(store, DefersWork) else None,
            closes=store if isinstance(store, Closes) else None,
            availability=store if isinstance(store, ReportsAvailability) else None,
            persistence=store if isinstance(store, ReportsPersistence) else None,
            pool_health=store if isinstance(store, ReportsPoolHealth) else None,
        )


@runtime_checkable
class HasCapabilities(Protocol):
    """Something that found a store's capabilities already (the server's store slot)."""

    @property
    def capabilities(self) -> Capabilities: ...


def capabilities_of(store: object) -> Capabilities:
    """``store``'s capabilities: those its holder found when the store was attached (the
    server's slot, whose store may change), else checked now. For readers outside the
    statement path (metrics, readiness), which may be handed either."""
    if isinstance(store, HasCapabilities):
        return store.capabilities
    return Capabilities.of(store)
