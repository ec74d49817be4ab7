"""Prepared statements and portals of the extended query protocol, and their descriptions.

A statement is described completely at Parse time: its parameter types come from the
grammar slots (int8 for numbers, text for paths, payloads and keys; an integer cast in
the text, ``$1::int8``, reports that integer type, as PostgreSQL would; see
``docs/dialect.md``), unless the client declared a type in Parse, which always wins; its
result columns come from the command's fixed schema, so Describe never has to run
anything (asyncpg and pgjdbc describe before executing).

:class:`Names` holds a session's statements and portals by name, and applies what plain
SQL asks of them (``DEALLOCATE``, ``CLOSE ALL``, ``DISCARD ALL``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Literal

from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.grammar.lexical import bounded_int
from cubequeue.grammar.results import Column, Row
from cubequeue.server.errors import InvalidCursorName, InvalidStatementName
from cubequeue.server.pgtypes.adapters import (
    ParamsLoader,
    ParamValue,
    RowDumper,
    formats_for,
    params_loader,
    row_dumper,
)
from cubequeue.server.pgtypes.oids import (
    INT2,
    INT4,
    INT8,
    TEXT,
    TIMESTAMPTZ,
    TYPE_SIZES,
    column_oid,
)
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.encoder import NO_DATA, encode, encode_data_row
from cubequeue.server.pgwire.errors import DuplicateCursor, DuplicatePreparedStatement

if TYPE_CHECKING:
    from cubequeue.server.executor import Prepared
    from cubequeue.server.sql.outcome import Effect

__all__ = [
    "ColumnSpec",
    "Names",
    "ParamOids",
    "Portal",
    "PreparedStatement",
    "ResultShape",
    "columns_of",
    "dialect_param_oids",
    "result_shape",
    "row_description",
    "zoned",
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


class ParamOids(tuple[int, ...]):
    """A dialect statement's parameter OIDs (what ParameterDescription reports), plus
    the 0-based positions of the key-slot parameters the client sent untyped (OID 0):
    reported as ``text``, yet all-digit text there is a numeric id
    (``docs/dialect.md`` §8 rule 5), which a declared ``text`` never is."""

    untyped_keys: frozenset[int] = frozenset()


def dialect_param_oids(params: Sequence[Param], declared: Sequence[int]) -> tuple[int, ...]:
    """ParameterDescription of a dialect statement: declared OIDs win, else the slot's."""
    by_index = {p.index: p for p in params}
    count = max(len(declared), max(by_index, default=0))
    out = []
    untyped_keys = []
    for i in range(1, count + 1):
        given = declared[i - 1] if i <= len(declared) else 0
        if given:
            out.append(given)
        elif i in by_index:
            param = by_index[i]
            out.append(_slot_oid(param))
            if param.slot is Slot.KEY and param.cast is None:  # ``$1::text`` stays a path
                untyped_keys.append(i - 1)
        else:
            out.append(TEXT)
    oids = ParamOids(out)
    if untyped_keys:
        oids.untyped_keys = frozenset(untyped_keys)
    return oids


def _digits_as_ids(load: ParamsLoader, positions: frozenset[int]) -> ParamsLoader:
    """``load``, then all-digit text at ``positions`` becomes an ``int`` (an id for bind)."""

    def load_ids(params: Sequence[bytes | None]) -> tuple[ParamValue, ...]:
        values = load(params)
        if not any(_is_digits(values[i]) for i in positions):
            return values
        return tuple(
            bounded_int(v) if i in positions and _is_digits(v) else v  # type: ignore[arg-type]
            for i, v in enumerate(values)
        )

    return load_ids


def _is_digits(value: ParamValue) -> bool:
    return type(value) is str and value.isascii() and value.isdigit()


def columns_of(columns: Sequence[Column], oids: Sequence[int] | None = None) -> ColumnSpec:
    """The column spec of a result schema; ``oids`` overrides the column types' OIDs."""
    if not columns:
        return None
    if oids is None:
        return tuple((c.name, column_oid(c)) for c in columns)
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
def _dumper(oids: tuple[int, ...], formats: tuple[int, ...], tz: tzinfo) -> RowDumper:
    return row_dumper(oids, formats, tz)


def dumper_for(
    spec: tuple[tuple[str, int], ...], formats: tuple[int, ...], tz: tzinfo = UTC
) -> RowDumper:
    return _dumper(tuple(oid for _name, oid in spec), formats, tz)


#: distinct format-code lists cached per statement (a client uses one or two)
_MAX_CACHED_FORMATS: Final = 8


@dataclass(frozen=True, slots=True)
class ResultShape:
    """What a portal's result format codes fix, encoded once (see :func:`result_shape`)."""

    formats: tuple[int, ...]
    #: the session zone text timestamptz columns are shown in (UTC when none is sent)
    tz: tzinfo
    #: one row → its DataRow bytes; None when the statement returns no rows
    encode_row: Callable[[Sequence[object]], bytes] | None
    #: the Describe-portal reply: RowDescription, or NoData
    description: bytes


def zoned(spec: ColumnSpec) -> bool:
    """Whether a result's text rendering depends on the session zone."""
    return spec is not None and any(oid == TIMESTAMPTZ for _name, oid in spec)


