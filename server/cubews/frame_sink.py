"""A streamed result (a QUEUE LIST of a huge prefix) encoded a slice per event-loop turn.

Over the WebSocket an answer is one ``HttpResultSet`` frame, as Cube Store sends it, so
the rows cannot go out as they come the way DataRows do on the PostgreSQL wire. What
can be spread is the work: the executor hands each slice of the store's
:class:`~cubequeue.storage.interface.RowStream` to :meth:`FrameSink.write`, which turns
it into cell texts and writes its row tables (:class:`~.answers.ResultSetWriter`) in
:meth:`FrameSink.drain`, :data:`ROWS_PER_TURN` rows per event-loop turn: a store slice
(its work budget, 1024 rows by default) encoded at once held the loop ~9 ms here, a
quarter of it ~2 ms. The frame is then finished and sent whole.
"""

from __future__ import annotations

import asyncio
from typing import Final

from cubequeue.grammar.results import Column, ColumnType, Row
from cubequeue.server.cubews.answers import ResultSetWriter
from cubequeue.server.cubews.codec import cell_texts

__all__ = ["ROWS_PER_TURN", "FrameSink"]

#: rows encoded per event-loop turn
ROWS_PER_TURN: Final = 256


class FrameSink:
    """A :class:`~cubequeue.server.row_sink.RowSink` building one answer frame."""

    __slots__ = ("_pending", "_types", "_writer", "rows", "rows_per_turn")

    def __init__(self, rows_per_turn: int = ROWS_PER_TURN) -> None:
        self._writer: ResultSetWriter | None = None
        self._types: list[ColumnType] = []
        #: slices given to :meth:`write` and not yet encoded
        self._pending: list[list[Row]] = []
        self.rows_per_turn = max(1, rows_per_turn)
        #: rows encoded so far
        self.rows = 0

    def begin(self, columns: tuple[Column, ...]) -> None:
        self._writer = ResultSetWriter([c.name for c in columns])
        self._types = [c.type for c in columns]

    def write(self, rows: list[Row]) -> None:
        assert self._writer is not None, "begin() comes first"
        self._pending.append(rows)

    async def drain(self) -> None:
        """Encode what was written, ``rows_per_turn`` rows per loop turn (one turn at
        least: other sockets run between slices)."""
        step = self.rows_per_turn
        turned = False
        while self._pending:
            rows = self._pending.pop(0)
            for at in range(0, len(rows), step):
                self._encode(rows[at : at + step])
                await asyncio.sleep(0)
                turned = True
        if not turned:
            await asyncio.sleep(0)

    def _encode(self, rows: list[Row]) -> None:
        assert self._writer is not None
        self._writer.add(cell_texts(rows, self._types))
        self.rows += len(rows)

    @property
    def begun(self) -> bool:
        return self._writer is not None

    def finish(self, message_id: int, connection_id: str | None) -> bytes:
        """The answer frame of every row written (the sink is spent)."""
        assert self._writer is not None, "begin() comes first"
        for rows in self._pending:  # written but never drained
            self._encode(rows)
        self._pending.clear()
        frame = self._writer.finish(message_id, connection_id)
        self._writer = None
        return frame
