"""How an error becomes an ErrorResponse / NoticeResponse, and the SQLSTATEs only the wire needs.

Fields follow "Error and Notice Message Fields" (PostgreSQL docs): ``S`` (localized
severity), ``V`` (severity, never localized; since 9.6), ``C`` (SQLSTATE) and ``M`` are
always present; ``D`` detail, ``H`` hint and ``P`` (1-based character position) when the
error carries them. Startup and framing failures use severity FATAL and end the
connection (PostgreSQL's protocol docs, "Errors").

The dialect's messages keep Cube Store's wording, which is the WebSocket's text
(``docs/dialect.md`` §1.7); two parts of it only make sense there, so this wire rewrites
them: ``at Line: L, Column: C`` is dropped where field ``P`` carries the position (psql
draws a caret under it), and the process-id errors name the PostgreSQL wire's way to set
one (``SET process_id = '…'``) instead of the WebSocket header.
"""

from __future__ import annotations

import re

from cubequeue.grammar.errors import QueueError
from cubequeue.server.pgwire import messages as m
from cubequeue.server.sql.errors import UndefinedParameter

__all__ = [
    "DuplicateCursor",
    "DuplicatePreparedStatement",
    "InvalidAuthorizationSpecification",
    "UndefinedParameter",
    "error_response",
    "notice_response",
    "pg_message",
]


class InvalidAuthorizationSpecification(QueueError, sqlstate="28000"):
    """No rule admits this connection: a startup packet without a user name, or
    plaintext under ``--tls-required``."""


class DuplicatePreparedStatement(QueueError, sqlstate="42P05"):
    """Parse of a named statement that already exists."""


class DuplicateCursor(QueueError, sqlstate="42P03"):
    """Bind to a named portal that already exists."""


#: the sqlparser location suffix of a syntax error (``docs/dialect.md`` §1.7)
_AT_LINE_COLUMN = re.compile(r" at Line: [0-9]+, Column: [0-9]+$")
#: how the store's process-id errors name the WebSocket's way to set one
_WS_PROCESS_ID = "(x-process-id header)"
_PG_PROCESS_ID = "(SET process_id = '…', or the startup option -c process_id=…)"


def pg_message(exc: QueueError) -> str:
    """``exc``'s message as this wire words it (see the module docstring)."""
    message = exc.message
    if exc.position is not None:
        message = _AT_LINE_COLUMN.sub("", message)
    if message.endswith(_WS_PROCESS_ID):
        message = message[: -len(_WS_PROCESS_ID)] + _PG_PROCESS_ID
    return message


def error_response(exc: QueueError, severity: str = "ERROR") -> m.ErrorResponse:
    fields = [("S", severity), ("V", severity), ("C", exc.sqlstate), ("M", pg_message(exc))]
    if exc.detail:
        fields.append(("D", exc.detail))
    if exc.hint:
        fields.append(("H", exc.hint))
    if exc.position is not None:
        fields.append(("P", str(exc.position)))
    return m.ErrorResponse(tuple(fields))


def notice_response(severity: str, sqlstate: str, message: str) -> m.NoticeResponse:
    return m.NoticeResponse((("S", severity), ("V", severity), ("C", sqlstate), ("M", message)))
