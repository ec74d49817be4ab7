"""The handful of SQL types plain SQL evaluates, and text ↔ value conversions.

Values stay Python values end to end: ``int`` for int4/int8 and for timestamptz (ms since
the epoch, as the store keeps time, ``docs/dialect.md`` §8 rule 11), ``str`` for text,
``bool`` for bool, :class:`.intervals.Interval` (an ``int``: months, days and ms) for
interval, the JSON text for json and jsonb (:mod:`.json_values`); UNKNOWN is an untyped string literal or NULL, which
takes the type of what it meets, as in PostgreSQL. A timestamptz becomes text through
:func:`cubequeue.server.timestamps.format_timestamptz`, the formatter the wire uses too,
so ``created`` and ``created::text`` read alike in one row.
"""

from __future__ import annotations

import enum
import math
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import cast

from cubequeue.grammar.errors import InvalidTextRepresentation
from cubequeue.grammar.lexical import bounded_int, shown
from cubequeue.grammar.results import ColumnType, Value
from cubequeue.server.pgtypes import oids
from cubequeue.server.pgtypes.numeric import numeric_text
from cubequeue.server.timestamps import EPOCH, format_timestamptz, session_zone

from .errors import (
    CannotCoerce,
    DatetimeFieldOverflow,
    InvalidDatetimeFormat,
    NumericValueOutOfRange,
)
from .intervals import Interval, parse_interval_value
from .json_values import check_json, to_jsonb

__all__ = ["SqlType", "cast_value", "format_timestamp", "parse_interval", "parse_timestamp", "zone"]

#: the session TimeZone as a tzinfo (UTC when unknown); one definition, in timestamps
zone = session_zone
#: PostgreSQL's ISO text of a timestamptz in a zone; one definition, in timestamps
format_timestamp = format_timestamptz


class SqlType(enum.Enum):
    INT4 = ("integer", oids.INT4, ColumnType.INT)
    INT8 = ("bigint", oids.INT8, ColumnType.INT)
    TEXT = ("text", oids.TEXT, ColumnType.STRING)
    BOOL = ("boolean", oids.BOOL, ColumnType.BOOLEAN)
    TIMESTAMPTZ = ("timestamp with time zone", oids.TIMESTAMPTZ, ColumnType.TIMESTAMP)
    VOID = ("void", oids.VOID, ColumnType.STRING)
    #: an interval travels as text over the WebSocket (its str() is PostgreSQL's text)
    INTERVAL = ("interval", oids.INTERVAL, ColumnType.STRING)
    JSON = ("json", oids.JSON, ColumnType.STRING)
    JSONB = ("jsonb", oids.JSONB, ColumnType.STRING)
    #: EXTRACT's result: a Decimal with PostgreSQL's scale (compares with integers)
    NUMERIC = ("numeric", oids.NUMERIC, ColumnType.STRING)
    UNKNOWN = ("unknown", oids.TEXT, ColumnType.STRING)

    def __init__(self, pg_name: str, oid: int, column_type: ColumnType) -> None:
        self.pg_name = pg_name
        self.oid = oid
        self.column_type = column_type

    @property
    def is_int(self) -> bool:
        return self in (SqlType.INT4, SqlType.INT8)

    @property
    def is_number(self) -> bool:
        return self in (SqlType.INT4, SqlType.INT8, SqlType.NUMERIC)


_INT_RANGE = {SqlType.INT4: (-(2**31), 2**31 - 1), SqlType.INT8: (-(2**63), 2**63 - 1)}
_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*$")


def check_int(value: int, t: SqlType) -> int:
    lo, hi = _INT_RANGE[t]
    if not lo <= value <= hi:
        raise NumericValueOutOfRange(f"{t.pg_name} out of range")
    return value


def _text_to_int(text: str, t: SqlType) -> int:
    if not _INT_TEXT.match(text):
        raise InvalidTextRepresentation(f'invalid input syntax for type {t.pg_name}: "{text}"')
    n = bounded_int(text.strip())  # never int() of 4,300 digits: lexical.MAX_INT_DIGITS
    lo, hi = _INT_RANGE[t]
    if not lo <= n <= hi:
        raise NumericValueOutOfRange(
            f'value "{shown(text.strip())}" is out of range for type {t.pg_name}')
    return n


def _text_to_bool(text: str) -> bool:
    v = text.strip().lower()
    if v and (("true".startswith(v) or "yes".startswith(v)) or v in ("on", "1")):
        return True
    if v and ("false".startswith(v) or "no".startswith(v) or v in ("off", "of", "0")):
        return False
    raise InvalidTextRepresentation(f'invalid input syntax for type boolean: "{text}"')


_TS = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d\d)(?::(\d\d)(?:\.(\d{1,6}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d\d)?)?\s*$",
    re.I,
)


