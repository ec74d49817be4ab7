"""A streamed result (a QUEUE LIST of a huge prefix) encoded a slice per event-loop turn.

Over the WebSocket an answer is one ``HttpResultSet`` frame, as Cube Store sends it, so
the rows cannot go out as they come the way DataRows do on the PostgreSQL wire. What
can be spread is the work: the executor hands each slice of the store's
:class:`~cubequeue.storage.interface.RowStream` to :meth:`FrameSink.write`, which turns
it into cell texts and writes its row tables (:class:`~.answers.ResultSetWriter`) in
:meth:`FrameSink.drain`, :data:`ROWS_PER_TURN` rows per event-loop turn, a quarter of a
store slice (its work budget, 1024 rows by default), which encoded at once held the loop
too long. The frame is then sealed (:meth:`FrameSink.seal`): a listing of more than
:data:`JOIN_ROWS` rows builds its rows' offset vector :data:`VECTOR_PER_TURN` entries per
turn and is never joined: it stays :class:`FrameParts`, which :mod:`.inline_frames` sends
as a fragmented message, a fragment per turn (a million rows joined and written at once
held the loop for one long turn). The figures: bench/RESULTS-notes.md, "Timings kept out
of the code".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from cubequeue.grammar.results import Column, ColumnType, Row
from cubequeue.server.cubews.answers import ResultSetWriter
from cubequeue.server.cubews.codec import cell_text

__all__ = ["JOIN_ROWS", "ROWS_PER_TURN", "VECTOR_PER_TURN", "Frame", "FrameParts", "FrameSink"]

#: rows encoded per event-loop turn
ROWS_PER_TURN: Final = 256
#: entries of the rows' offset vector built per event-loop turn
VECTOR_PER_TURN: Final = 16_384
#: a listing of at most this many rows is finished and joined in one turn
JOIN_ROWS: Final = 2048


@dataclass(frozen=True, slots=True)
class FrameParts:
    """An answer frame too big to join on the loop: its parts in buffer order."""

    parts: tuple[bytes, ...]
    size: int

    def __len__(self) -> int:
        return self.size


#: an answer frame: its bytes, or the parts of a huge one
Frame = bytes | FrameParts


class FrameSink:
    """A :class:`~cubequeue.server.row_sink.RowSink` building one answer frame."""

    __slots__ = ("_pending", "_types", "_writer", "join_rows", "rows", "rows_per_turn",
                 "vector_per_turn")  # fmt: skip

    def __init__(self, rows_per_turn: int = ROWS_PER_TURN, *, join_rows: int = JOIN_ROWS,
                 vector_per_turn: int = VECTOR_PER_TURN) -> None:  # fmt: skip
        self._writer: ResultSetWriter | None = None
        self._types: list[ColumnType] = []
        #: slices given to :meth:`write` and not yet encoded
        self._pending: list[list[Row]] = []
        self.rows_per_turn = max(1, rows_per_turn)
        self.join_rows = join_rows
        self.vector_per_turn = max(1, vector_per_turn)
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
        self._writer.add(rows, self._types, cell_text, ColumnType.STRING)
        self.rows += len(rows)

    @property
    def begun(self) -> bool:
        return self._writer is not None

    async def seal(self, message_id: int, connection_id: str | None) -> Frame:
        """:meth:`finish` spread over loop turns: what was written and not drained is
        drained, and a listing of more than ``join_rows`` rows builds its rows' vector
        ``vector_per_turn`` entries per turn and stays in parts (the sink is spent)."""
        await self.drain()
        writer = self._writer
        assert writer is not None, "begin() comes first"
        if self.rows <= self.join_rows or not writer.sliceable(message_id, connection_id):
            return self.finish(message_id, connection_id)
        step = self.vector_per_turn
        vector = []
        for at in range(0, self.rows, step):
            vector.append(writer.rows_vector(at, at + step))
            await asyncio.sleep(0)
        self._writer = None
        parts = tuple(writer.finish_parts(message_id, connection_id, vector))
        return FrameParts(parts, sum(map(len, parts)))

    def finish(self, message_id: int, connection_id: str | None) -> bytes:
        """The answer frame of every row written (the sink is spent)."""
        assert self._writer is not None, "begin() comes first"
        for rows in self._pending:  # written but never drained
            self._encode(rows)
        self._pending.clear()
        frame = self._writer.finish(message_id, connection_id)
        self._writer = None
        return frame
