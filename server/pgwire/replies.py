"""Encoding a statement's answer onto the wire, and the reply caches a connection keeps:
a result schema's text shape (:meth:`Replies._text_shape`) and constant outcomes' encoded
replies (``SELECT 1``: :meth:`Replies._constant_reply`). Both query phases,
:mod:`.simple_query` and :mod:`.extended_query`, answer through these."""

from __future__ import annotations

from datetime import UTC, tzinfo

from cubequeue.grammar.commands import Command
from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.encoder import EMPTY_QUERY, encode_command_complete
from cubequeue.server.pgwire.errors import notice_response
from cubequeue.server.pgwire.session_core import SessionCore
from cubequeue.server.pgwire.statements import ResultShape, columns_of, result_shape, zoned
from cubequeue.server.row_sink import StreamedRows
from cubequeue.server.sql import PlainOutcome

__all__ = ["MAX_CONSTANT_REPLIES", "Replies"]

#: result schemas a connection keeps the text shape of (:meth:`PgSession._text_shape`;
#: the dialect has a few dozen): the map is cleared when full
_MAX_TEXT_SHAPES = 64
#: constant replies a connection keeps encoded (plain SQL has three constant outcomes;
#: an Execute's are per result shape too); the map is cleared when full
MAX_CONSTANT_REPLIES = 16


class Replies(SessionCore):
    """Results, notices and ParameterStatus onto :attr:`wire`, through the caches."""

    def _send_rows(self, shape: ResultShape, rows: list[Row]) -> None:
        encode_row = shape.encode_row
        if encode_row is None or not rows:
            return
        if len(rows) == 1:
            self.wire.append(encode_row(rows[0]))
        else:
            self.wire.extend([encode_row(row) for row in rows])

    def _zone_for(self, spec: tuple[tuple[str, int], ...]) -> tzinfo:
        """The zone a result's shape needs: UTC unless it has a timestamptz column."""
        tz = self._tz
        return tz if tz is UTC or zoned(spec) else UTC

    def _text_shape(self, columns: tuple[Column, ...]) -> ResultShape | None:
        """A dialect result's text shape (None: no columns), kept per result schema: a
        command's columns are one constant tuple, so the spec and the shared shape are
        looked up once per schema and session zone, not rebuilt for every result."""
        tz = self._tz
        hit = self._text_shapes.get(id(columns))
        if hit is not None and hit[0] is columns and hit[2] is tz:
            return hit[1]
        spec = columns_of(columns)
        shape = None if spec is None else result_shape(spec, (0,) * len(spec),
                                                       self._zone_for(spec))  # fmt: skip
        if len(self._text_shapes) >= _MAX_TEXT_SHAPES:
            self._text_shapes.clear()
        self._text_shapes[id(columns)] = (columns, shape, tz)
        return shape

    def _dialect_reply(self, command: Command, result: ResultSet) -> None:
        shape = self._text_shape(result.columns)
        if isinstance(result, StreamedRows):  # the description and rows went already
            tag = command.tag if shape is None else f"{command.tag} {result.count}"
            self.wire.append(encode_command_complete(tag))
        elif shape is not None:
            self.wire.append(shape.description)
            self._send_rows(shape, result.rows)
            self.wire.append(encode_command_complete(f"{command.tag} {len(result.rows)}"))
        else:
            self.wire.append(encode_command_complete(command.tag))

    def _plain_effects(self, outcome: PlainOutcome) -> None:
        """What a plain statement asks of the names, and its notices (before its rows)."""
        self.names.apply(outcome.effect)
        for notice in outcome.notices:
            self.send(notice_response(notice.severity, notice.sqlstate, notice.message))

    def _parameter_status(self, outcome: PlainOutcome) -> None:
        status = outcome.parameter_status
        if not status:
            return
        for name, value in status.items():
            self.send(m.ParameterStatus(name, value))
        if "TimeZone" in status:
            self._tz = self._session().zone

    def _plain_reply(self, outcome: PlainOutcome) -> None:
        self._plain_effects(outcome)
        if outcome.result is not None:
            spec = columns_of(outcome.result.columns, outcome.type_oids)
            if spec is not None:
                shape = result_shape(spec, (0,) * len(spec), self._zone_for(spec))
                self.wire.append(shape.description)
                self._send_rows(shape, outcome.result.rows)
        if outcome.tag:
            self.wire.append(encode_command_complete(outcome.tag))
        else:  # only comments: PostgreSQL's empty query
            self.wire.append(EMPTY_QUERY)
        self._parameter_status(outcome)

    def _constant_reply(self, outcome: PlainOutcome) -> None:
        """A constant outcome's reply (``SELECT 1``: RowDescription, DataRow,
        CommandComplete), encoded once per connection and then appended as is. Its
        types carry no zone (int4, void), so no setting changes its bytes."""
        replies = self._constant_replies
        reply = replies.get(id(outcome))
        if reply is not None and reply[0] is outcome:
            self.wire.append(reply[1])
            return
        mark = len(self.wire)
        self._plain_reply(outcome)
        if len(replies) >= MAX_CONSTANT_REPLIES:
            replies.clear()
        replies[id(outcome)] = (outcome, b"".join(self.wire[mark:]))
