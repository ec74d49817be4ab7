"""PostgreSQL's functions for reading times and ages: ``date_trunc``, ``extract`` /
``date_part``, ``age``, and ``to_char`` for the common patterns (:mod:`.to_char`).

As in PostgreSQL, fields are read on the calendar of the session's ``TimeZone``, and:

* ``date_trunc(unit, ts [, zone])`` from ``microseconds`` to ``millennium`` (weeks start
  on Monday; a century starts in its year 1: 2001);
* ``extract(field FROM ts | interval)`` is ``numeric`` with PostgreSQL's scale (``second``
  ``5.123000``, ``milliseconds`` ``5123.000``, ``epoch`` ``1704103205.123000``, the rest
  whole numbers); ``date_part('field', …)`` gives the same, numeric too, where PostgreSQL
  gives ``double precision`` (the wire would print ``22`` as ``22`` either way);
* ``age(a, b)`` subtracts field by field, borrowing days from the month of the earlier
  one (``timestamptz_age``): ``1 mon 15 days``, not ``45 days``; ``age(ts)`` is
  ``age(current_date, ts)``, from today's midnight.

Each value costs a fixed amount of work; nothing here reads a wall clock (``now`` is the
store's, in :class:`.expressions.Ctx`).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Final, cast

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue
from cubequeue.grammar.results import Row, Value

from .datetime_functions import timestamp_operand
from .errors import UndefinedFunction
from .expressions import Compiled, Ctx, Scope, coerce, compile_expr
from .intervals import Interval, local_time, ms_of
from .sqltypes import SqlType, zone
from .to_char import to_char

__all__ = ["TIME_FUNCTIONS", "TIME_NODES", "age", "compile_time", "date_trunc", "extract"]

T = SqlType
_ALIASES: Final[dict[str, str]] = {}
for _field, _names in {
    "microseconds": ("microsecond", "microseconds", "us", "usec", "usecs", "useconds"),
    "milliseconds": ("millisecond", "milliseconds", "ms", "msec", "msecs", "mseconds"),
    "second": ("second", "seconds", "s", "sec", "secs"),
    "minute": ("minute", "minutes", "m", "min", "mins"),
    "hour": ("hour", "hours", "h", "hr", "hrs"),
    "day": ("day", "days", "d"),
    "week": ("week", "weeks", "w"),
    "month": ("month", "months", "mon", "mons"),
    "quarter": ("quarter", "qtr"),
    "year": ("year", "years", "y", "yr", "yrs"),
    "decade": ("decade", "decades", "dec", "decs"),
    "century": ("century", "centuries", "c", "cent"),
    "millennium": ("millennium", "millennia", "mil", "mils"),
}.items():
    for _name in _names:
        _ALIASES[_name] = _field
for _name in ("epoch", "dow", "isodow", "doy", "isoyear", "timezone", "timezone_hour",
              "timezone_minute"):
    _ALIASES[_name] = _name
_TS_NAME: Final = "timestamp with time zone"
_US_PER_HOUR: Final = 3_600_000_000
_TRUNC_UNITS: Final = ("microseconds", "milliseconds", "second", "minute", "hour", "day",
                       "week", "month", "quarter", "year", "decade", "century", "millennium")
_INTERVAL_FIELDS: Final = frozenset({*_TRUNC_UNITS, "epoch"} - {"week"})


def _unit(text: str, for_type: str) -> str:
    unit = _ALIASES.get(text.strip().lower())
    if unit is None:
        raise InvalidParameterValue(f'unit "{text.lower()}" not recognized for type {for_type}')
    return unit


def _tdiv(a: int, b: int) -> int:
    """C's integer division (toward zero), as PostgreSQL's field arithmetic does."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def to_ms(local: datetime, tz: tzinfo) -> int:
    """A wall-clock time of ``tz`` (aware or naive) as ms since the epoch."""
    return ms_of(local.replace(tzinfo=None).replace(tzinfo=tz))


