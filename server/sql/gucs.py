"""The configuration parameters (GUCs) the server knows, and how a value is normalised.

PostgreSQL 15 refuses ``SET`` of a name it does not know; cubequeue accepts any name (SET
and SHOW work for any setting, since drivers set GUCs we never heard of), stores
it as text, and only checks and normalises the parameters below the way PostgreSQL does
(``SET DateStyle = iso`` shows ``ISO, MDY``; ``statement_timeout = 5000`` shows ``5s``).
``statement_timeout`` is enforced by the wires (``executor.complete``); its default here is
PostgreSQL's, and each session starts at ``--statement-timeout``, as if postgresql.conf set it.
Reported parameters are those PostgreSQL 15 marks GUC_REPORT (its docs, "ParameterStatus"
in "Protocol Flow").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue
from cubequeue.grammar.lexical import shown

__all__ = ["GUCS", "Guc", "canonical_name", "normalize", "server_version_num"]


@dataclass(frozen=True, slots=True)
class Guc:
    name: str
    default: str
    description: str
    reported: bool = False
    read_only: bool = False
    #: list parameters join several values with ", " (search_path, DateStyle).
    is_list: bool = False
    check: Callable[[str, str], str] | None = None


def _invalid(name: str, value: str) -> InvalidParameterValue:
    return InvalidParameterValue(f'invalid value for parameter "{name}": "{value}"')


_TRUE = {"on", "true", "yes", "1", "t", "y"}
_FALSE = {"off", "false", "no", "0", "f", "n"}


def _bool(name: str, value: str) -> str:
    v = value.strip().lower()
    if v in _TRUE or (len(v) > 1 and any(t.startswith(v) for t in ("true", "yes"))):
        return "on"
    if v in _FALSE or (len(v) > 1 and any(t.startswith(v) for t in ("false",))):
        return "off"
    raise InvalidParameterValue(f'parameter "{name}" requires a Boolean value')


def _int_range(lo: int, hi: int) -> Callable[[str, str], str]:
    def check(name: str, value: str) -> str:
        try:
            n = int(value.strip())
        except ValueError:
            raise InvalidParameterValue(
                f'invalid value for parameter "{name}": "{value}"'
            ) from None
        if not lo <= n <= hi:
            raise InvalidParameterValue(
                f'{n} is outside the valid range for parameter "{name}" ({lo} .. {hi})'
            )
        return str(n)

    return check


_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIME = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$")


def _timeout(name: str, value: str) -> str:
    """A time in ms, shown with the largest unit that divides it (PostgreSQL's SHOW)."""
    m = _TIME.match(value)
    if not m:
        raise InvalidParameterValue(
            f'invalid value for parameter "{name}": "{value}"',
            hint='Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".',
        )
    scaled = float(m.group(1)) * _UNITS_MS[m.group(2) or "ms"]
    if not math.isfinite(scaled):  # hundreds of digits: float() says inf, round() fails
        raise InvalidParameterValue(f'invalid value for parameter "{name}": "{shown(value)}"',
                                    hint="Value exceeds integer range.")
    ms = round(scaled)
    if not 0 <= ms <= 2_147_483_647:
        raise InvalidParameterValue(
            f'{ms} ms is outside the valid range for parameter "{name}" (0 .. 2147483647)'
        )
    for unit in ("d", "h", "min", "s"):
        size = int(_UNITS_MS[unit])
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return "0" if ms == 0 else f"{ms}ms"


_DATE_FORMATS = {"iso": "ISO", "sql": "SQL", "postgres": "Postgres", "german": "German"}
_DATE_ORDERS = {"dmy": "DMY", "euro": "DMY", "european": "DMY", "mdy": "MDY", "us": "MDY",
                "noneuro": "MDY", "noneuropean": "MDY", "ymd": "YMD"}


def _datestyle(name: str, value: str, current: str = "ISO, MDY") -> str:
    fmt, order = (p.strip() for p in current.split(","))
    for part in re.split(r"[\s,]+", value.strip()):
        p = part.lower()
        if p in _DATE_FORMATS:
            fmt = _DATE_FORMATS[p]
        elif p in _DATE_ORDERS:
            order = _DATE_ORDERS[p]
        elif p != "default":
            raise _invalid(name, value)
    if fmt != "ISO":
        raise FeatureNotSupported(
            f'cubequeue renders dates in ISO format only; DateStyle "{value}" is not supported',
            hint="SET DateStyle = 'ISO, MDY' (the default).",
        )
    return f"{fmt}, {order}"


def _encoding(name: str, value: str) -> str:
    """``'utf-8'``, ``utf8``, ``UNICODE`` → UTF8 (PostgreSQL drops non-alphanumerics)."""
    clean = re.sub(r"[^0-9a-z]", "", value.lower())
    if clean in ("utf8", "unicode"):
        return "UTF8"
    if clean == "sqlascii":
        return "SQL_ASCII"
    raise FeatureNotSupported(
        f'cubequeue speaks UTF8 only; client_encoding "{value}" is not supported',
        hint="Use client_encoding UTF8.",
    )


def _scs(name: str, value: str) -> str:
    if _bool(name, value) == "on":
        raise FeatureNotSupported(
            "standard_conforming_strings cannot be turned on: cubequeue reads backslash "
            "escapes in '...' (docs/dialect.md §8 rule 4)",
            hint="Leave standard_conforming_strings off, or use E'...' or $$...$$ literals.",
        )
    return "off"


def _interval_style(name: str, value: str) -> str:
    v = value.strip().lower()
    if v not in ("postgres", "postgres_verbose", "sql_standard", "iso_8601"):
        raise _invalid(name, value)
    return v


def _timezone(name: str, value: str) -> str:
    v = value.strip()
    if v.upper() in ("UTC", "GMT", "Z") or re.fullmatch(r"[+-]?\d{1,2}(:\d\d)?", v):
        return v
    from zoneinfo import ZoneInfo  # lazy: only a SET TimeZone needs the tz database

    try:
        ZoneInfo(v)
    except (ValueError, OSError, KeyError):
        raise _invalid(name, value) from None
    return v


_ISOLATION = ("serializable", "repeatable read", "read committed", "read uncommitted")


def _isolation(name: str, value: str) -> str:
    v = " ".join(value.lower().split())
    if v not in _ISOLATION:
        raise _invalid(name, value)
    return v



_TIMEOUT_DOC = " (0 = no limit; kept for drivers, not enforced by cubequeue)"

GUCS: dict[str, Guc] = {g.name.lower(): g for g in (
    Guc("application_name", "", "Sets the application name to be reported in statistics and logs.", reported=True),
    Guc("client_encoding", "UTF8", "Sets the client's character set encoding.", reported=True, check=_encoding),
    Guc("DateStyle", "ISO, MDY", "Sets the display format for date and time values.", reported=True, is_list=True, check=_datestyle),
    Guc("default_transaction_read_only", "off", "Sets the default read-only status of new transactions.", reported=True, check=_bool),
    Guc("in_hot_standby", "off", "Shows whether hot standby is currently active.", reported=True, read_only=True),
    Guc("integer_datetimes", "on", "Shows whether datetimes are integer based.", reported=True, read_only=True),
    Guc("IntervalStyle", "postgres", "Sets the display format for interval values.", reported=True, check=_interval_style),
    Guc("is_superuser", "on", "Shows whether the current user is a superuser.", reported=True, read_only=True),
    Guc("server_encoding", "UTF8", "Shows the server (database) character set encoding.", reported=True, read_only=True),
    Guc("server_version", "", "Shows the server version.", reported=True, read_only=True),
    Guc("session_authorization", "", "Sets the session user name.", reported=True, read_only=True),
    Guc("standard_conforming_strings", "off", "Causes '...' strings to treat backslashes literally (always off: docs/dialect.md §8 rule 4).", reported=True, check=_scs),
    Guc("TimeZone", "Etc/UTC", "Sets the time zone for displaying and interpreting time stamps.", reported=True, check=_timezone),
    Guc("server_version_num", "", "Shows the server version as an integer.", read_only=True),
    Guc("max_identifier_length", "63", "Shows the maximum identifier length.", read_only=True),
    Guc("extra_float_digits", "1", "Sets the number of digits displayed for floating-point values.", check=_int_range(-15, 3)),
    Guc("search_path", '"$user", public', "Sets the schema search order for names that are not schema-qualified.", is_list=True),
    Guc("statement_timeout", "0", "Sets the maximum allowed duration of any statement: a step that waits (for the store, a stream of rows) is canceled with 57014 (0 = no limit; each session starts at --statement-timeout; RESULT_BLOCKING keeps --max-blocking-timeout).", check=_timeout),
    Guc("lock_timeout", "0", "Sets the maximum allowed duration of any wait for a lock" + _TIMEOUT_DOC + ".", check=_timeout),
    Guc("idle_in_transaction_session_timeout", "0", "Sets the maximum allowed idle time between queries, when in a transaction" + _TIMEOUT_DOC + ".", check=_timeout),
    Guc("idle_session_timeout", "0", "Sets the maximum allowed idle time between queries, when not in a transaction" + _TIMEOUT_DOC + ".", check=_timeout),
    Guc("transaction_isolation", "read committed", "Sets the current transaction's isolation level (the store is not transactional).", check=_isolation),
    Guc("default_transaction_isolation", "read committed", "Sets the transaction isolation level of each new transaction.", check=_isolation),
    Guc("transaction_read_only", "off", "Sets the current transaction's read-only status.", check=_bool),
    Guc("bytea_output", "hex", "Sets the output format for bytea."),
    Guc("client_min_messages", "notice", "Sets the message levels that are sent to the client."),
    Guc("row_security", "on", "Enable row security."),
    Guc("process_id", "", "The process id of this connection for QUEUE ADD EXCLUSIVE, RETRIEVE and LIST (docs/dialect.md §8 rule 7)."),
)}


def canonical_name(name: str) -> str:
    g = GUCS.get(name.lower())
    return g.name if g else name.lower()


def normalize(name: str, value: str, current: str | None = None) -> str:
    """Check a new value of ``name`` and return it as SHOW will report it."""
    g = GUCS.get(name.lower())
    if g is None or g.check is None:
        return value
    if g.check is _datestyle and current is not None:
        return _datestyle(g.name, value, current)
    return g.check(g.name, value)


def server_version_num(server_version: str) -> str:
    """``15.18 (cubequeue 0.1.0)`` → ``150018`` (PostgreSQL's major*10000 + minor)."""
    m = re.match(r"(\d+)(?:\.(\d+))?", server_version)
    if not m:
        return "0"
    return str(int(m.group(1)) * 10000 + int(m.group(2) or 0))
