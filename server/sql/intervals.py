"""Intervals in plain SQL: reading ``interval '…'``, and timestamp arithmetic with them.

The value is :class:`cubequeue.server.pgtypes.interval.Interval` (months, days and
milliseconds, compared by PostgreSQL's span). What PostgreSQL does, and so this module:

* ``'1 day 02:00:00'``, ``'1 hour 30 minutes'``, ``'-1 days +02:00:00'``, ``'90'``
  (seconds), ``'@ 2 days ago'``; units from microseconds to millennia (``mon``, ``h``,
  ``min``… as ``DecodeInterval`` reads them); a fraction cascades down (``'1.5 months'`` is
  ``1 mon 15 days``, ``'1.5 days'`` is ``1 day 12:00:00``), kept to the millisecond;
* ``ts - ts`` is days and time (``timestamp_mi`` justifies hours into days);
* ``ts + interval`` adds months on the calendar of the session's TimeZone (the day clamped
  to the month's end), then days on that calendar (a day across a DST change is 23 or 25
  hours), then the time part (``timestamptz_pl_interval``).

Reading is one left-to-right regex scan of the text, and every number is range-checked
before it is multiplied, so the work is linear in the literal.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Final

from cubequeue.grammar.lexical import shown
from cubequeue.server.pgtypes.interval import MS_PER_DAY, Interval

from .errors import DatetimeFieldOverflow, InvalidDatetimeFormat, NumericValueOutOfRange

__all__ = ["Interval", "add_days", "add_months", "local_time", "ms_of", "parse_interval_value",
           "shift", "since"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: unit → (months, days, milliseconds) per one
_UNITS: Final[dict[str, tuple[int, int, int]]] = {}
#: unit → the field it sets; a field set twice is an error, as in PostgreSQL
_FIELD: Final[dict[str, str]] = {}
for _names, _size in (
    (("microsecond", "microseconds", "us", "usec", "usecs", "useconds"), (0, 0, 0)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs", "mseconds"), (0, 0, 1)),
    (("second", "seconds", "s", "sec", "secs"), (0, 0, 1000)),
    (("minute", "minutes", "m", "min", "mins"), (0, 0, 60_000)),
    (("hour", "hours", "h", "hr", "hrs"), (0, 0, 3_600_000)),
    (("day", "days", "d"), (0, 1, 0)),
    (("week", "weeks", "w"), (0, 7, 0)),
    (("month", "months", "mon", "mons"), (1, 0, 0)),
    (("year", "years", "y", "yr", "yrs"), (12, 0, 0)),
    (("decade", "decades", "dec", "decs"), (120, 0, 0)),
    (("century", "centuries", "c", "cent"), (1200, 0, 0)),
    (("millennium", "millennia", "mil", "mils"), (12000, 0, 0)),
):
    for _name in _names:
        _UNITS[_name] = _size
        _FIELD[_name] = _names[0]
_MICRO: Final = frozenset({"microsecond", "microseconds", "us", "usec", "usecs", "useconds"})
_TOKEN: Final = re.compile(
    r"\s*(?:"
    r"(?P<clock>[+-]?\d+:\d{1,2}(?::\d{1,2}(?:\.\d*)?)?)"
    r"|(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>[a-z]+)?"
    r"|(?P<word>@|ago)"
    r")",
    re.I,
)
#: the largest field PostgreSQL keeps (int32 months and days, int64 µs of time)
_MAX_FIELD: Final = Decimal(2**31 - 1)
_MAX_MS: Final = Decimal((2**63 - 1) // 1000)


def _invalid(text: str) -> InvalidDatetimeFormat:
    return InvalidDatetimeFormat(f'invalid input syntax for type interval: "{shown(text)}"')


def _overflow(text: str) -> NumericValueOutOfRange:
    return NumericValueOutOfRange(f'interval field value out of range: "{shown(text)}"')


def _clock_ms(clock: str) -> Decimal:
    sign = -1 if clock.startswith("-") else 1
    parts = clock.lstrip("+-").split(":")
    hours, minutes = Decimal(parts[0]), Decimal(parts[1])
    seconds = Decimal(parts[2]) if len(parts) > 2 else Decimal(0)
    if minutes >= 60 or seconds >= 60:
        raise ValueError(clock)
    return sign * ((hours * 60 + minutes) * 60 + seconds) * 1000


def parse_interval_value(text: str) -> Interval:
    """``text`` as PostgreSQL reads an interval (the common forms); 22007 otherwise."""
    months = days = ms = Decimal(0)
    pos, found, ago = 0, False, False
    seen: set[str] = set()
    end = len(text.rstrip())
    try:
        while pos < end:
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise _invalid(text)
            pos = m.end()
            if m.group("word"):
                if m.group("word").lower() == "ago":
                    if pos < end:
                        raise _invalid(text)
                    ago = True
                elif found:
                    raise _invalid(text)
                continue
            found = True
            if m.group("clock"):
                fields = {"hour", "minute", "second"}
                if seen & fields:
                    raise _invalid(text)
                seen |= fields
                ms += _clock_ms(m.group("clock"))
                continue
            number = Decimal(m.group("num"))
            if abs(number) > _MAX_MS:
                raise _overflow(text)
            unit = (m.group("unit") or "s").lower()
            size = _UNITS.get(unit)
            if size is None or _FIELD[unit] in seen:
                raise _invalid(text)
            seen.add(_FIELD[unit])
            if unit in _MICRO:
                ms += number / 1000
                continue
            mo, d, t = size
            months += number * mo
            days += number * d
            ms += number * t
    except ValueError:
        raise _invalid(text) from None
    if not found:
        raise _invalid(text)
    whole_months = int(months)  # toward zero, as PostgreSQL cascades fractions
    days += (months - whole_months) * 30
    whole_days = int(days)
    ms += (days - whole_days) * MS_PER_DAY
    if abs(whole_months) > _MAX_FIELD or abs(whole_days) > _MAX_FIELD or abs(ms) > _MAX_MS:
        raise _overflow(text)
    iv = Interval(whole_months, whole_days, int(ms.to_integral_value()))
    return -iv if ago else iv


def ms_of(dt: datetime) -> int:
    delta = dt - _EPOCH
    return delta.days * MS_PER_DAY + delta.seconds * 1000 + delta.microseconds // 1000


def local_time(ms: int, tz: tzinfo) -> datetime:
    try:
        return (_EPOCH + timedelta(milliseconds=ms)).astimezone(tz)
    except OverflowError:
        raise DatetimeFieldOverflow("timestamp out of range") from None


def add_months(ms: int, months: int, tz: tzinfo) -> int:
    """``ms`` moved by whole months on the calendar of ``tz``; the day is clamped to the
    month's last (PostgreSQL: ``'2024-01-31' + interval '1 month'`` is ``2024-02-29``)."""
    if not months:
        return ms
    local = local_time(ms, tz)
    year, month0 = divmod(local.month - 1 + months, 12)
    year += local.year
    if not 1 <= year <= 9999:
        raise DatetimeFieldOverflow("timestamp out of range")
    day = min(local.day, calendar.monthrange(year, month0 + 1)[1])
    return ms_of(local.replace(year=year, month=month0 + 1, day=day))


