"""The store as plain SQL reads it: a system table is a whole frame, the clock a call.

Plain SQL (:mod:`cubequeue.server.sql`) evaluates a statement synchronously over frames.
:class:`PlainTables` gives it the store's system tables that way, bounded by
``--max-sql-rows``. A store that answers a table later (an awaitable: a durable read that
saw an unwritten record, every read of the PostgreSQL store) makes it raise
:class:`TablesPending`, which the executor turns into a wait: it fetches the tables
(:meth:`PlainTables.fetch`), then evaluates the statement again over
:class:`FetchedTables`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from cubequeue.grammar.results import ResultSet, Row
from cubequeue.server.sql.limits import too_many_rows
from cubequeue.storage.interface import RowStream, StoreBackend

__all__ = ["MAX_SQL_ROWS", "FetchedTables", "PendingTable", "PlainTables", "TablesPending"]

#: default of ``--max-sql-rows``, the rows a plain SELECT may read from one system table: plain SQL is
#: evaluated in one go on the event loop (sorting, grouping), so a table larger than this
#: is refused with 54000 before any row is built; Cube's driver never reads system tables
MAX_SQL_ROWS = 100_000

#: one system table as the store handed it back for a plain statement
PendingTable = Awaitable[ResultSet | RowStream]


class TablesPending(Exception):  # a signal, not an error: never reaches a client
    """Raised out of plain SQL's synchronous evaluation when the store answers a system
    table with an awaitable: the executor turns it into a wait. Plain SQL catches no
    exception of this kind (only its own parse errors), so it unwinds cleanly; evaluation
    has no side effects, so it is simply run again over the fetched frames."""

    def __init__(self, name: str, table: PendingTable) -> None:
        super().__init__(name)
        self.tables = ((name, table),)


class PlainTables:
    """The store as plain SQL reads it (the module docstring)."""

    __slots__ = ("_store", "clock", "max_sql_rows")

    def __init__(self, store: StoreBackend, max_sql_rows: int = MAX_SQL_ROWS) -> None:
        self._store = store
        self.max_sql_rows = max_sql_rows
        self.clock: Callable[[], int] = store.now_ms

    def system_table(self, name: str) -> ResultSet:
        table = self._store.system_table(name)
        if isinstance(table, ResultSet):
            self._check_rows(name, len(table.rows))
            return table
        if isinstance(table, RowStream):
            if table.length is not None:  # refused before a row is built
                self._check_rows(name, table.length)
            rows: list[Row] = []
            for part in table.slices:
                rows.extend(part)
                self._check_rows(name, len(rows))
            return ResultSet(table.columns, rows)
        raise TablesPending(name, table)

    async def fetch(self, name: str, table: PendingTable) -> ResultSet:
        """A table the store answered later, as a frame: the same row bound, a stream's
        slices read one per event-loop turn."""
        answer = await table
        if isinstance(answer, ResultSet):
            self._check_rows(name, len(answer.rows))
            return answer
        if answer.length is not None:
            self._check_rows(name, answer.length)
        rows: list[Row] = []
        for part in answer.slices:
            rows.extend(part)
            self._check_rows(name, len(rows))
            await asyncio.sleep(0)
        return ResultSet(answer.columns, rows)

    def _check_rows(self, name: str, rows: int) -> None:
        if rows > self.max_sql_rows:
            raise too_many_rows(name, self.max_sql_rows)


class FetchedTables(PlainTables):
    """The store as a plain wait re-evaluates over it: the frames fetched so far first
    (a subclass, so the synchronous path pays nothing for it)."""

    __slots__ = ("frames",)

    def __init__(self, tables: PlainTables, frames: dict[str, ResultSet]) -> None:
        super().__init__(tables._store, tables.max_sql_rows)
        self.frames = frames

    def system_table(self, name: str) -> ResultSet:
        frame = self.frames.get(name)
        return frame if frame is not None else super().system_table(name)
