"""A streamed result onto a PostgreSQL session's wire (:class:`~cubequeue.server.row_sink.RowSink`).

The session encodes; the listener sends and waits for the client (``drain``). A simple
Query's result starts with its RowDescription; an Execute's does not (Describe sent it),
and its rows use the portal's result formats.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from cubequeue.grammar.results import Column, Row
from cubequeue.server.pgwire.statements import ResultShape

__all__ = ["ShapeFor", "WireRows"]

#: the shape of a result from its columns, and whether to send its RowDescription
ShapeFor = Callable[[tuple[Column, ...]], tuple[ResultShape, bool]]


class _Wire(Protocol):
    wire: list[bytes]


class WireRows:
    """Encodes each slice into the session's pending output; ``drain`` is the listener's."""

    __slots__ = ("_drain", "_encode", "_session", "_shape_for")

    def __init__(self, session: _Wire, shape_for: ShapeFor,
                 drain: Callable[[], Awaitable[None]]) -> None:
        self._session = session
        self._shape_for = shape_for
        self._drain = drain
        self._encode: Callable[[Row], bytes] | None = None

    def begin(self, columns: tuple[Column, ...]) -> None:
        shape, describe = self._shape_for(columns)
        if describe:
            self._session.wire.append(shape.description)
        self._encode = shape.encode_row

    def write(self, rows: list[Row]) -> None:
        encode = self._encode
        if encode is not None:
            self._session.wire.extend([encode(row) for row in rows])

    async def drain(self) -> None:
        await self._drain()
