"""Timestamps as text: the one formatter both wires and plain SQL use.

The store keeps time as integer milliseconds since the Unix epoch (``docs/dialect.md``
§8 rule 11). Two renderings exist, and only two:

* :func:`format_timestamptz` — PostgreSQL's ``DateStyle = ISO`` output of a timestamptz,
  in the session's ``TimeZone``: ``2026-11-30 16:04:05.123+01``. PostgreSQL renders a
  text-format result column and ``::text`` alike, so both go through here; a binary
  timestamptz is an instant and carries no zone.
* :func:`format_iso_utc` — what Cube Store's WebSocket sends: ISO 8601 in UTC with
  milliseconds, ``2026-11-30T15:04:05.123Z``. That wire has no session time zone.

:func:`session_zone` turns a ``TimeZone`` setting into a :class:`tzinfo`. Pure: no clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Final

from cubequeue.grammar.errors import QueueError

__all__ = [
    "EPOCH",
    "TimestampOutOfRange",
    "format_iso_utc",
    "format_timestamptz",
    "session_zone",
]

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

_UTC_NAMES: Final = frozenset({"UTC", "GMT", "Z", "ETC/UTC", "ETC/GMT", "UCT", "ZULU"})
#: a bare offset as PostgreSQL reads it in ``SET TimeZone``: ``+02``, ``-05:30``
_OFFSET: Final = re.compile(r"([+-]?)(\d{1,2})(?::(\d\d))?")


class TimestampOutOfRange(QueueError, sqlstate="22008"):
    """A timestamp beyond what can be rendered (years 1 to 9999)."""


@lru_cache(maxsize=64)
def session_zone(name: str) -> tzinfo:
    """The tzinfo of a ``TimeZone`` setting; UTC when the name is unknown.

    The setting was validated by ``SET`` already, so an unknown name here is only the
    default or a startup parameter, where PostgreSQL too falls back to GMT. A bare
    offset follows the POSIX sign convention as PostgreSQL reads it: ``+02`` is UTC+2.
    """
    if name.upper() in _UTC_NAMES:
        return UTC
    match = _OFFSET.fullmatch(name)
    if match:
        delta = timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0))
        return timezone(-delta if match.group(1) == "-" else delta)
    from zoneinfo import ZoneInfo  # lazy: only a named zone needs the tz database

    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        return UTC


def _moment(ms: int, tz: tzinfo) -> datetime:
    try:
        return (EPOCH + timedelta(milliseconds=ms)).astimezone(tz)
    except OverflowError:
        raise TimestampOutOfRange("timestamp out of range") from None


def _offset_text(offset: timedelta | None) -> str:
    """``+00``, ``+05:30``, ``-03``, ``+00:09:21`` (a zone's local mean time): PostgreSQL
    prints minutes and seconds only when they are not zero."""
    total = int(offset.total_seconds()) if offset is not None else 0
    sign = "-" if total < 0 else "+"
    minutes, seconds = divmod(abs(total), 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{sign}{hours:02d}"
    if minutes or seconds:
        text += f":{minutes:02d}"
    if seconds:
        text += f":{seconds:02d}"
    return text


def format_timestamptz(ms: int, tz: tzinfo = UTC) -> str:
    """PostgreSQL's ISO text of a timestamptz in zone ``tz``; the fraction is trimmed of
    trailing zeros and left out when zero, as PostgreSQL does."""
    moment = _moment(ms, tz)
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    millis = moment.microsecond // 1000
    if millis:
        text += f".{millis:03d}".rstrip("0")
    return text + _offset_text(moment.utcoffset())


def format_iso_utc(ms: int) -> str:
    """Cube Store's WebSocket rendering: UTC, always three fraction digits. Beyond the
    years 1 to 9999 the number itself is sent, which keeps it readable."""
    try:
        moment = EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"
