"""The dialect's errors: one base type with a SQLSTATE per subclass.

Every user-visible failure is a :class:`QueueError`. Its message keeps Cube Store's
wording wherever ``docs/dialect.md`` quotes one (§8 rule 10: without Cube Store's
``Internal: ParserError(…)`` wrapping). The PostgreSQL wire renders it as an
ErrorResponse carrying :attr:`QueueError.sqlstate`; the WebSocket wire renders the plain
text (or ``Internal: …`` when :attr:`QueueError.internal` is set, as Cube Store does).

Subclasses declare their code with ``class X(QueueError, sqlstate="22023")``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CharacterNotInRepertoire",
    "FeatureNotSupported",
    "InsufficientPrivilege",
    "InternalError",
    "InvalidParameterValue",
    "InvalidTextRepresentation",
    "LimitExceeded",
    "ParameterCountMismatch",
    "QueueError",
    "SyntaxError",
    "lookup",
]

_BY_SQLSTATE: dict[str, type[QueueError]] = {}


class QueueError(Exception):
    """A failure with a SQLSTATE; a statement that raises it has changed nothing."""

    sqlstate: ClassVar[str] = "XX000"
    #: Cube Store reports this kind as an internal error (``Internal: …`` over WS).
    internal: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        detail: str | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail
        #: 1-based character position in the statement, as ErrorResponse field P.
        self.position = position

    def __init_subclass__(cls, sqlstate: str | None = None, internal: bool = False, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if sqlstate is not None:
            cls.sqlstate = sqlstate
            _BY_SQLSTATE.setdefault(sqlstate, cls)
        if internal:
            cls.internal = True

    def __str__(self) -> str:
        return self.message


class SyntaxError(QueueError, sqlstate="42601"):  # mirrors PostgreSQL's name
    """Parse errors, unknown commands, duplicate options, trailing tokens."""


class InvalidParameterValue(QueueError, sqlstate="22023"):
    """Out-of-range or negative numbers, over-long ids, EXCLUSIVE without a process id."""


class InvalidTextRepresentation(QueueError, sqlstate="22P02", internal=True):
    """Invalid JSON in MERGE_EXTRA, CACHE INCR on a non-integer, undecodable parameters."""


class FeatureNotSupported(QueueError, sqlstate="0A000"):
    """SQL outside the dialect, the session statements and the system tables."""


class InsufficientPrivilege(QueueError, sqlstate="42501"):
    """Clock control without ``--test-clock``."""


class LimitExceeded(QueueError, sqlstate="54000"):
    """A data cap: payload, result or cache entry too large, too many items."""


class ParameterCountMismatch(QueueError, sqlstate="08P01"):
    """A statement bound with more or fewer values than it has placeholders."""

    def __init__(self, given: int, required: int) -> None:
        super().__init__(f"{given} parameter values given, but the statement requires {required}")
        self.given = given
        self.required = required


class InternalError(QueueError, sqlstate="XX000", internal=True):
    """A bug: logged with a traceback; the session survives."""


def lookup(sqlstate: str) -> type[QueueError]:
    """The error class registered for ``sqlstate`` (QueueError itself when unknown)."""
    return _BY_SQLSTATE.get(sqlstate, QueueError)


class CharacterNotInRepertoire(QueueError, sqlstate="22021"):
    """A string literal whose escapes build bytes that are not valid UTF-8 (PostgreSQL's
    ``invalid byte sequence for encoding "UTF8": 0xff``)."""
