"""Writing a store's :class:`~cubequeue.storage.interface.RowStream` to a wire as it comes.

Gathering 10⁶ rows into one frame and then encoding them all holds the event loop for
seconds and the whole result in memory. A wire that can send rows as they come (the
PostgreSQL wire: a RowDescription, DataRows, then CommandComplete) hands the executor a
:class:`RowSink`; :func:`stream_rows` then reads one slice, has the sink encode it, and
awaits :meth:`RowSink.drain` (written out, and the client reading: the transport's write
buffer below its high-water mark) before the next, so each event-loop turn does one
slice's work and a slow reader holds at most a buffer's worth. The statement's answer is
then a :class:`StreamedRows`: no rows (they were sent), their count for the command tag.

The stream is closed however the writing ends (an error, a ``statement_timeout``, a
CancelRequest, a disconnect), so the store's snapshot of it is released at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.storage.interface import RowStream

__all__ = ["RowSink", "StreamedRows", "close_stream", "stream_rows"]


class RowSink(Protocol):
    """Where a streamed result's rows go, a slice at a time."""

    def begin(self, columns: tuple[Column, ...]) -> None:
        """Before the first slice (PostgreSQL: the RowDescription of a simple Query)."""
        ...

    def write(self, rows: list[Row]) -> None:
        """Encode one slice of rows for the wire."""
        ...

    async def drain(self) -> None:
        """Send what was encoded; return once the client takes more (after at least
        one event-loop turn, so other connections run between slices)."""
        ...


@dataclass(frozen=True, slots=True)
class StreamedRows(ResultSet):
    """A result whose rows went to a :class:`RowSink` as they came (``rows`` is empty)."""

    count: int = 0


def close_stream(stream: RowStream) -> None:
    """Close a stream's slices if they can be closed (a store's snapshot is released)."""
    close = getattr(stream.slices, "close", None)
    if close is not None:
        close()


async def stream_rows(stream: RowStream, sink: RowSink) -> StreamedRows:
    """Every slice of ``stream`` through ``sink``, one per event-loop turn at most."""
    sink.begin(stream.columns)
    count = 0
    slices: Iterator[list[Row]] = stream.slices
    try:
        for part in slices:
            if part:
                sink.write(part)
                count += len(part)
            await sink.drain()
    finally:
        close_stream(stream)
    return StreamedRows(stream.columns, [], count)