def add_days(ms: int, days: int, tz: tzinfo) -> int:
    """``ms`` moved by whole days on the calendar of ``tz`` (the wall-clock time kept)."""
    if not days:
        return ms
    local = local_time(ms, tz)
    try:
        moved = (local.replace(tzinfo=None) + timedelta(days=days)).replace(tzinfo=tz)
    except OverflowError:
        raise DatetimeFieldOverflow("timestamp out of range") from None
    return ms_of(moved)


#: the instants a timestamp may hold here: years 1 to 9999 (Python's datetime)
_FIRST_MS: Final = ms_of(datetime(1, 1, 2, tzinfo=UTC))
_LAST_MS: Final = ms_of(datetime(9999, 12, 30, tzinfo=UTC))


def shift(ms: int, iv: object, tz: tzinfo, sign: int = 1) -> int:
    """``ts + iv`` (``sign`` 1) or ``ts - iv`` (``sign`` -1), as PostgreSQL adds them;
    22008 past the years a timestamp holds."""
    value = Interval.of(iv)
    if sign < 0:
        value = -value
    moved = add_days(add_months(ms, value.months, tz), value.days, tz) + value.ms
    if not _FIRST_MS <= moved <= _LAST_MS:
        raise DatetimeFieldOverflow("timestamp out of range")
    return moved


def since(later: int, earlier: int) -> Interval:
    """``later - earlier`` of two timestamps."""
    return Interval.between(later - earlier)
