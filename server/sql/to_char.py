"""``to_char(timestamptz, format)`` for the common patterns, as PostgreSQL formats them.

Answered: ``YYYY YY MM DD DDD D Q IW HH HH12 HH24 MI SS MS US AM PM A.M. P.M.``,
``Mon MON mon Month MONTH month Dy DY dy Day DAY day`` (English), ``OF`` (the offset,
``+02`` or ``+05:30``), the ``FM`` prefix (no padding), ``"quoted text"``, and any other
character copied as it is, as PostgreSQL copies it (``formatting.c``, ``DCH_to_char``).
A pattern PostgreSQL knows but cubequeue does not format (``TZ``, ``J``, ``RM``, ``WW``,
``W``, ``CC``, ``TH``…) is 0A000 naming it, never printed as something else. Numbers are
zero-padded to their width, month and day names blank-padded to 9 characters (``FM``
removes both). The format is read once per distinct text (at most 64 kept), in one pass,
and is at most :data:`MAX_FORMAT_CHARS` characters (54000 past it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Final

from cubequeue.grammar.errors import FeatureNotSupported, LimitExceeded

__all__ = ["MAX_FORMAT_CHARS", "SUPPORTED_PATTERNS", "to_char"]

Field = Callable[[datetime, bool], str]


def _num(get: Callable[[datetime], int], width: int) -> Field:
    def field(t: datetime, fill: bool) -> str:
        value = get(t)
        return str(value) if fill else f"{value:0{width}d}"

    return field


def _name(names: list[str], get: Callable[[datetime], int], case: str, pad: bool) -> Field:
    """A month or day name; full names are blank-padded to 9 characters unless FM."""

    def field(t: datetime, fill: bool) -> str:
        text = names[get(t)]
        text = text.upper() if case == "upper" else text.lower() if case == "lower" else text
        return text.ljust(9) if pad and not fill else text

    return field


def _hour12(t: datetime) -> int:
    return t.hour % 12 or 12


def _offset(t: datetime, fill: bool) -> str:
    delta = t.utcoffset()
    seconds = 0 if delta is None else int(delta.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    return f"{sign}{hours:02d}" + (f":{rest // 60:02d}" if rest else "")


def _meridiem(upper: bool, dots: bool) -> Field:
    def field(t: datetime, fill: bool) -> str:
        text = ("A.M." if dots else "AM") if t.hour < 12 else ("P.M." if dots else "PM")
        return text if upper else text.lower()

    return field


#: English, as PostgreSQL prints without TM (not the process locale's, as calendar's are)
_MONTHS = ["", "January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_MONS = ["", *(m[:3] for m in _MONTHS[1:])]
_DAYS = ["", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_DYS = ["", *(d[:3] for d in _DAYS[1:])]  # 1 = Monday … 7 = Sunday, as isoweekday()

#: pattern (as written) → its formatter; numeric patterns read alike in lower case
_FIELDS: Final[dict[str, Field]] = {
    "YYYY": _num(lambda t: t.year, 4), "YY": _num(lambda t: t.year % 100, 2),
    "MM": _num(lambda t: t.month, 2), "DDD": _num(lambda t: t.timetuple().tm_yday, 3),
    "DD": _num(lambda t: t.day, 2), "D": _num(lambda t: t.isoweekday() % 7 + 1, 1),
    "Q": _num(lambda t: (t.month - 1) // 3 + 1, 1), "IW": _num(lambda t: t.isocalendar()[1], 2),
    "HH24": _num(lambda t: t.hour, 2), "HH12": _num(_hour12, 2), "HH": _num(_hour12, 2),
    "MI": _num(lambda t: t.minute, 2), "SS": _num(lambda t: t.second, 2),
    "MS": _num(lambda t: t.microsecond // 1000, 3), "US": _num(lambda t: t.microsecond, 6),
    "OF": _offset,
    "AM": _meridiem(True, False), "PM": _meridiem(True, False),
    "am": _meridiem(False, False), "pm": _meridiem(False, False),
    "A.M.": _meridiem(True, True), "P.M.": _meridiem(True, True),
    "a.m.": _meridiem(False, True), "p.m.": _meridiem(False, True),
}
for _word, _names, _get, _pad in (("month", _MONTHS, lambda t: t.month, True),
                                  ("mon", _MONS, lambda t: t.month, False),
                                  ("day", _DAYS, lambda t: t.isoweekday(), True),
                                  ("dy", _DYS, lambda t: t.isoweekday(), False)):
    _FIELDS[_word.upper()] = _name(_names, _get, "upper", _pad)
    _FIELDS[_word.capitalize()] = _name(_names, _get, "title", _pad)
    _FIELDS[_word] = _name(_names, _get, "lower", _pad)
_NUMERIC: Final = frozenset({"YYYY", "YY", "MM", "DDD", "DD", "D", "Q", "IW", "HH24", "HH12",
                             "HH", "MI", "SS", "MS", "US", "OF"})
#: PostgreSQL's other patterns (and modifiers): refused by name, never mis-printed
_UNANSWERED: Final = ("Y,YYY", "SSSSS", "SSSS", "IDDD", "IYYY", "A.D.", "B.C.", "TZH", "TZM",
                      "IYY", "YYY", "FF1", "FF2", "FF3", "FF4", "FF5", "FF6", "AD", "BC",
                      "CC", "ID", "IY", "RM", "TZ", "WW", "TH", "SP", "TM", "FX", "I", "J",
                      "W", "Y")
#: the patterns by their first letter, longest first: a few to try per character
_CANDIDATES: Final[dict[str, list[str]]] = {}
for _cand in sorted({*_FIELDS, *(p.upper() for p in _NUMERIC), *_UNANSWERED}, key=len,
                    reverse=True):
    _CANDIDATES.setdefault(_cand[0].upper(), []).append(_cand)
SUPPORTED_PATTERNS: Final = ("YYYY", "YY", "MM", "DD", "DDD", "D", "Q", "IW", "HH", "HH12",
                             "HH24", "MI", "SS", "MS", "US", "AM/PM", "Mon", "Month", "Dy",
                             "Day", "OF", "FM", '"text"')

Piece = str | tuple[Field, bool]


def _match(fmt: str, i: int) -> str | None:
    for cand in _CANDIDATES.get(fmt[i].upper(), ()):
        piece = fmt[i : i + len(cand)]
        if piece == cand or (piece.upper() == cand and cand in _NUMERIC):
            return cand
        if piece.upper() == cand and cand in _UNANSWERED:
            return cand
    return None


#: the longest format read (a real one is a few dozen characters; reading costs time per
#: character, bench/RESULTS-notes.md, and a statement or a payload could hand over a
#: megabyte)
MAX_FORMAT_CHARS: Final = 1000


@lru_cache(maxsize=64)
def _compile(fmt: str) -> tuple[Piece, ...]:
    if len(fmt) > MAX_FORMAT_CHARS:
        raise LimitExceeded(
            f"to_char() format of {len(fmt)} characters exceeds {MAX_FORMAT_CHARS} "
            "(the limit of a to_char format)")
    pieces: list[Piece] = []
    i, fill = 0, False
    while i < len(fmt):
        ch = fmt[i]
        if ch == '"':
            end = fmt.find('"', i + 1)
            end = len(fmt) if end < 0 else end
            pieces.append(fmt[i + 1 : end])
            i = end + 1
            continue
        if fmt[i : i + 2] in ("FM", "fm"):
            fill, i = True, i + 2
            continue
        if ch == "\\" and i + 1 < len(fmt):
            pieces.append(fmt[i + 1])
            i += 2
            continue
        cand = _match(fmt, i)
        if cand is None:
            pieces.append(ch)
            i += 1
            continue
        if cand in _UNANSWERED and cand not in _FIELDS:
            raise FeatureNotSupported(
                f'to_char() pattern "{fmt[i : i + len(cand)]}" is not supported',
                hint="to_char(timestamp, format) answers " + ", ".join(SUPPORTED_PATTERNS)
                + "; put other text in double quotes.")
        pieces.append((_FIELDS[cand], fill))
        fill = False
        i += len(cand)
    return tuple(pieces)


def to_char(local: datetime, fmt: str) -> str:
    """``local`` (a wall-clock time of the session's zone) formatted by ``fmt``."""
    return "".join(p if isinstance(p, str) else p[0](local, p[1]) for p in _compile(fmt))
