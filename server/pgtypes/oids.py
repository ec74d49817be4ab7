"""PostgreSQL type OIDs: the one table the wire, the type adapters and plain SQL share.

Only builtin OIDs (``pg_type.dat``) appear, because asyncpg introspects ``pg_catalog`` for
any OID it has no codec for, and cubequeue has no catalog to answer with. A store column
maps to a type as ``docs/dialect.md`` §8 rule 6 says: String → text, Int → int8,
Boolean → bool, Timestamp (integer ms since the epoch) → timestamptz, and a String
column holding a numeric queue id (``Column.holds_id``) → int8.
"""

from __future__ import annotations

from typing import Final

from cubequeue.grammar.results import Column, ColumnType

__all__ = [
    "BOOL",
    "CAST_OIDS",
    "COLUMN_OIDS",
    "FLOAT8",
    "INT2",
    "INT4",
    "INT8",
    "INTEGER_OIDS",
    "INTERVAL",
    "JSON",
    "JSONB",
    "NUMERIC",
    "TEXT",
    "TIMESTAMPTZ",
    "TYPE_NAMES",
    "TYPE_SIZES",
    "UNKNOWN",
    "VARCHAR",
    "VOID",
    "column_oid",
]

BOOL: Final = 16
INT8: Final = 20
INT2: Final = 21
INT4: Final = 23
TEXT: Final = 25
JSON: Final = 114
FLOAT8: Final = 701
UNKNOWN: Final = 705  # "unknown": a literal whose type was not yet resolved
VARCHAR: Final = 1043
TIMESTAMPTZ: Final = 1184
INTERVAL: Final = 1186
NUMERIC: Final = 1700
VOID: Final = 2278
JSONB: Final = 3802

#: the integer OIDs: a key parameter declared with one of these is an id (``docs/dialect.md`` §8 rule 5)
INTEGER_OIDS: Final = frozenset({INT2, INT4, INT8})

#: ``typlen`` for RowDescription (-1: variable length, -2: a C string)
TYPE_SIZES: Final = {
    TEXT: -1, VARCHAR: -1, INT2: 2, INT4: 4, INT8: 8, BOOL: 1, FLOAT8: 8,
    JSON: -1, JSONB: -1, TIMESTAMPTZ: 8, INTERVAL: 16, VOID: 4, UNKNOWN: -2, NUMERIC: -1,
}  # fmt: skip

#: PostgreSQL's name of each type, as its error messages spell it (``format_type``)
TYPE_NAMES: Final = {
    TEXT: "text", VARCHAR: "character varying", INT2: "smallint", INT4: "integer",
    INT8: "bigint", BOOL: "boolean", FLOAT8: "double precision", JSON: "json",
    JSONB: "jsonb", TIMESTAMPTZ: "timestamp with time zone", INTERVAL: "interval",
    VOID: "void", UNKNOWN: "unknown", NUMERIC: "numeric",
}  # fmt: skip

#: the store's column types on the PostgreSQL wire (``docs/dialect.md`` §8 rule 6)
COLUMN_OIDS: Final = {
    ColumnType.STRING: TEXT,
    ColumnType.INT: INT8,
    ColumnType.BOOLEAN: BOOL,
    ColumnType.TIMESTAMP: TIMESTAMPTZ,
}

#: the integer casts a placeholder may carry in the statement text (``$1::int8``)
CAST_OIDS: Final = {
    "int2": INT2, "smallint": INT2, "int4": INT4, "int": INT4, "integer": INT4,
    "int8": INT8, "bigint": INT8,
}  # fmt: skip


def column_oid(column: Column) -> int:
    """The OID a store column is sent as (``docs/dialect.md`` §8 rule 6)."""
    return INT8 if column.holds_id else COLUMN_OIDS[column.type]
