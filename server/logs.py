"""Logging set-up: plain or JSON lines on stderr (``--log-format``).

Loggers are named ``cubequeue.<area>`` and pass structured fields with ``extra={...}``
(``conn_id``, ``peer``, ``protocol``, ``user``, ``command``, ``sqlstate``, ``ms``).
Both formats print those fields: plain as ``key=value`` after the message, JSON as keys
of the one object per line, next to ``ts``, ``level``, ``logger`` and ``msg``. Any other
``extra`` field (a departure's ``queue_id`` and ``reason``, say) is printed the same way, so
callers need no change here to add one.

Only the ``cubequeue`` loggers follow ``--log-level``; third-party libraries (websockets,
asyncio) stay at WARNING or above so ``--log-level debug`` shows our story, not theirs.

Two helpers give the lines every wire writes the same way: :func:`log_statement` (each
statement at DEBUG with its duration and outcome; a refused or failed one at WARNING
with its SQLSTATE and the start of its text) and :func:`log_auth_failure`. Warnings pass
a :class:`RateLimitFilter`: the same warning from one peer at most ``burst`` times per
``interval``, then one line saying how often it repeated, so a client looping on a bad
statement or a flood of refused logins cannot fill the disk.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TextIO

from cubequeue.server.config import Config

__all__ = [
    "JsonFormatter",
    "PlainFormatter",
    "RateLimitFilter",
    "log_auth_failure",
    "log_statement",
    "setup_logging",
    "statement_log",
    "statement_start",
]

#: the structured fields every logger may pass, in the order they are printed
KNOWN_FIELDS = ("conn_id", "peer", "protocol", "user", "command", "sqlstate", "ms")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}
#: attributes every LogRecord has; anything else on a record came from ``extra``
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
_HANDLER_MARK = "_cubequeue_handler"

#: how much of a statement's text a log line quotes
STATEMENT_TEXT_CHARS = 120
#: the rate limit of repeated warnings: this many per key and interval, then a summary
RATE_BURST = 5
RATE_INTERVAL_S = 60.0
#: distinct (message, peer) keys tracked at once; the oldest window is closed beyond it
RATE_MAX_KEYS = 10_000
#: the ``extra`` key a caller may set to choose what counts as "the same warning"
RATE_KEY = "_rate_key"
_SUMMARY_MARK = "_rate_summary"

_statement_log = logging.getLogger("cubequeue.statement")
#: the logger of :func:`log_statement`, so a caller on the hot path can skip building
#: its arguments when a statement's level is off (``statement_log.isEnabledFor(DEBUG)``)
statement_log = _statement_log
_auth_log = logging.getLogger("cubequeue.auth")


def _extras(record: logging.LogRecord) -> dict[str, object]:
    fields = {k: v for k, v in vars(record).items()
              if k not in _RECORD_ATTRS and not k.startswith("_")}
    ordered = {k: fields.pop(k) for k in KNOWN_FIELDS if k in fields}
    ordered.update(sorted(fields.items()))
    return ordered


def _timestamp(created: float) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2024-05-01T12:00:00.123Z``."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line; never raises on an odd ``extra`` value (uses ``str``)."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, object] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        obj.update(_extras(record))
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            obj["stack"] = record.stack_info
        return json.dumps(obj, default=str, ensure_ascii=False, separators=(",", ":"))


class PlainFormatter(logging.Formatter):
    """``ts LEVEL logger msg key=value ...``; values with spaces are quoted."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record.created), record.levelname, record.name,
                 record.getMessage()]
        for key, value in _extras(record).items():
            text = str(value)
            if not text or any(c.isspace() or c in "\"=" for c in text):
                text = json.dumps(text, ensure_ascii=False)
            parts.append(f"{key}={text}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def statement_start(text: str, limit: int = STATEMENT_TEXT_CHARS) -> str:
    """The first ``limit`` characters of a statement with runs of blanks collapsed, and
    ``...`` when it was cut: enough to recognise it, never a 64 MiB payload in the log."""
    head = " ".join(text[: limit * 4].split())
    return head if len(head) <= limit and len(text) <= limit * 4 else head[:limit] + "..."


def _host(peer: str | None) -> str | None:
    """``host`` of ``host:port``: a flood arrives from new ports of one host."""
    if peer is None:
        return None
    host, sep, _port = peer.rpartition(":")
    return host if sep else peer


def log_statement(command: str, text: str, sqlstate: str | None, ms: float, *,
                  protocol: str | None = None, conn_id: int | None = None,
                  peer: str | None = None, user: str | None = None) -> None:
    """One statement's outcome: DEBUG when it succeeded (``sqlstate`` None or
    ``00000``), WARNING with its SQLSTATE and the start of its text when it was refused
    or failed. Every wire calls this once per statement, so both read alike."""
    ok = sqlstate is None or sqlstate == "00000"
    level = logging.DEBUG if ok else logging.WARNING
    if not _statement_log.isEnabledFor(level):
        return
    extra: dict[str, object] = {k: v for k, v in (
        ("conn_id", conn_id), ("peer", peer), ("protocol", protocol), ("user", user),
    ) if v is not None}
    start = statement_start(text)
    extra.update(command=command, sqlstate=sqlstate or "00000", ms=round(ms, 3))
    if ok:
        _statement_log.debug("statement %s ok in %.3f ms: %s", command, ms, start,
                             extra=extra)
        return
    extra[RATE_KEY] = ("statement", _host(peer), sqlstate, start)
    _statement_log.warning("statement %s failed with SQLSTATE %s: %s", command, sqlstate,
                           start, extra=extra)


def log_auth_failure(user: str, peer: str | None, method: str, reason: str) -> None:
    """A refused login at WARNING with the user, the peer and why (PostgreSQL logs
    ``password authentication failed for user`` with a DETAIL the client never sees)."""
    extra: dict[str, object] = {"user": user, "sqlstate": "28P01", "auth": method,
                                "reason": reason}
    if peer is not None:
        extra["peer"] = peer
    extra[RATE_KEY] = ("auth", _host(peer), user)
    _auth_log.warning('password authentication failed for user "%s" from %s: %s', user,
                      peer or "?", reason, extra=extra)


@dataclass(slots=True)
class _Window:
    started: float
    passed: int
    suppressed: int = 0
    last: logging.LogRecord | None = None


class RateLimitFilter(logging.Filter):
    """At most ``burst`` warnings per key and ``interval`` s; the rest are counted, and
    when the key's window closes one line ``<last message> ... repeated K times`` is
    handed to ``emit`` (the handler's ``handle``).

    A record's key is its ``_rate_key`` extra, else (logger, message template, peer
    host). Windows close lazily, on the next record of any key (or :meth:`flush`), so
    the filter needs no timer; ``clock`` is injected so tests need no sleeping. Records
    below WARNING always pass: only repeated warnings flood a log."""

    def __init__(self, emit: Callable[[logging.LogRecord], object], *,
                 clock: Callable[[], float] = time.monotonic, burst: int = RATE_BURST,
                 interval: float = RATE_INTERVAL_S, max_keys: int = RATE_MAX_KEYS) -> None:
        super().__init__()
        self._emit = emit
        self._clock = clock
        self._burst = burst
        self._interval = interval
        self._max_keys = max_keys
        #: open windows, oldest first (every window lasts the same interval)
        self._windows: OrderedDict[Hashable, _Window] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, _SUMMARY_MARK, False):
            return True
        now = self._clock()
        self._close_expired(now)
        key = getattr(record, RATE_KEY, None)
        if key is None:
            key = (record.name, str(record.msg), _host(getattr(record, "peer", None)))
        window = self._windows.get(key)
        if window is None:
            if len(self._windows) >= self._max_keys:
                self._close(*self._windows.popitem(last=False))
            self._windows[key] = _Window(now, 1)
            return True
        if window.passed < self._burst:
            window.passed += 1
            return True
        window.suppressed += 1
        window.last = record
        return False

    def flush(self) -> None:
        """Emit the summary of every open window (at shutdown)."""
        while self._windows:
            self._close(*self._windows.popitem(last=False))

    def _close_expired(self, now: float) -> None:
        windows = self._windows
        while windows:
            key, window = next(iter(windows.items()))
            if now - window.started < self._interval:
                return
            del windows[key]
            self._close(key, window)

    def _close(self, _key: Hashable, window: _Window) -> None:
        last = window.last
        if last is None or not window.suppressed:
            return
        summary = logging.makeLogRecord(vars(last))
        summary.msg = "%s ... repeated %d times in %g s"
        summary.args = (last.getMessage(), window.suppressed, self._interval)
        summary.repeated = window.suppressed
        setattr(summary, _SUMMARY_MARK, True)
        self._emit(summary)


def setup_logging(config: Config, *, stream: TextIO | None = None,
                  clock: Callable[[], float] = time.monotonic) -> RateLimitFilter:
    """Install the one stderr handler; calling it again replaces the previous one.
    Returns its rate limiter, whose ``flush()`` writes the pending repeat counts."""
    level = _LEVELS[config.log_level]
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if config.log_format == "json" else PlainFormatter())
    limiter = RateLimitFilter(handler.handle, clock=clock)
    handler.addFilter(limiter)
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))
    logging.getLogger("cubequeue").setLevel(level)
    logging.captureWarnings(True)
    return limiter