def parse_timestamp(text: str, tz: tzinfo, now_ms: int) -> int:
    """ISO 8601 / PostgreSQL input (``2026-01-01``, ``2026-01-01 10:00:00.5+02``, ``now``)."""
    low = text.strip().lower()
    if low == "now":
        return now_ms
    if low == "epoch":
        return 0
    m = _TS.match(text)
    if not m:
        raise InvalidDatetimeFormat(
            f'invalid input syntax for type timestamp with time zone: "{text}"'
        )
    y, mo, d, h, mi, s, frac, off = m.groups()
    try:
        dt = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0),
                      int((frac or "0").ljust(6, "0")))
    except ValueError:
        raise DatetimeFieldOverflow(
            f'date/time field value out of range: "{text}"'
        ) from None
    if off is None:
        dt = dt.replace(tzinfo=tz)
    elif off.upper() in ("Z", "UTC"):
        dt = dt.replace(tzinfo=UTC)
    else:
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        hours, minutes = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
        dt = dt.replace(tzinfo=timezone(sign * timedelta(hours=hours, minutes=minutes)))
    delta = dt - EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


_IV_UNITS = {
    "ms": 1, "msec": 1, "msecs": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hrs": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000,
}
_IV_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-z]+)?", re.I)
_IV_CLOCK = re.compile(r"\s*([+-])?(\d+):(\d\d)(?::(\d\d(?:\.\d+)?))?\s*$")


def parse_interval(text: str) -> int:
    """``5 minutes``, ``1 hour 30 min``, ``00:05:00``, ``90`` (seconds) → milliseconds."""
    m = _IV_CLOCK.match(text)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        secs = bounded_int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4) or 0)
        return _interval_ms(sign * secs * 1000, text)
    total, pos, found = 0.0, 0, False
    stripped = text.rstrip()
    while pos < len(stripped):
        p = _IV_PART.match(stripped, pos)
        if not p or p.end() == pos:
            break
        unit = (p.group(2) or "s").lower()
        if unit not in _IV_UNITS:
            break
        total += float(p.group(1)) * _IV_UNITS[unit]
        pos, found = p.end(), True
    if not found or pos != len(stripped):
        raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{text}"')
    return _interval_ms(total, text)


def _interval_ms(ms: float, text: str) -> int:
    """``ms`` rounded, or 22003 past bigint (hundreds of digits make ``inf``)."""
    if not math.isfinite(ms) or abs(ms) > 2**63 - 1:
        raise NumericValueOutOfRange(f'interval field value out of range: "{shown(text)}"')
    return round(ms)


_NUMERIC_TEXT = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?\s*$")


def _text_to_numeric(text: str) -> Decimal:
    if not _NUMERIC_TEXT.match(text):
        raise InvalidTextRepresentation(f'invalid input syntax for type numeric: "{shown(text)}"')
    d = Decimal(text.strip())
    if abs(d.adjusted()) > 1000:
        raise NumericValueOutOfRange("value overflows numeric format")
    return d


def _numeric(value: Decimal) -> Value:
    """A numeric as a row value: rows hold ``str | int | bool | None`` to their type, and
    a Decimal is an honest number to every comparison and sort, so it is passed as one."""
    return cast(Value, value)


def cast_value(value: Value, src: SqlType, dst: SqlType, tz: tzinfo, now_ms: int) -> Value:
    """``value::dst`` with PostgreSQL's errors; NULL stays NULL."""
    if value is None or src is dst:
        return value
    if src in (SqlType.TEXT, SqlType.UNKNOWN):
        text = str(value)
        if dst.is_int:
            return _text_to_int(text, dst)
        if dst is SqlType.BOOL:
            return _text_to_bool(text)
        if dst is SqlType.TIMESTAMPTZ:
            return parse_timestamp(text, tz, now_ms)
        if dst is SqlType.INTERVAL:
            return parse_interval_value(text)
        if dst is SqlType.JSON:
            return check_json(text)
        if dst is SqlType.JSONB:
            return to_jsonb(text)
        if dst is SqlType.NUMERIC:
            return _numeric(_text_to_numeric(text))
        if dst in (SqlType.TEXT, SqlType.UNKNOWN):
            return text
    if src is SqlType.JSON and dst is SqlType.JSONB:
        return to_jsonb(str(value))
    if src in (SqlType.JSON, SqlType.JSONB) and dst in (SqlType.JSON, SqlType.TEXT,
                                                        SqlType.UNKNOWN):
        return value
    if dst in (SqlType.TEXT, SqlType.UNKNOWN):
        if src is SqlType.BOOL:
            return "true" if value else "false"
        if src is SqlType.TIMESTAMPTZ:
            assert isinstance(value, int)
            return format_timestamptz(value, tz)
        if src.is_int:
            return str(value)
        if src is SqlType.INTERVAL:
            assert isinstance(value, int)
            return str(Interval.of(value))
        if src is SqlType.NUMERIC:
            return numeric_text(Decimal(value))
    if src is SqlType.NUMERIC and dst.is_int:
        rounded = Decimal(value).to_integral_value(ROUND_HALF_UP)  # away from zero
        return check_int(int(rounded), dst)
    if src.is_int and dst is SqlType.NUMERIC:
        return value
    if src.is_int and dst.is_int:
        assert isinstance(value, int)
        return check_int(value, dst)
    if src is SqlType.INT4 and dst is SqlType.BOOL:
        return bool(value)
    if src is SqlType.BOOL and dst is SqlType.INT4:
        return int(bool(value))
    raise CannotCoerce(f"cannot cast type {src.pg_name} to {dst.pg_name}")