def date_trunc(unit: str, ms: int, tz: tzinfo) -> int:
    """``date_trunc(unit, ts)`` on the calendar of ``tz``."""
    unit = _unit(unit, _TS_NAME)
    if unit not in _TRUNC_UNITS:
        raise InvalidParameterValue(f'unit "{unit}" not supported for type {_TS_NAME}')
    if unit in ("microseconds", "milliseconds"):
        return ms  # the store keeps milliseconds
    local = local_time(ms, tz)
    if unit == "second":
        return ms - local.microsecond // 1000
    keep = local.replace(microsecond=0, second=0)
    if unit == "minute":
        return to_ms(keep, tz)
    keep = keep.replace(minute=0)
    if unit == "hour":
        return to_ms(keep, tz)
    keep = keep.replace(hour=0)
    if unit == "week":  # ISO weeks start on Monday
        return to_ms(datetime.fromordinal(keep.toordinal() - keep.weekday()), tz)
    if unit == "day":
        return to_ms(keep, tz)
    keep = keep.replace(day=1)
    if unit == "quarter":
        keep = keep.replace(month=(keep.month - 1) // 3 * 3 + 1)
    elif unit != "month":
        year = keep.year
        if unit == "decade":
            year = year // 10 * 10
        elif unit == "century":
            year = (year - 1) // 100 * 100 + 1
        elif unit == "millennium":
            year = (year - 1) // 1000 * 1000 + 1
        keep = keep.replace(year=year, month=1)
    return to_ms(keep, tz)


def _scaled(units: int, scale: int) -> Decimal:
    """``units`` × 10^-scale with exactly ``scale`` digits after the point."""
    return Decimal(units).scaleb(-scale) if scale else Decimal(units)


def _timestamp_field(field: str, ms: int, tz: tzinfo) -> Decimal:
    if field == "epoch":
        return _scaled(ms * 1000, 6)
    local = local_time(ms, tz)
    us = local.second * 1_000_000 + local.microsecond
    if field in ("microseconds", "milliseconds", "second"):
        return _scaled(us, {"microseconds": 0, "milliseconds": 3, "second": 6}[field])
    year = local.year
    offset = local.utcoffset()
    off_s = 0 if offset is None else int(offset.total_seconds())
    iso = local.isocalendar()
    value = {
        "minute": local.minute, "hour": local.hour, "day": local.day, "month": local.month,
        "year": year, "quarter": (local.month - 1) // 3 + 1, "week": iso[1],
        "isoyear": iso[0], "dow": local.isoweekday() % 7, "isodow": local.isoweekday(),
        "doy": local.timetuple().tm_yday, "decade": year // 10,
        "century": (year + 99) // 100, "millennium": (year + 999) // 1000,
        "timezone": off_s, "timezone_hour": _tdiv(off_s, 3600),
        "timezone_minute": _tdiv(off_s, 60) - _tdiv(off_s, 3600) * 60,
    }[field]
    return Decimal(value)


def _interval_field(field: str, iv: Interval) -> Decimal:
    if field not in _INTERVAL_FIELDS:
        raise FeatureNotSupported(f'unit "{field}" not supported for type interval')
    time_us = iv.ms * 1000
    if field == "epoch":
        years, months = _tdiv(iv.months, 12), iv.months - _tdiv(iv.months, 12) * 12
        quarter_days = 1461 * years + 120 * months + 4 * iv.days  # 365.25 and 30, ×4
        return _scaled(time_us + quarter_days * 21_600 * 1_000_000, 6)
    sec_us = time_us - _tdiv(time_us, 60_000_000) * 60_000_000
    if field in ("microseconds", "milliseconds", "second"):
        return _scaled(sec_us, {"microseconds": 0, "milliseconds": 3, "second": 6}[field])
    year = _tdiv(iv.months, 12)
    month = iv.months - year * 12
    minutes = _tdiv(time_us, 60_000_000)
    value = {
        "minute": minutes - _tdiv(minutes, 60) * 60, "hour": _tdiv(time_us, _US_PER_HOUR),
        "day": iv.days, "month": month, "quarter": _tdiv(month, 3) + 1, "year": year,
        "decade": _tdiv(year, 10), "century": _tdiv(year, 100),
        "millennium": _tdiv(year, 1000),
    }[field]
    return Decimal(value)


def extract(field: str, value: object, of_interval: bool, tz: tzinfo) -> Decimal:
    """``extract(field FROM value)`` of a timestamp (ms) or an interval."""
    field = _unit(field, "interval" if of_interval else _TS_NAME)
    if of_interval:
        return _interval_field(field, Interval.of(value))
    assert isinstance(value, int)
    return _timestamp_field(field, value, tz)


def age(later: int, earlier: int, tz: tzinfo) -> Interval:
    """PostgreSQL's ``age(a, b)``: field-wise difference, borrowing from the calendar."""
    t1, t2 = local_time(later, tz), local_time(earlier, tz)
    sign = -1 if later < earlier else 1
    diff = [t1.microsecond - t2.microsecond, t1.second - t2.second, t1.minute - t2.minute,
            t1.hour - t2.hour, t1.day - t2.day, t1.month - t2.month, t1.year - t2.year]
    diff = [sign * d for d in diff]
    carries = (1_000_000, 60, 60, 24)
    for i, base in enumerate(carries):
        while diff[i] < 0:
            diff[i] += base
            diff[i + 1] -= 1
    first = t1 if sign < 0 else t2  # the earlier one's month lends its days
    month_days = calendar.monthrange(first.year, first.month)[1]
    while diff[4] < 0:
        diff[4] += month_days
        diff[5] -= 1
    while diff[5] < 0:
        diff[5] += 12
        diff[6] -= 1
    us, sec, minute, hour, day, month, year = (sign * d for d in diff)
    ms = ((hour * 60 + minute) * 60 + sec) * 1000 + _tdiv(us, 1000)
    return Interval(year * 12 + month, day, ms)


def _numeric(value: Decimal) -> Value:
    return cast(Value, value)  # see sqltypes._numeric: a Decimal row value, by type


def _age(args: list[Compiled], scope: Scope) -> Compiled:
    ts = [timestamp_operand(a, scope, "age").fn for a in args]
    const = all(a.const for a in args)
    if len(ts) == 1:
        (of,) = ts

        def run_today(row: Row, ctx: Ctx) -> Value:
            v = of(row, ctx)
            if v is None:
                return None
            return age(date_trunc("day", ctx.now_ms, ctx.tz), int(v), ctx.tz)

        return Compiled(run_today, T.INTERVAL, "age", const=const)
    a, b = ts

    def run(row: Row, ctx: Ctx) -> Value:
        x, y = a(row, ctx), b(row, ctx)
        return None if x is None or y is None else age(int(x), int(y), ctx.tz)

    return Compiled(run, T.INTERVAL, "age", const=const)


def _date_part(args: list[Compiled], scope: Scope) -> Compiled:
    """``date_part('field', ts | interval)``: ``extract``, the field given as text."""
    field_arg, arg = args
    field = coerce(field_arg, T.TEXT, scope) if field_arg.type is T.UNKNOWN else field_arg
    if field.type is not T.TEXT:
        raise UndefinedFunction(f"function date_part({field.type.pg_name}, "
                                f"{arg.type.pg_name}) does not exist")
    of_interval = arg.type is T.INTERVAL
    if not of_interval:
        arg = timestamp_operand(arg, scope, "date_part")
    if field.literal is not None and field.literal[0] is not None:
        _unit(str(field.literal[0]), "interval" if of_interval else _TS_NAME)
    ff, f = field.fn, arg.fn

    def run(row: Row, ctx: Ctx) -> Value:
        name, v = ff(row, ctx), f(row, ctx)
        if name is None or v is None:
            return None
        return _numeric(extract(str(name), v, of_interval, ctx.tz))

    return Compiled(run, T.NUMERIC, "date_part", const=field.const and arg.const)


def _to_char(args: list[Compiled], scope: Scope) -> Compiled:
    """``to_char(ts, format)`` in the session's TimeZone (:mod:`.to_char`)."""
    value, fmt_arg = args
    if value.type is T.INTERVAL or value.type.is_number:
        raise FeatureNotSupported(f"to_char({value.type.pg_name}, text) is not supported",
                                  hint="to_char formats timestamps here.")
    ts = timestamp_operand(value, scope, "to_char")
    fmt = coerce(fmt_arg, T.TEXT, scope) if fmt_arg.type is T.UNKNOWN else fmt_arg
    if fmt.type is not T.TEXT:
        raise UndefinedFunction(f"function to_char({ts.type.pg_name}, {fmt.type.pg_name}) "
                                "does not exist")
    if fmt.literal is not None and fmt.literal[0] is not None:
        to_char(datetime(2000, 1, 1), str(fmt.literal[0]))  # an unanswered pattern: now
    f, ff = ts.fn, fmt.fn

    def run(row: Row, ctx: Ctx) -> Value:
        v, text = f(row, ctx), ff(row, ctx)
        if v is None or text is None:
            return None
        return to_char(local_time(int(v), ctx.tz), str(text))

    return Compiled(run, T.TEXT, "to_char", const=ts.const and fmt.const)


#: functions called by name → (argument counts, builder)
TIME_FUNCTIONS: Final = {"age": (range(1, 3), _age), "date_part": (range(2, 3), _date_part),
                         "to_char": (range(2, 3), _to_char)}
#: sqlglot's nodes for these functions → PostgreSQL's column name
TIME_NODES: Final[dict[type[exp.Expr], str]] = {
    exp.TimestampTrunc: "date_trunc", exp.Extract: "extract", exp.TimeToStr: "to_char",
}


def _word(node: exp.Expr | None) -> str:
    """A unit sqlglot read as a word (``Var``) or kept as a string literal."""
    if isinstance(node, exp.Var | exp.Literal):
        return str(node.name)
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    raise FeatureNotSupported("the unit must be written in the statement (a literal)")


_UTC_NAMES: Final = frozenset({"UTC", "GMT", "Z", "ZULU", "ETC/UTC", "UCT", "UNIVERSAL",
                               "ETC/GMT"})
_OFFSET: Final = re.compile(r"\s*[+-]?\d{1,2}(?::?\d\d)?\s*")


@lru_cache(maxsize=64)
def _named_zone(name: str) -> tzinfo:
    """``date_trunc``'s third argument; an unknown zone is 22023, as in PostgreSQL."""
    tz = zone(name)
    if tz is UTC and name.strip().upper() not in _UTC_NAMES and not _OFFSET.fullmatch(name):
        raise InvalidParameterValue(f'time zone "{name}" not recognized')
    return tz


def _date_trunc(node: exp.TimestampTrunc, scope: Scope) -> Compiled:
    unit = _word(node.args.get("unit"))
    _unit(unit, _TS_NAME)  # 22023 at plan time, as a literal is read then
    ts = timestamp_operand(compile_expr(node.this, scope), scope, "date_trunc")
    f = ts.fn
    zone_node = node.args.get("zone")
    zone_fn = None if zone_node is None else coerce(compile_expr(zone_node, scope), T.TEXT,
                                                    scope).fn

    def run(row: Row, ctx: Ctx) -> Value:
        v = f(row, ctx)
        if v is None:
            return None
        tz = ctx.tz
        if zone_fn is not None:
            name = zone_fn(row, ctx)
            if name is None:
                return None
            tz = _named_zone(str(name))
        return date_trunc(unit, int(v), tz)

    return Compiled(run, T.TIMESTAMPTZ, "date_trunc", const=ts.const)


def _extract(node: exp.Extract, scope: Scope) -> Compiled:
    field = _word(node.this)
    arg = compile_expr(node.expression, scope)
    of_interval = arg.type is T.INTERVAL
    if not of_interval:
        arg = timestamp_operand(arg, scope, "extract")
    _unit(field, "interval" if of_interval else _TS_NAME)
    f = arg.fn

    def run(row: Row, ctx: Ctx) -> Value:
        v = f(row, ctx)
        return None if v is None else _numeric(extract(field, v, of_interval, ctx.tz))

    return Compiled(run, T.NUMERIC, "extract", const=arg.const)


def compile_time(node: exp.Expr, scope: Scope) -> Compiled | None:
    """The evaluator of a time-function node sqlglot built, or None."""
    if isinstance(node, exp.TimestampTrunc):
        return _date_trunc(node, scope)
    if isinstance(node, exp.Extract):
        return _extract(node, scope)
    if isinstance(node, exp.TimeToStr):  # a strftime-style call sqlglot built
        raise FeatureNotSupported(
            "this time formatting function is not supported",
            hint="to_char(ts, 'YYYY-MM-DD HH24:MI:SS') formats a timestamp.")
    return None
