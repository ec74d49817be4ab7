"""Option values: text from a flag or a variable → the typed setting, or one line why not.

Each parser takes the raw text and returns the value or raises :class:`BadValue`, whose
message :mod:`.options` completes with the option's name and where the text came from.
The users and password files are read here too, with the same one-line errors. Only the
standard library is imported (the console script reads options before the server starts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

__all__ = [
    "AUTH_METHODS",
    "CONSOLE_AUTH_METHODS",
    "FSYNC_POLICIES",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "METRICS_AUTH_METHODS",
    "RECOVERY_POLICIES",
    "RESULTS_EXPIRE_MAX_S",
    "WS_AUTH_METHODS",
    "BadValue",
    "ConfigError",
    "Parser",
    "any_text",
    "choice",
    "directory",
    "integer",
    "listed",
    "mib_to_bytes",
    "networks",
    "non_empty",
    "parse_bool",
    "parse_store",
    "postgres_url",
    "read_password_file",
    "read_users_file",
    "readable_file",
    "version_text",
]

_I64_MAX = 2**63 - 1
_MIB = 1024 * 1024
_INT_RE = re.compile(r"[+-]?[0-9][0-9_]*")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("plain", "json")
AUTH_METHODS = ("trust", "scram-sha-256", "md5")
WS_AUTH_METHODS = ("none", "basic")
CONSOLE_AUTH_METHODS = ("none", "basic", "off")
METRICS_AUTH_METHODS = ("none", "basic", "loopback")
FSYNC_POLICIES = ("always", "everysec", "no")
RECOVERY_POLICIES = ("salvage", "strict", "point-in-time")
#: Cube Store's hard limit on how long a result is kept (dialect doc §8 rule 9).
RESULTS_EXPIRE_MAX_S = 300


class ConfigError(ValueError):
    """A setting that cannot be used; ``str(err)`` is the one line to show the operator."""


class BadValue(ValueError):
    """Raised by a value parser; the caller adds the option name and the value's source."""


Parser = Callable[[str], object]


# --- value parsers --------------------------------------------------------------------


def integer(lo: int, hi: int = _I64_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        stripped = text.strip()
        if not _INT_RE.fullmatch(stripped):
            raise BadValue("is not an integer")
        # past 20 digits it is out of every range; int() refuses 4,300 (a traceback)
        digits = stripped.lstrip("+-").replace("_", "").lstrip("0")
        sign = -1 if stripped.startswith("-") else 1
        value = sign * (int(digits or "0") if len(digits) <= 20 else 10**20)
        if value < lo or value > hi:
            if hi == _I64_MAX:
                raise BadValue(f"must be at least {lo}")
            raise BadValue(f"must be between {lo} and {hi}")
        return value

    return parse


def choice(choices: Sequence[str]) -> Parser:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise BadValue("must be one of " + ", ".join(choices))
        return value

    return parse


def non_empty(text: str) -> str:
    value = text.strip()
    if not value:
        raise BadValue("must not be empty")
    return value


def parse_store(text: str) -> str:
    """``memory`` or a PostgreSQL URL (``postgresql://`` or ``postgres://``, the forms
    libpq accepts); ValueError with a one-line reason otherwise."""
    value = text.strip()
    if value.lower() == "memory":
        return "memory"
    return postgres_url(value)


def postgres_url(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip())
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise BadValue("must be 'memory' or a postgresql://user@host:port/database URL")
    if not parts.netloc and "host=" not in parts.query:
        raise BadValue("names no host (postgresql://user@host:port/database)")
    return value.strip()


def version_text(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+_-]*", value):
        raise BadValue("is not a version such as 1.7.25")
    return value


def any_text(text: str) -> str:
    return text


def readable_file(text: str) -> str:
    path = text.strip()
    if not path:
        raise BadValue("must not be empty")
    if not os.path.isfile(path):
        raise BadValue("is not a file")
    if not os.access(path, os.R_OK):
        raise BadValue("is not readable")
    return path


def networks(text: str) -> str:
    """Comma-separated networks (``10.0.0.0/8, ::1``), normalised; a bare address is
    a one-host network, as in pg_hba's address column."""
    import ipaddress

    found: list[str] = []
    for part in text.split(","):
        word = part.strip()
        if not word:
            continue
        try:
            found.append(str(ipaddress.ip_network(word, strict=False)))
        except ValueError:
            raise BadValue(f"has {word!r}, which is not an address or CIDR network") from None
    if not found:
        raise BadValue("names no network")
    return ",".join(found)


def listed(normalize: Callable[[str], str]) -> Parser:
    """A list option normalised by ``normalize`` (:mod:`.browsers`), whose ValueError
    says what is wrong with the value."""

    def parse(text: str) -> str:
        try:
            return normalize(text)
        except ValueError as err:
            raise BadValue(str(err)) from None

    return parse


def directory(text: str) -> str:
    path = text.strip()
    if not path:
        raise BadValue("must not be empty")
    if not os.path.isdir(path):
        raise BadValue("is not a directory")
    return path


def parse_bool(text: str) -> bool:
    """``1/true/yes/on`` and ``0/false/no/off``, any case (``--test-clock``)."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise BadValue("is not a boolean (use 1/true/yes/on or 0/false/no/off)")


def mib_to_bytes(text: str) -> int:
    mib = integer(1)(text)
    if mib > _I64_MAX // _MIB:
        raise BadValue("is too large")
    return mib * _MIB


def read_users_file(path: str) -> dict[str, str]:
    """``user:password`` lines; a line whose first non-blank character is ``#`` is a
    comment, and a ``#`` anywhere else is part of the password (the option table).

    The password is everything after the first colon (so it may contain colons and
    ``#``), with surrounding blanks removed; blank lines are skipped; an empty password is
    refused, naming the user, because it would let anyone who knows the name log in. The
    same rules as the server's ``context.load_users``, so the healthcheck and the server
    agree on every password.
    """
    users: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"invalid value for --users-file: {path!r} cannot be read "
                          f"({err.__class__.__name__})") from None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        user, sep, password = text.partition(":")
        if not sep or not user.strip():
            raise ConfigError(f"invalid value for --users-file: {path!r} line {number} "
                              "is not user:password")
        if not password.strip():
            raise ConfigError(f"invalid value for --users-file: {path!r} line {number} "
                              f"gives user {user.strip()!r} an empty password")
        users[user.strip()] = password.strip()
    if not users:
        raise ConfigError(f"invalid value for --users-file: {path!r} names no user")
    return users


def read_password_file(path: str) -> str:
    """The password in ``path``: its first line without the line break (what
    ``echo pw > file`` and Docker or Kubernetes secrets produce). Blanks inside it count;
    an empty one is refused, as in the users file."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"invalid value for --password-file: {path!r} cannot be read "
                          f"({err.__class__.__name__})") from None
    password = first.rstrip("\r\n")
    if not password.strip():
        raise ConfigError(f"invalid value for --password-file: {path!r} holds an empty "
                          "password")
    return password
