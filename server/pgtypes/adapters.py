"""PostgreSQL type adapters: one dumper or loader per (type OID, format) pair.

The OIDs and the column-type mapping are :mod:`.oids`'s. Both
text (0) and binary (1) formats are implemented for every type, since asyncpg asks for
binary results and sends binary parameters, and psycopg sends Python ints as binary int2.
A text timestamptz is rendered in the session's ``TimeZone`` (:func:`row_dumper` takes
the zone), by the formatter plain SQL's ``::text`` uses too; a binary one is an instant
and carries no zone.

Loaders turn parameter bytes into the plain values :func:`cubequeue.grammar.bind`
accepts; whether a key is an id or a path follows from the Python type they return
(``int`` for the integer OIDs, ``str`` for text-like ones), ``docs/dialect.md`` §8 rule 5.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Final

from cubequeue.grammar.binding import BindValue
from cubequeue.grammar.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    QueueError,
)
from cubequeue.grammar.lexical import MAX_INT_DIGITS
from cubequeue.grammar.results import Value
from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.pgtypes import interval, numeric
from cubequeue.server.pgtypes.oids import (
    BOOL,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    JSON,
    JSONB,
    NUMERIC,
    TEXT,
    TIMESTAMPTZ,
    TYPE_NAMES,
    UNKNOWN,
    VARCHAR,
    VOID,
)
from cubequeue.server.timestamps import EPOCH, format_timestamptz

__all__ = [
    "InvalidBinaryRepresentation",
    "ParamValue",
    "ParamsLoader",
    "RowDumper",
    "dump_value",
    "formats_for",
    "load_param",
    "params_loader",
    "row_dumper",
]

#: what a loader returns: the values :func:`cubequeue.grammar.bind` takes
ParamValue = BindValue
Dumper = Callable[[object], bytes]
Loader = Callable[[bytes], ParamValue]
RowDumper = Callable[[Sequence[Value]], tuple[bytes | None, ...]]

#: PostgreSQL's binary timestamps count microseconds from 2000-01-01
_PG_EPOCH_US: Final = 946_684_800_000_000

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_I64 = struct.Struct("!q")
_F64 = struct.Struct("!d")


class InvalidBinaryRepresentation(QueueError, sqlstate="22P03"):
    """A binary parameter whose size or content does not fit its declared type."""


# --- dumpers (result values → bytes) ----------------------------------------------------


def _text_out(value: object) -> bytes:
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode("utf-8")


def _int_text_out(value: object) -> bytes:
    return str(int(value)).encode("ascii")  # type: ignore[call-overload]  # ints by schema


def _bool_text_out(value: object) -> bytes:
    return b"t" if value else b"f"


def _float_text_out(value: object) -> bytes:
    return repr(float(value)).encode("ascii")  # type: ignore[arg-type]  # floats by schema


def _timestamp_text_out(value: object) -> bytes:
    return format_timestamptz(value).encode("ascii")  # type: ignore[arg-type]  # ms ints


@lru_cache(maxsize=64)
def _timestamp_text_in_zone(tz: tzinfo) -> Dumper:
    """The text timestamptz dumper of one session zone (UTC is the table's own)."""
    if tz is UTC:
        return _timestamp_text_out

    def dump(value: object) -> bytes:
        return format_timestamptz(value, tz).encode("ascii")  # type: ignore[arg-type]

    return dump


def _int2_bin_out(value: object) -> bytes:
    return _I16.pack(value)


def _int4_bin_out(value: object) -> bytes:
    return _I32.pack(value)


def _int8_bin_out(value: object) -> bytes:
    # int(): a queue id column holds the id's decimal text (``Column.holds_id``)
    return _I64.pack(int(value))  # type: ignore[call-overload]  # ints or digits by schema


def _bool_bin_out(value: object) -> bytes:
    return b"\x01" if value else b"\x00"


def _float_bin_out(value: object) -> bytes:
    return _F64.pack(value)


def _jsonb_bin_out(value: object) -> bytes:
    return b"\x01" + _text_out(value)


def _timestamp_bin_out(value: object) -> bytes:
    return _I64.pack(int(value) * 1000 - _PG_EPOCH_US)  # type: ignore[call-overload]  # ms ints


def _void_out(_value: object) -> bytes:
    return b""


def _dumper(oid: int, fmt: int, tz: tzinfo) -> Dumper:
    if oid == TIMESTAMPTZ and fmt == 0:
        return _timestamp_text_in_zone(tz)
    return _DUMPERS[(oid, fmt)]


def dump_value(oid: int, fmt: int, value: object, tz: tzinfo = UTC) -> bytes:
    """One non-NULL value as sent in format ``fmt``; ``tz`` is the session's TimeZone."""
    return _dumper(oid, fmt, tz)(value)


def row_dumper(oids: Sequence[int], formats: Sequence[int], tz: tzinfo = UTC) -> RowDumper:
    """A function turning one row into DataRow values, fixed per (column OIDs, formats,
    session zone): the zone matters only to text timestamptz columns."""
    fns = [_dumper(oid, fmt, tz) for oid, fmt in zip(oids, formats, strict=True)]
    if len(fns) == 1:  # SELECT 1, QUEUE ADD's counts… : no generator for one column
        (only,) = fns

        def one_column(row: Sequence[Value]) -> tuple[bytes | None, ...]:
            (value,) = row
            return (None if value is None else only(value),)

        return one_column
    if all(fn is _text_out for fn in fns):

        def text_row(row: Sequence[Value]) -> tuple[bytes | None, ...]:
            return tuple([None if v is None else _text_out(v) for v in row])

        return text_row

    def dump(row: Sequence[Value]) -> tuple[bytes | None, ...]:
        return tuple([None if v is None else fn(v) for fn, v in zip(fns, row, strict=True)])

    return dump


# --- loaders (parameter bytes → values) -------------------------------------------------


def _text_in(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidTextRepresentation('invalid byte sequence for encoding "UTF8"') from None


def _jsonb_bin_in(raw: bytes) -> str:
    if not raw or raw[0] != 1:
        raise InvalidBinaryRepresentation("unsupported jsonb version number")
    return _text_in(raw[1:])


_LONG_INT = re.compile(r"[+-]?[0-9]+")


def _number_text_in(oid: int, parse: Callable[[str], int | float]) -> Loader:
    """A text-format number parameter, with PostgreSQL's 22P02 message on bad input."""

    def load(raw: bytes) -> int | float | str:
        text = _text_in(raw).strip()
        if parse is int and len(text) > MAX_INT_DIGITS and _LONG_INT.fullmatch(text):
            return text  # more digits than int() should read: its reader checks the text
        try:
            return parse(text)
        except ValueError:
            raise InvalidTextRepresentation(
                f'invalid input syntax for type {TYPE_NAMES[oid]}: "{text}"'
            ) from None

    return load


def _fixed_bin_in(unpack: struct.Struct) -> Loader:
    def load(raw: bytes) -> int | float:
        if len(raw) != unpack.size:
            raise InvalidBinaryRepresentation("incorrect binary data format in bind parameter")
        value: int | float = unpack.unpack(raw)[0]
        return value

    return load


_TRUE: Final = frozenset({"t", "true", "y", "yes", "on", "1"})
_FALSE: Final = frozenset({"f", "false", "n", "no", "off", "0"})


def _bool_text_in(raw: bytes) -> bool:
    text = _text_in(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidTextRepresentation(f'invalid input syntax for type boolean: "{text}"')


def _bool_bin_in(raw: bytes) -> bool:
    if len(raw) != 1:
        raise InvalidBinaryRepresentation("incorrect binary data format in bind parameter")
    return raw != b"\x00"


def _timestamp_text_in(raw: bytes) -> int:
    text = _text_in(raw).strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidTextRepresentation(
            f'invalid input syntax for type timestamp with time zone: "{text}"'
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(milliseconds=1)


def _timestamp_bin_in(raw: bytes) -> int:
    if len(raw) != 8:
        raise InvalidBinaryRepresentation("incorrect binary data format in bind parameter")
    return (int(_I64.unpack(raw)[0]) + _PG_EPOCH_US) // 1000


def _void_in(_raw: bytes) -> None:
    return None


def _interval_bin_in(raw: bytes) -> str:
    try:
        return interval.load_binary(raw)
    except ValueError:
        raise InvalidBinaryRepresentation("incorrect binary data format in bind parameter") from None


#: one row per type: (text dumper, binary dumper, text loader, binary loader); a loader
#: that is None: a parameter of that type in that format is not decoded here (a text one
#: reaches the grammar as its text, a binary one is 22P03)
_ADAPTERS: Final[dict[int, tuple[Dumper, Dumper, Loader | None, Loader | None]]] = {
    TEXT: (_text_out, _text_out, _text_in, _text_in),
    VARCHAR: (_text_out, _text_out, _text_in, _text_in),
    JSON: (_text_out, _text_out, _text_in, _text_in),
    JSONB: (_text_out, _jsonb_bin_out, _text_in, _jsonb_bin_in),
    UNKNOWN: (_text_out, _text_out, _text_in, _text_in),
    INT2: (_int_text_out, _int2_bin_out, _number_text_in(INT2, int), _fixed_bin_in(_I16)),
    INT4: (_int_text_out, _int4_bin_out, _number_text_in(INT4, int), _fixed_bin_in(_I32)),
    INT8: (_int_text_out, _int8_bin_out, _number_text_in(INT8, int), _fixed_bin_in(_I64)),
    BOOL: (_bool_text_out, _bool_bin_out, _bool_text_in, _bool_bin_in),
    FLOAT8: (_float_text_out, _float_bin_out, _number_text_in(FLOAT8, float),
             _fixed_bin_in(_F64)),
    TIMESTAMPTZ: (_timestamp_text_out, _timestamp_bin_out, _timestamp_text_in,
                  _timestamp_bin_in),
    VOID: (_void_out, _void_out, _void_in, _void_in),
    INTERVAL: (interval.dump_text, interval.dump_binary, None, _interval_bin_in),
    NUMERIC: (numeric.dump_text, numeric.dump_binary, None, None),
}  # fmt: skip
_DUMPERS: Final[dict[tuple[int, int], Dumper]] = {
    (oid, fmt): dumper
    for oid, (text_out, binary_out, _, _) in _ADAPTERS.items()
    for fmt, dumper in enumerate((text_out, binary_out))
}
_LOADERS: Final[dict[tuple[int, int], Loader]] = {
    (oid, fmt): loader
    for oid, (_, _, text_in, binary_in) in _ADAPTERS.items()
    for fmt, loader in enumerate((text_in, binary_in))
    if loader is not None
}


def load_param(oid: int, fmt: int, raw: bytes | None, index: int) -> ParamValue:
    """Decode parameter ``index`` (1-based) sent with type ``oid`` (0 = text-like)."""
    return None if raw is None else _param_fn(oid, fmt, index)(raw)


ParamsLoader = Callable[[Sequence[bytes | None]], tuple[ParamValue, ...]]


def _param_fn(oid: int, fmt: int, index: int) -> Loader:
    """The loader of parameter ``index`` (1-based), with its lookups done once; a
    binary one that fails says which parameter."""
    loader = _LOADERS.get((oid or UNKNOWN, fmt))
    if loader is None:
        if fmt == 0:  # any other type sent as text reaches the grammar as its text
            return _text_in
        return _unsupported_binary(oid, index)
    if loader is _text_in:  # raises InvalidTextRepresentation only: nothing to rename
        return _text_in

    def load(raw: bytes) -> ParamValue:
        try:
            return loader(raw)
        except InvalidBinaryRepresentation:
            raise InvalidBinaryRepresentation(
                f"incorrect binary data format in bind parameter {index}"
            ) from None

    return load


def _unsupported_binary(oid: int, index: int) -> Loader:
    def refuse(_raw: bytes) -> ParamValue:
        raise InvalidBinaryRepresentation(
            f"incorrect binary data format in bind parameter {index}: "
            f"type OID {oid} is not supported in binary"
        )

    return refuse


def params_loader(oids: Sequence[int], formats: Sequence[int]) -> ParamsLoader:
    """All of a Bind's parameters at once, as :func:`load_param` would decode each one;
    built once per (statement, format codes), so a Bind only runs the loaders."""
    fns = [
        _param_fn(oid, fmt, i + 1) for i, (oid, fmt) in enumerate(zip(oids, formats, strict=True))
    ]
    if not fns:
        return lambda _params: ()

    def load(params: Sequence[bytes | None]) -> tuple[ParamValue, ...]:
        return tuple(
            [None if raw is None else fn(raw) for fn, raw in zip(fns, params, strict=True)]
        )

    return load


def formats_for(codes: Sequence[int], count: int, what: str) -> tuple[int, ...]:
    """Expand a Bind format-code list (none = text, one = all, else one each)."""
    for code in codes:
        if code not in (0, 1):
            raise InvalidParameterValue(f"unsupported format code: {code}")
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return (codes[0],) * count
    if len(codes) != count:
        raise ProtocolViolation(f"bind message has {len(codes)} {what} formats but {count} {what}s")
    return tuple(codes)
