"""PostgreSQL's ``interval`` as plain SQL computes it and the wire sends it (OID 1186).

An interval is three fields, as in PostgreSQL (``src/include/datatype/timestamp.h``):
months, days and a time part (here in milliseconds, the store's clock resolution). The
value is an ``int`` subclass whose integer is PostgreSQL's comparison span
(``interval_cmp_value``: a month is 30 days, a day 24 hours), so ``=``, ``<``, ORDER BY,
DISTINCT and GROUP BY need no special case (``interval '1 day' = interval '24 hours'`` is
true, as there), while the fields are kept for output and for calendar arithmetic
(``ts + interval '1 month'`` moves the calendar, not 30 days). The rows stay plain
``int`` values to everything that does not ask.

Text output is ``IntervalStyle = postgres`` (``EncodeInterval``): ``1 year 2 mons
-3 days +04:05:06.5``, ``00:01:30.5``, ``-1 days -02:00:00``; the binary form is
``int64 microseconds, int32 days, int32 months``.
"""

from __future__ import annotations

import struct
from typing import Final

from cubequeue.grammar.errors import QueueError

__all__ = ["MS_PER_DAY", "Interval", "IntervalOutOfRange", "dump_binary", "dump_text",
           "format_interval", "load_binary"]

MS_PER_DAY: Final = 86_400_000
_BINARY = struct.Struct("!qii")
_INT32: Final = 2**31 - 1
#: the time part's bound: PostgreSQL keeps it as int64 microseconds
_MAX_MS: Final = (2**63 - 1) // 1000


class IntervalOutOfRange(QueueError, sqlstate="22008"):
    """An interval whose months or days leave int32, or its time int64 microseconds."""


class Interval(int):
    """months, days and milliseconds; ``int(self)`` is the comparison span in ms."""

    months: int
    days: int
    ms: int

    def __new__(cls, months: int = 0, days: int = 0, ms: int = 0) -> Interval:
        if abs(months) > _INT32 or abs(days) > _INT32 or abs(ms) > _MAX_MS:
            raise IntervalOutOfRange("interval out of range")
        self = super().__new__(cls, (months * 30 + days) * MS_PER_DAY + ms)
        self.months, self.days, self.ms = months, days, ms
        return self

    @classmethod
    def of(cls, value: object) -> Interval:
        """An interval as given, or a plain span in ms as timestamp subtraction makes it
        (whole days as days: ``interval_justify_hours``)."""
        if isinstance(value, Interval):
            return value
        if isinstance(value, int):
            return cls.between(value)
        raise TypeError(f"not an interval: {value!r}")

    @classmethod
    def between(cls, ms: int) -> Interval:
        """``ts1 - ts2`` of a difference of ``ms``: days and the rest, one sign
        (PostgreSQL's ``timestamp_mi``, which justifies hours into days)."""
        days = abs(ms) // MS_PER_DAY * (1 if ms >= 0 else -1)
        return cls(0, days, ms - days * MS_PER_DAY)

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.ms)

    def plus(self, other: Interval) -> Interval:
        return Interval(self.months + other.months, self.days + other.days, self.ms + other.ms)

    def times(self, factor: int) -> Interval:
        return Interval(self.months * factor, self.days * factor, self.ms * factor)

    def __str__(self) -> str:
        return format_interval(self.months, self.days, self.ms)

    def __repr__(self) -> str:
        return f"Interval({self.months}, {self.days}, {self.ms})"

    def __reduce__(self) -> tuple[type[Interval], tuple[int, int, int]]:
        return Interval, (self.months, self.days, self.ms)


def _part(value: int, unit: str, out: list[str], before: list[bool]) -> None:
    """``AddPostgresIntPart``: ``+`` when the field before was negative."""
    if value == 0:
        return
    plus = "+" if before[0] and value > 0 else ""
    out.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
    before[0] = value < 0


def format_interval(months: int, days: int, ms: int) -> str:
    """PostgreSQL's text of an interval in ``IntervalStyle = postgres``."""
    out: list[str] = []
    before = [False]
    years = abs(months) // 12 * (1 if months >= 0 else -1)  # C division truncates
    _part(years, "year", out, before)
    _part(months - years * 12, "mon", out, before)
    _part(days, "day", out, before)
    if not out or ms:
        sign = "-" if ms < 0 else "+" if before[0] else ""
        whole, frac = divmod(abs(ms), 1000)
        minutes, seconds = divmod(whole, 60)
        hours, minutes = divmod(minutes, 60)
        clock = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
        if frac:
            clock += "." + f"{frac:03d}".rstrip("0")
        out.append(clock)
    return " ".join(out)


def dump_text(value: object) -> bytes:
    """The wire's text form of an interval value (an :class:`Interval`, or a span in ms)."""
    return str(Interval.of(value)).encode("ascii")


def dump_binary(value: object) -> bytes:
    iv = Interval.of(value)
    return _BINARY.pack(iv.ms * 1000, iv.days, iv.months)


def load_binary(raw: bytes) -> str:
    """A binary interval parameter (asyncpg's and psycopg's ``timedelta``) as its text,
    which plain SQL reads as any interval literal; microseconds round to milliseconds."""
    if len(raw) != _BINARY.size:
        raise ValueError("an interval is 16 bytes")
    us, days, months = _BINARY.unpack(raw)
    ms, rest = divmod(us, 1000)
    return str(Interval(months, days, ms + (rest >= 500)))
