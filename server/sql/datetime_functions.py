"""The Cube Store time functions Cube puts in refresh keys, and FLOOR/CEIL over integers.

Cube compiles every refresh key in Cube Store's dialect when Cube Store is configured
(``CubeStoreQuery`` and ``BaseQuery`` of ``@cubejs-backend/schema-compiler``, 0.35 and 1.x:
``everyRefreshKeySql``, ``incrementalRefreshKey``, ``unixTimestampSql``, ``timeStampCast``,
``convertTz``, ``addInterval``/``subtractInterval``), for example::

    SELECT FLOOR((3600 + UNIX_TIMESTAMP() - 28800) / 86400) as refresh_key
    SELECT CASE WHEN NOW() < DATE_ADD(CAST('2024-01-31T23:59:59.999' as TIMESTAMP),
                                      INTERVAL '1 DAY') THEN FLOOR((UNIX_TIMESTAMP()) / 3600) END
           as refresh_key

Result types, as Cube Store (DataFusion) answers them: ``UNIX_TIMESTAMP()`` is int8
seconds of the store's clock; ``FLOOR``/``CEIL`` of an integer keep its integer type (an
integer division already truncated, so the key prints without a decimal point);
``CONVERT_TZ``, ``DATE_ADD``, ``DATE_SUB`` and ``TO_TIMESTAMP`` are timestamps. Every
clock reading comes from :class:`.expressions.Ctx` ``now_ms``, the store's clock, so
``SYS CLOCK ADVANCE`` moves refresh keys under ``--test-clock``. Pure: no wall clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue
from cubequeue.grammar.results import Row, Value

from .errors import UndefinedFunction
from .expressions import Compiled, Ctx, Scope, coerce, compile_expr
from .intervals import add_months, shift
from .sqltypes import SqlType, cast_value, check_int, parse_interval

__all__ = [
    "ANONYMOUS", "NODE_NAMES", "add_months", "compile_typed", "parse_calendar_interval",
    "timestamp_operand",
]

T = SqlType
MS_PER_S: Final = 1000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MONTH_UNITS: Final = {"year": 12, "years": 12, "y": 12, "quarter": 3, "quarters": 3,
                       "month": 1, "months": 1, "mon": 1, "mons": 1}
_PART: Final = re.compile(r"\s*([+-]?\d+)\s*([A-Za-z]+)")
_OFFSET: Final = re.compile(r"([+-])(\d{1,2}):?(\d\d)")
#: output column names of the sqlglot nodes handled here (PostgreSQL's FigureColname).
NODE_NAMES: Final[dict[type[exp.Expr], str]] = {
    exp.Floor: "floor", exp.Ceil: "ceil", exp.DateAdd: "date_add", exp.DateSub: "date_sub",
    exp.UnixToTime: "to_timestamp",
}


def parse_calendar_interval(text: str) -> tuple[int, int]:
    """``'1 YEAR 2 MONTH'``, ``'3 DAY 4 HOUR'`` → (months, milliseconds).

    Years, quarters and months are calendar units (Cube's ``formatInterval`` emits them);
    everything else goes through the fixed-length interval reader."""
    months, rest, pos = 0, [], 0
    for m in _PART.finditer(text):
        if text[pos:m.start()].strip():
            break
        pos = m.end()
        unit = m.group(2).lower()
        if unit in _MONTH_UNITS:
            months += int(m.group(1)) * _MONTH_UNITS[unit]
        else:
            rest.append(f"{m.group(1)} {unit}")
    if text[pos:].strip() or (not rest and pos == 0):
        return 0, parse_interval(text)  # '00:05:00', '90': or its 22007 error
    return months, parse_interval(" ".join(rest)) if rest else 0


def timestamp_operand(c: Compiled, scope: Scope, what: str) -> Compiled:
    """``c`` as a timestamptz argument of function ``what``, as PostgreSQL resolves it:
    an untyped literal is read as one; any other type has no such function (42883)."""
    if c.type in (T.TIMESTAMPTZ, T.UNKNOWN):
        return coerce(c, T.TIMESTAMPTZ, scope)
    raise UndefinedFunction(
        f"function {what}({c.type.pg_name}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


def _unix_timestamp(args: list[Compiled], scope: Scope) -> Compiled:
    if not args:
        return Compiled(lambda row, ctx: ctx.now_ms // MS_PER_S, T.INT8, "unix_timestamp",
                        const=True)
    ts = timestamp_operand(args[0], scope, "unix_timestamp").fn

    def run(row: Row, ctx: Ctx) -> Value:
        v = ts(row, ctx)
        return None if v is None else int(v) // MS_PER_S

    return Compiled(run, T.INT8, "unix_timestamp", const=args[0].const)


def _offset_ms(text: str) -> int:
    if text.strip().upper() in ("UTC", "Z", "GMT"):
        return 0
    m = _OFFSET.fullmatch(text.strip())
    if m is None:
        raise InvalidParameterValue(
            f'time zone offset "{text}" is not recognized',
            hint="CONVERT_TZ takes an offset such as '+03:00' or '-05:30', as Cube sends it.",
        )
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3_600_000 + int(m.group(3)) * 60_000)


def _convert_tz(args: list[Compiled], scope: Scope) -> Compiled:
    """Cube Store's ``CONVERT_TZ(ts, '+HH:MM')``: the UTC timestamp moved by the offset
    (what ``CubeStoreQuery.convertTz`` emits); MySQL's ``(ts, from, to)`` also works."""
    ts = timestamp_operand(args[0], scope, "convert_tz").fn
    offsets = [coerce(a, T.TEXT, scope).fn for a in args[1:]]

    def run(row: Row, ctx: Ctx) -> Value:
        v = ts(row, ctx)
        texts = [f(row, ctx) for f in offsets]
        if v is None or any(t is None for t in texts):
            return None
        shift = _offset_ms(str(texts[-1]))
        if len(texts) == 2:
            shift -= _offset_ms(str(texts[0]))
        return int(v) + shift

    return Compiled(run, T.TIMESTAMPTZ, "convert_tz", const=all(a.const for a in args))


#: function name → (accepted argument counts, builder); looked up by :mod:`.scalars`.
ANONYMOUS: Final[dict[str, tuple[range, Callable[[list[Compiled], Scope], Compiled]]]] = {
    "unix_timestamp": (range(2), _unix_timestamp),
    "convert_tz": (range(2, 4), _convert_tz),
}


def _round_int(node: exp.Floor | exp.Ceil, scope: Scope) -> Compiled:
    name = NODE_NAMES[type(node)]
    if node.args.get("decimals") is not None:
        raise FeatureNotSupported(f"{name}() takes one argument")
    arg = compile_expr(node.this, scope)
    if arg.type is T.UNKNOWN:
        arg = coerce(arg, T.INT8, scope)
    if not arg.type.is_int:
        raise UndefinedFunction(
            f"function {name}({arg.type.pg_name}) does not exist",
            hint="cubequeue evaluates integers only: FLOOR/CEIL of an integer expression.",
        )
    return Compiled(arg.fn, arg.type, name, const=arg.const)


def _date_shift(node: exp.DateAdd | exp.DateSub, scope: Scope) -> Compiled:
    name = NODE_NAMES[type(node)]
    sign = 1 if isinstance(node, exp.DateAdd) else -1
    ts = timestamp_operand(compile_expr(node.this, scope), scope, name)
    iv = node.expression
    if isinstance(iv, exp.Interval) and isinstance(iv.this, exp.Literal):
        unit = iv.args.get("unit")
        months, ms = parse_calendar_interval(f"{iv.this.name} {unit.name}" if unit else iv.this.name)
        months, ms = sign * months, sign * ms
        f = ts.fn

        def run(row: Row, ctx: Ctx) -> Value:
            v = f(row, ctx)
            return None if v is None else add_months(int(v), months, ctx.tz) + ms

        return Compiled(run, T.TIMESTAMPTZ, name, const=ts.const)
    interval = compile_expr(iv, scope)
    if interval.type is T.UNKNOWN:
        interval = coerce(interval, T.INTERVAL, scope)
    if interval.type is not T.INTERVAL:
        raise UndefinedFunction(f"function {name}(timestamp, {interval.type.pg_name}) does not exist")
    a, b = ts.fn, interval.fn

    def run_expr(row: Row, ctx: Ctx) -> Value:
        x, y = a(row, ctx), b(row, ctx)
        # y, not int(y): an Interval keeps its calendar months and days
        return None if x is None or y is None else shift(int(x), y, ctx.tz, sign)

    return Compiled(run_expr, T.TIMESTAMPTZ, name, const=ts.const and interval.const)


def _to_timestamp(node: exp.UnixToTime, scope: Scope) -> Compiled:
    """``TO_TIMESTAMP(seconds)`` (PostgreSQL) or ``TO_TIMESTAMP('2024-01-01T00:00:00.000')``
    (Cube Store's ``timeStampParam``/``dateTimeCast``: text read in the session TimeZone)."""
    arg = compile_expr(node.this, scope)
    f, src = arg.fn, arg.type
    if src.is_int:
        def run_int(row: Row, ctx: Ctx) -> Value:
            v = f(row, ctx)
            return None if v is None else check_int(int(v) * MS_PER_S, T.INT8)

        return Compiled(run_int, T.TIMESTAMPTZ, "to_timestamp", const=arg.const)
    if src not in (T.TEXT, T.UNKNOWN, T.TIMESTAMPTZ):
        raise UndefinedFunction(f"function to_timestamp({src.pg_name}) does not exist")

    def run(row: Row, ctx: Ctx) -> Value:
        return cast_value(f(row, ctx), src, T.TIMESTAMPTZ, ctx.tz, ctx.now_ms)

    return Compiled(run, T.TIMESTAMPTZ, "to_timestamp", const=arg.const)


def compile_typed(node: exp.Expr, scope: Scope) -> Compiled | None:
    """The evaluator of a node this module owns, or None when it is not one of them."""
    if isinstance(node, exp.Floor | exp.Ceil):
        return _round_int(node, scope)
    if isinstance(node, exp.DateAdd | exp.DateSub):
        return _date_shift(node, scope)
    if isinstance(node, exp.UnixToTime):
        if node.args.get("scale") is not None or node.args.get("format") is not None:
            raise FeatureNotSupported("to_timestamp(text, format) is not supported")
        return _to_timestamp(node, scope)
    return None
