"""The store seam: the one typed interface the server talks to.

Three stores sit behind it: the in-memory store (:class:`~cubequeue.storage.store.MemoryStore`,
pure and synchronous), its durable form (the same store with a log of state records and
snapshots) and the PostgreSQL store (stateless front ends, every step one database
transaction). The server never knows which one it has:

* A **step** (:meth:`StoreBackend.execute`) returns its result, or an awaitable of it when
  the store must wait (for the disk or the database). The in-memory store always answers at
  once, so its hot path costs no coroutine; callers test ``isinstance(r, ResultSet)`` first.
* A **large result** may come as a :class:`RowStream`: the columns at once, then the rows in
  slices, so that writing them never holds the event loop for long. A stream is consumed
  once, in order.
* **RESULT_BLOCKING** (:meth:`StoreBackend.result_blocking`) answers at once or registers
  the server's callback and returns a :class:`Cancellable` (the waiter) that the server
  cancels on timeout or disconnect.
* What only some stores can do (deferred bulk work, closing, readiness, the durable
  log's figures, a database pool's health) are small Protocols in
  :mod:`cubequeue.storage.capabilities`, checked once where a store is built or attached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.storage.stats import StoreStats

__all__ = [
    "BlockingOutcome",
    "Cancellable",
    "RowStream",
    "StepResult",
    "StoreBackend",
    "Table",
]


@dataclass(frozen=True, slots=True)
class RowStream:
    """A result whose rows arrive in slices: ``columns`` now, then each list of ``slices``."""

    columns: tuple[Column, ...]
    slices: Iterator[list[Row]]
    #: how many rows the slices hold, when the store knows it up front (a reader can
    #: refuse a large result before a row is built)
    length: int | None = None

    def collect(self) -> ResultSet:
        """Every row at once, for callers that need the whole frame (tests, small tables)."""
        rows: list[Row] = []
        for part in self.slices:
            rows.extend(part)
        return ResultSet(self.columns, rows)


class Cancellable(Protocol):
    """A registered RESULT_BLOCKING wait; ``cancel`` is idempotent."""

    def cancel(self) -> None: ...


#: what a step hands back: a frame, a stream of rows, or an awaitable of either
StepResult = ResultSet | RowStream | Awaitable[ResultSet | RowStream]
#: RESULT_BLOCKING: the row at once, a registered waiter, or an awaitable of either
BlockingOutcome = ResultSet | Cancellable | Awaitable[ResultSet | Cancellable]
#: a system table's rows: a frame, a stream, or an awaitable of either
Table = ResultSet | RowStream | Awaitable[ResultSet | RowStream]


@runtime_checkable
class StoreBackend(Protocol):
    """What every store implements; see the module docstring for the result shapes."""

    #: "memory", "durable" or "postgresql" (shown by the console and SYS CACHESTORE INFO)
    kind: str

    def execute(self, cmd: Command, process_id: str | None = None) -> StepResult:
        """Run one bound command (anything but RESULT_BLOCKING) as one atomic step."""
        ...

    def result_blocking(
        self,
        cmd: QueueResultBlocking,
        callback: Callable[[ResultSet], None],
        process_id: str | None = None,
    ) -> BlockingOutcome:
        """The row at once, or ``callback`` registered until the matching ACK."""
        ...

    def system_table(self, name: str) -> Table:
        """The live rows of ``system.<name>``."""
        ...

    def stats(self) -> StoreStats | Awaitable[StoreStats]:
        """Live counters for metrics, INFO and the console."""
        ...

    def now_ms(self) -> int:
        """The store's clock: what UNIX_TIMESTAMP() and NOW() read (moved by SYS CLOCK)."""
        ...
