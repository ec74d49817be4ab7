"""A streamed result (a QUEUE LIST of a huge prefix) encoded a slice per event-loop turn.

Over the WebSocket an answer is one ``HttpResultSet`` frame, as Cube Store sends it, so
the rows cannot go out as they come the way DataRows do on the PostgreSQL wire. What
can be spread is the work: the executor hands each slice of the store's
:class:`~cubequeue.storage.interface.RowStream` to :meth:`FrameSink.write`, which turns
it into cell texts and writes its row tables (:class:`~.answers.ResultSetWriter`), and
:meth:`FrameSink.drain` gives the loop one turn before the next slice. The frame is then
finished and sent whole; the store's work budget bounds a slice (1024 rows by default).
"""

from __future__ import annotations

import asyncio

from cubequeue.grammar.results import Column, ColumnType, Row
from cubequeue.server.cubews.answers import ResultSetWriter
from cubequeue.server.cubews.codec import cell_texts

__all__ = ["FrameSink"]


class FrameSink:
    """A :class:`~cubequeue.server.row_sink.RowSink` building one answer frame."""

    __slots__ = ("_types", "_writer", "rows")

    def __init__(self) -> None:
        self._writer: ResultSetWriter | None = None
        self._types: list[ColumnType] = []
        #: rows written so far
        self.rows = 0

    def begin(self, columns: tuple[Column, ...]) -> None:
        self._writer = ResultSetWriter([c.name for c in columns])
        self._types = [c.type for c in columns]

    def write(self, rows: list[Row]) -> None:
        assert self._writer is not None, "begin() comes first"
        self._writer.add(cell_texts(rows, self._types))
        self.rows += len(rows)

    async def drain(self) -> None:
        await asyncio.sleep(0)  # one loop turn: other sockets run between slices

    @property
    def begun(self) -> bool:
        return self._writer is not None

    def finish(self, message_id: int, connection_id: str | None) -> bytes:
        """The answer frame of every row written (the sink is spent)."""
        assert self._writer is not None, "begin() comes first"
        frame = self._writer.finish(message_id, connection_id)
        self._writer = None
        return frame
