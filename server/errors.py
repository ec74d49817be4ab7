"""Errors that only a wire raises: framing, connections, authentication, sessions.

They subclass the dialect's :class:`~cubequeue.grammar.errors.QueueError`, so both wires
render them the same way; the store never raises them.
"""

from __future__ import annotations

from cubequeue.grammar.errors import QueueError

__all__ = [
    "AdminShutdown",
    "ConfigurationLimitExceeded",
    "InFailedTransaction",
    "InvalidCursorName",
    "InvalidPassword",
    "InvalidStatementName",
    "ProtocolViolation",
    "QueryCanceled",
    "TooManyConnections",
    "bind_count_error",
]


class ProtocolViolation(QueueError, sqlstate="08P01"):
    """The peer broke the wire protocol (malformed frames, bad parameter counts)."""


class TooManyConnections(QueueError, sqlstate="53300"):
    """A connection cap, global or per user."""


class ConfigurationLimitExceeded(QueueError, sqlstate="53400"):
    """A per-connection cap set by configuration (``--max-prepared-statements``)."""


class QueryCanceled(QueueError, sqlstate="57014"):
    """A CancelRequest, a client timeout or a disconnect during a statement."""


class AdminShutdown(QueueError, sqlstate="57P01"):
    """The server is shutting down."""


class InvalidPassword(QueueError, sqlstate="28P01"):
    """Failed authentication."""


class InvalidStatementName(QueueError, sqlstate="26000"):
    """An unknown prepared statement."""


class InvalidCursorName(QueueError, sqlstate="34000"):
    """An unknown portal."""


class InFailedTransaction(QueueError, sqlstate="25P02"):
    """A statement other than ROLLBACK/COMMIT inside a failed transaction block."""



def bind_count_error(given: int, required: int, statement: str = "") -> ProtocolViolation:
    """PostgreSQL's wording for a Bind with the wrong number of parameter values."""
    return ProtocolViolation(
        f"bind message supplies {given} parameters, but prepared statement "
        f'"{statement}" requires {required}'
    )
