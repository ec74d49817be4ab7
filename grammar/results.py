"""Typed result frames, the only thing the store hands back to the wires.

A frame is Cube Store's: typed columns (String, Int, Boolean) and rows of plain Python
values (``str | int | bool | None``), never wire text (dialect doc §1.5). cubequeue adds a
Timestamp type for the system tables and ``SYS CLOCK`` (§8 rule 11); its values are
integer milliseconds since the Unix epoch, which the server renders as ``timestamptz``
on the PostgreSQL wire and as ISO 8601 text on the WebSocket wire.

"Empty frame" (zero columns, zero rows) is :data:`EMPTY`; zero rows with columns is a
different answer and the two must never be confused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["EMPTY", "Column", "ColumnType", "ResultSet", "Row", "Value", "columns", "id_column"]

Value = str | int | bool | None
Row = tuple[Value, ...]


class ColumnType(enum.Enum):
    STRING = "String"
    INT = "Int"
    BOOLEAN = "Boolean"
    #: cubequeue only: integer milliseconds since the epoch (system tables, SYS CLOCK).
    TIMESTAMP = "Timestamp"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    #: the column holds a numeric queue id: String in Cube Store's frame (so the WebSocket
    #: sends text, as Cube's driver expects), ``int8`` on the PostgreSQL wire, so the id
    #: read there can be passed back as an id parameter (``docs/dialect.md`` §8 rule 6)
    holds_id: bool = False


@dataclass(frozen=True, slots=True)
class ResultSet:
    columns: tuple[Column, ...]
    rows: list[Row] = field(default_factory=list)

    @property
    def is_empty_frame(self) -> bool:
        return not self.columns


def columns(*spec: tuple[str, ColumnType] | Column) -> tuple[Column, ...]:
    """``columns(("id", S), ("added", B))`` — a compact way to declare a schema; a
    :class:`Column` is taken as is (for :func:`id_column`)."""
    return tuple(c if isinstance(c, Column) else Column(c[0], c[1]) for c in spec)


def id_column(name: str) -> Column:
    """A String column holding a numeric queue id (see :attr:`Column.holds_id`)."""
    return Column(name, ColumnType.STRING, holds_id=True)


EMPTY = ResultSet(())
