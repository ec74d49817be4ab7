"""Prepared statements and portals of the extended query protocol, and their descriptions.

A statement is described completely at Parse time (postgres-wire.md §3): its parameter
types come from the grammar slots (dialect doc §8 rule 5: int8 for numbers, text for
paths, payloads and keys; an integer cast in the text, ``$1::int8``, reports that integer
type, as PostgreSQL would), unless the client declared a type in Parse, which always
wins; its result columns come from the command's fixed schema (§8 rule 6), so Describe
never has to run anything (asyncpg and pgjdbc describe before executing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.types import (
    COLUMN_OIDS,
    INT2,
    INT4,
    INT8,
    TEXT,
    TYPE_SIZES,
    ParamValue,
    RowDumper,
    row_dumper,
)
from cubequeue.storage.results import Column, Row

if TYPE_CHECKING:
    from cubequeue.server.executor import Prepared

__all__ = [
    "ColumnSpec",
    "Portal",
    "PreparedStatement",
    "columns_of",
    "dialect_param_oids",
    "row_description",
]

#: (name, type OID) per result column; None = the statement returns no rows (NoData)
ColumnSpec = tuple[tuple[str, int], ...] | None
StatementKind = Literal["dialect", "plain", "empty"]

_CAST_OIDS = {
    "int2": INT2, "smallint": INT2, "int4": INT4, "int": INT4, "integer": INT4,
    "int8": INT8, "bigint": INT8,
}  # fmt: skip


def _slot_oid(param: Param) -> int:
    if param.slot is Slot.INT8:
        return INT8
    if param.cast is not None and param.cast in _CAST_OIDS:
        return _CAST_OIDS[param.cast]
    return TEXT


def dialect_param_oids(params: Sequence[Param], declared: Sequence[int]) -> tuple[int, ...]:
    """ParameterDescription of a dialect statement: declared OIDs win, else the slot's."""
    by_index = {p.index: p for p in params}
    count = max(len(declared), max(by_index, default=0))
    out = []
    for i in range(1, count + 1):
        given = declared[i - 1] if i <= len(declared) else 0
        if given:
            out.append(given)
        elif i in by_index:
            out.append(_slot_oid(by_index[i]))
        else:
            out.append(TEXT)
    return tuple(out)


def columns_of(columns: Sequence[Column], oids: Sequence[int] | None = None) -> ColumnSpec:
    """The column spec of a result schema; ``oids`` overrides the §8 rule 6 mapping."""
    if not columns:
        return None
    if oids is None:
        return tuple((c.name, COLUMN_OIDS[c.type]) for c in columns)
    return tuple((c.name, oid) for c, oid in zip(columns, oids, strict=True))


@lru_cache(maxsize=512)
def row_description(
    spec: tuple[tuple[str, int], ...], formats: tuple[int, ...]
) -> m.RowDescription:
    return m.RowDescription(
        tuple(
            m.FieldDescription(name, oid, TYPE_SIZES.get(oid, -1), fmt)
            for (name, oid), fmt in zip(spec, formats, strict=True)
        )
    )


@lru_cache(maxsize=512)
def _dumper(oids: tuple[int, ...], formats: tuple[int, ...]) -> RowDumper:
    return row_dumper(oids, formats)


def dumper_for(spec: tuple[tuple[str, int], ...], formats: tuple[int, ...]) -> RowDumper:
    return _dumper(tuple(oid for _name, oid in spec), formats)


@dataclass(slots=True, eq=False)
class PreparedStatement:
    name: str
    sql: str
    kind: StatementKind
    #: what ParameterDescription reports (and how parameters are decoded)
    param_oids: tuple[int, ...]
    columns: ColumnSpec
    prepared: Prepared | None = None


@dataclass(slots=True, eq=False)
class Portal:
    name: str
    statement: PreparedStatement
    #: the bound dialect command (None for plain SQL and the empty statement)
    command: Command | None
    params: tuple[ParamValue, ...]
    formats: tuple[int, ...]
    #: rows not yet sent; None until the first Execute ran the statement
    rows: list[Row] | None = None
    pos: int = 0
    #: the CommandComplete tag, or its stem when ``counted`` (``QUEUE LIST`` + " 3")
    tag: str = ""
    counted: bool = False
    columns: ColumnSpec = field(default=None)