@lru_cache(maxsize=512)
def result_shape(spec: ColumnSpec, formats: tuple[int, ...], tz: tzinfo = UTC) -> ResultShape:
    """Shapes are shared across sessions; ``tz`` only matters (and is only passed) when
    the spec has a timestamptz column, so other shapes are cached once."""
    if spec is None:
        return ResultShape(formats, UTC, None, NO_DATA)
    dump = dumper_for(spec, formats, tz)

    def encode_row(row: Sequence[object]) -> bytes:
        return encode_data_row(dump(row))  # type: ignore[arg-type]  # rows hold Values

    return ResultShape(formats, tz, encode_row, encode(row_description(spec, formats)))


@dataclass(slots=True, eq=False)
class PreparedStatement:
    """A Parse's outcome; what Bind and Describe derive from it is cached here, so the
    per-statement work of a prepared execution is only loading values and running."""

    name: str
    sql: str
    kind: StatementKind
    #: what ParameterDescription reports (and how parameters are decoded)
    param_oids: tuple[int, ...]
    columns: ColumnSpec
    prepared: Prepared | None = None
    #: COMMIT / END / ROLLBACK / ABORT: runs even in a failed transaction block
    ends_block: bool = False
    #: its text rows depend on the session zone (a timestamptz column)
    zoned: bool = field(init=False)
    #: the Parse (query text, parameter OIDs) a next unnamed Parse may match to reuse
    #: this statement as it is (None: parse again; its description may depend on the
    #: session)
    reuse: tuple[str, tuple[int, ...]] | None = None
    _loaders: dict[tuple[int, ...], ParamsLoader] = field(default_factory=dict)
    _shapes: dict[tuple[int, ...], ResultShape] = field(default_factory=dict)
    _description: bytes | None = None

    def __post_init__(self) -> None:
        self.zoned = zoned(self.columns)

    def loader(self, codes: tuple[int, ...]) -> ParamsLoader:
        """The parameter decoder for a Bind's format codes (raises as formats_for)."""
        load = self._loaders.get(codes)
        if load is None:
            oids = self.param_oids
            load = params_loader(oids, formats_for(codes, len(oids), "parameter"))
            if isinstance(oids, ParamOids) and oids.untyped_keys:
                load = _digits_as_ids(load, oids.untyped_keys)
            if len(self._loaders) < _MAX_CACHED_FORMATS:
                self._loaders[codes] = load
        return load

    def shape(self, codes: tuple[int, ...], tz: tzinfo = UTC) -> ResultShape:
        """The result shape for a Bind's result format codes (raises as formats_for);
        ``tz`` is the session zone (see :func:`zoned`)."""
        shape = self._shapes.get(codes)
        if shape is None or shape.tz is not tz:
            spec = self.columns
            formats = formats_for(codes, 0 if spec is None else len(spec), "result")
            shape = result_shape(spec, formats, tz)
            if len(self._shapes) < _MAX_CACHED_FORMATS or codes in self._shapes:
                self._shapes[codes] = shape
        return shape

    def description(self) -> bytes:
        """The Describe-statement reply: ParameterDescription, then RowDescription (text
        formats, as nothing is bound yet) or NoData."""
        if self._description is None:
            params = encode(m.ParameterDescription(self.param_oids))
            spec = self.columns
            self._description = params + result_shape(spec, (0,) * len(spec or ())).description
        return self._description


@dataclass(slots=True, eq=False)
class Portal:
    name: str
    statement: PreparedStatement
    #: the bound dialect command (None for plain SQL and the empty statement)
    command: Command | None
    params: tuple[ParamValue, ...]
    shape: ResultShape
    #: rows not yet sent; None until the first Execute ran the statement
    rows: list[Row] | None = None
    pos: int = 0
    #: the CommandComplete tag, or its stem when ``counted`` (``QUEUE LIST`` + " 3")
    tag: str = ""
    counted: bool = False

    @property
    def columns(self) -> ColumnSpec:
        return self.statement.columns


class Names:
    """A session's prepared statements and portals, with PostgreSQL's errors for names."""

    __slots__ = ("portals", "statements")

    def __init__(self) -> None:
        self.statements: dict[str, PreparedStatement] = {}
        self.portals: dict[str, Portal] = {}

    def check_new_statement(self, name: str) -> None:
        if name and name in self.statements:
            raise DuplicatePreparedStatement(f'prepared statement "{name}" already exists')

    def check_new_portal(self, name: str) -> None:
        if name and name in self.portals:
            raise DuplicateCursor(f'cursor "{name}" already exists')

    def statement(self, name: str) -> PreparedStatement:
        stmt = self.statements.get(name)
        if stmt is None:
            if not name:
                raise InvalidStatementName("unnamed prepared statement does not exist")
            raise InvalidStatementName(f'prepared statement "{name}" does not exist')
        return stmt

    def portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        return portal

    def close(self, kind: str, name: str) -> None:
        """Close: an unknown name is not an error (PostgreSQL)."""
        if kind == "S":
            self.statements.pop(name, None)
        else:
            self.portals.pop(name, None)

    def apply(self, effect: Effect) -> None:
        """What a plain statement asked of the names (DEALLOCATE, CLOSE ALL, DISCARD ALL)."""
        if effect is None:
            return
        if effect in ("deallocate_all", "discard_all"):
            self.statements.clear()
        if effect in ("close_all", "discard_all"):
            self.portals.clear()
        if isinstance(effect, tuple):
            if effect[1] not in self.statements:
                raise InvalidStatementName(f'prepared statement "{effect[1]}" does not exist')
            del self.statements[effect[1]]
