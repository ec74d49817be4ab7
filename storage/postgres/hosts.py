"""The store URL's hosts and time budgets, and a connect that gives each host its own deadline.

asyncpg tries the hosts of a multi-host URL in order under **one** overall timeout, so a
first host that accepts TCP but never answers (a frozen primary: its kernel completes the
handshake, its postmaster is stopped) uses the whole budget and the second host is never
tried. :func:`connect` does what libpq does instead: each host gets ``connect_timeout``
seconds of its own, and a host that gives a connection not matching
``target_session_attrs`` (a standby when ``read-write`` is asked for) is passed over.
Unlike libpq it also remembers a host that timed out and tries it last for a while
(pgjdbc's ``hostRecheckSeconds``), so while the old primary hangs each new connection does
not pay its deadline first.

The budgets are URL query parameters; cubequeue takes them out before asyncpg sees the
URL (asyncpg would send an unknown parameter to the server as a setting):

=====================  ========  =========================================================
parameter              default   what it bounds
=====================  ========  =========================================================
``connect_timeout``    2 s       one host's connect, startup and session-attribute check
                                 (libpq's name and meaning: per host)
``call_timeout``       30 s      any one call; past it the call is abandoned, outcome
                                 unknown
``silence_timeout``    2 s       a call that has had no answer this long makes the front
                                 end probe its host with a new connection; if that gets
                                 no answer within ``connect_timeout`` the host is taken
                                 for hung and its calls are abandoned (outcome unknown)
=====================  ========  =========================================================
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import asyncpg

from cubequeue.storage.postgres.errors import is_permanent

__all__ = ["BAD_HOST_S", "Budgets", "HostConnection", "StoreUrl", "connect", "parse_url"]

#: a host that timed out is tried after the others for this long
BAD_HOST_S = 10.0
_OURS = ("connect_timeout", "call_timeout", "silence_timeout")
_DEFAULTS = {"connect_timeout": 2.0, "call_timeout": 30.0, "silence_timeout": 2.0}
#: the connection errors after which the next host is tried (asyncpg's, the OS's, ours)
HOST_ERRORS = (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError,
               asyncpg.PostgresError)  # fmt: skip


class HostConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped
    """An asyncpg connection that knows which host of the URL it reached."""

    __slots__ = ("cq_host",)


@dataclass(frozen=True, slots=True)
class Budgets:
    connect_timeout: float = _DEFAULTS["connect_timeout"]
    call_timeout: float = _DEFAULTS["call_timeout"]
    silence_timeout: float = _DEFAULTS["silence_timeout"]


@dataclass(slots=True)
class StoreUrl:
    """A ``--store`` URL split into one single-host URL per host, and its budgets."""

    #: the URL without cubequeue's own parameters
    dsn: str
    #: one URL per host, in the URL's order (``[dsn]`` when the URL names no host list)
    hosts: list[str]
    budgets: Budgets
    #: a host's URL -> until when it is tried last (it timed out)
    _bad_until: dict[str, float] = field(default_factory=dict)

    @property
    def needs_primary(self) -> bool:
        """``target_session_attrs`` asks for a writable server (what failover relies on)."""
        query = dict(parse_qsl(urlsplit(self.dsn).query))
        return query.get("target_session_attrs", "") in ("read-write", "primary")

    def in_order(self) -> list[str]:
        now = time.monotonic()
        good = [h for h in self.hosts if self._bad_until.get(h, 0.0) <= now]
        return good + [h for h in self.hosts if h not in good]

    def mark_bad(self, host: str) -> None:
        if len(self.hosts) > 1:
            self._bad_until[host] = time.monotonic() + BAD_HOST_S

    def mark_good(self, host: str) -> None:
        self._bad_until.pop(host, None)


def parse_url(url: str) -> StoreUrl:
    """Split ``url``; ValueError naming a budget that is not a positive number of seconds."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    values = dict(_DEFAULTS)
    kept: list[tuple[str, str]] = []
    for name, value in query:
        if name not in _OURS:
            kept.append((name, value))
            continue
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not seconds > 0 or seconds == float("inf"):
            raise ValueError(f"the store URL's {name}={value!r} is not a positive number of seconds")
        values[name] = seconds
    dsn = parts._replace(query=urlencode(kept)).geturl()
    budgets = Budgets(**values)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    hosts = [h for h in _split_hosts(hostlist) if h]
    if len(hosts) <= 1:
        return StoreUrl(dsn, [dsn], budgets)
    one = [parts._replace(netloc=f"{userinfo}{at}{h}", query=urlencode(kept)).geturl()
           for h in hosts]
    return StoreUrl(dsn, one, budgets)


def _split_hosts(hostlist: str) -> list[str]:
    """``h1:p1,[::1]:p2`` -> its hosts (commas inside brackets are not separators)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(hostlist):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(hostlist[start:i])
            start = i + 1
    out.append(hostlist[start:])
    return out


async def connect(url: StoreUrl, **kwargs: Any) -> HostConnection:
    """A connection to the first host, in :meth:`StoreUrl.in_order`, that answers within
    its own ``connect_timeout`` and matches ``target_session_attrs``; the last host's error
    if none does (every error of every host is chained through ``__context__``)."""
    kwargs.pop("loop", None)
    kwargs["connection_class"] = HostConnection
    errors: list[BaseException] = []
    for host in url.in_order():
        try:
            conn: HostConnection = await asyncpg.connect(
                host, timeout=url.budgets.connect_timeout, **kwargs)
        except HOST_ERRORS as exc:
            if isinstance(exc, TimeoutError):
                url.mark_bad(host)
            errors.append(exc)
            continue
        url.mark_good(host)
        conn.cq_host = host
        return conn
    raise _last(errors)


def _last(errors: Sequence[BaseException]) -> BaseException:
    """The error to report: a permanent one (the database or role is missing) before the
    others, since it names what an operator must fix."""
    for exc in errors:
        if is_permanent(exc):
            return exc
    return errors[-1] if errors else asyncpg.TargetServerAttributeNotMatched(
        "the store URL names no host")
