"""SQLSTATEs that only plain SQL needs (PostgreSQL's codes, appendix A of its docs).

They subclass :class:`cubequeue.grammar.errors.QueueError`, so both wires render them
like every other error (dialect doc §8 rule 10). Messages follow PostgreSQL 15's wording
so that people (and drivers matching on text) recognise them.
"""

from __future__ import annotations

from cubequeue.grammar.errors import QueueError

__all__ = [
    "ActiveSqlTransaction",
    "AmbiguousColumn",
    "CannotCoerce",
    "CantChangeRuntimeParam",
    "DatatypeMismatch",
    "DatetimeFieldOverflow",
    "DivisionByZero",
    "DuplicateColumn",
    "GroupingError",
    "IndeterminateDatatype",
    "InvalidColumnReference",
    "InvalidDatetimeFormat",
    "InvalidRowCount",
    "NumericValueOutOfRange",
    "UndefinedColumn",
    "UndefinedFunction",
    "UndefinedObject",
    "UndefinedParameter",
    "UndefinedTable",
]


class UndefinedColumn(QueueError, sqlstate="42703"):
    """A column that the system table (or the FROM list) does not have."""


class UndefinedTable(QueueError, sqlstate="42P01"):
    """``system.<name>`` that is not one of the system tables, or a bad qualifier."""


class UndefinedFunction(QueueError, sqlstate="42883"):
    """An operator or function applied to argument types it does not accept."""


class UndefinedObject(QueueError, sqlstate="42704"):
    """``SHOW`` / ``current_setting`` of a configuration parameter nobody set."""


class DuplicateColumn(QueueError, sqlstate="42701"):
    """A column named twice in a COPY column list."""


class AmbiguousColumn(QueueError, sqlstate="42702"):
    """An ORDER BY / GROUP BY name matching more than one output column."""


class GroupingError(QueueError, sqlstate="42803"):
    """A column outside an aggregate that is not in GROUP BY; nested aggregates."""


class InvalidColumnReference(QueueError, sqlstate="42P10"):
    """ORDER BY position out of range; ORDER BY outside the list of a SELECT DISTINCT."""


class IndeterminateDatatype(QueueError, sqlstate="42P18"):
    """A placeholder whose type cannot be deduced (``$1`` used with two types)."""


class CantChangeRuntimeParam(QueueError, sqlstate="55P02"):
    """``SET`` of a read-only server parameter (server_version, is_superuser, …)."""


class ActiveSqlTransaction(QueueError, sqlstate="25001"):
    """``DISCARD ALL`` inside a transaction block."""


class InvalidDatetimeFormat(QueueError, sqlstate="22007"):
    """Text that does not read as a timestamp or an interval."""


class DatetimeFieldOverflow(QueueError, sqlstate="22008"):
    """A timestamp outside the range the server can represent."""


class NumericValueOutOfRange(QueueError, sqlstate="22003"):
    """An integer that does not fit its type (int4 / int8)."""


class DivisionByZero(QueueError, sqlstate="22012"):
    """Integer division or modulo by zero."""


class CannotCoerce(QueueError, sqlstate="42846"):
    """A cast between types that have none (``true::timestamptz``)."""


class DatatypeMismatch(QueueError, sqlstate="42804"):
    """A WHERE / AND / OR operand that is not boolean; CASE branches of unrelated types."""


class InvalidRowCount(QueueError, sqlstate="2201W"):
    """A negative LIMIT or OFFSET (PostgreSQL uses 2201W and 2201X; one class serves both)."""


class UndefinedParameter(QueueError, sqlstate="42P02"):
    """``$1`` in a simple Query, which carries no parameters."""
