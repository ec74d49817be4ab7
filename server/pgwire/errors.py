"""How an error becomes an ErrorResponse / NoticeResponse, and the SQLSTATEs only the wire needs.

Fields follow "Error and Notice Message Fields" (PostgreSQL docs): ``S`` (localized
severity), ``V`` (severity, never localized; since 9.6), ``C`` (SQLSTATE) and ``M`` are
always present; ``D`` detail, ``H`` hint and ``P`` (1-based character position) when the
error carries them. Startup and framing failures use severity FATAL and end the
connection (postgres-wire.md §1 "Errors").
"""

from __future__ import annotations

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
]


class InvalidAuthorizationSpecification(QueueError, sqlstate="28000"):
    """A startup packet without a user name."""


class DuplicatePreparedStatement(QueueError, sqlstate="42P05"):
    """Parse of a named statement that already exists."""


class DuplicateCursor(QueueError, sqlstate="42P03"):
    """Bind to a named portal that already exists."""


def error_response(exc: QueueError, severity: str = "ERROR") -> m.ErrorResponse:
    fields = [("S", severity), ("V", severity), ("C", exc.sqlstate), ("M", exc.message)]
    if exc.detail:
        fields.append(("D", exc.detail))
    if exc.hint:
        fields.append(("H", exc.hint))
    if exc.position is not None:
        fields.append(("P", str(exc.position)))
    return m.ErrorResponse(tuple(fields))


def notice_response(severity: str, sqlstate: str, message: str) -> m.NoticeResponse:
    return m.NoticeResponse((("S", severity), ("V", severity), ("C", sqlstate), ("M", message)))
