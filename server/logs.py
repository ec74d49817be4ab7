"""Logging set-up: plain or JSON lines on stderr (``--log-format``).

Loggers are named ``cubequeue.<area>`` and pass structured fields with ``extra={...}``
(``conn_id``, ``peer``, ``protocol``, ``user``, ``command``, ``sqlstate``, ``ms``).
Both formats print those fields: plain as ``key=value`` after the message, JSON as keys
of the one object per line, next to ``ts``, ``level``, ``logger`` and ``msg``. Any other
``extra`` field (a departure's ``queue_id`` and ``reason``, say) is printed the same way, so
callers need no change here to add one.

Only the ``cubequeue`` loggers follow ``--log-level``; third-party libraries (websockets,
asyncio) stay at WARNING or above so ``--log-level debug`` shows our story, not theirs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

from cubequeue.server.config import Config

__all__ = ["JsonFormatter", "PlainFormatter", "setup_logging"]

#: the structured fields every logger may pass, in the order they are printed
KNOWN_FIELDS = ("conn_id", "peer", "protocol", "user", "command", "sqlstate", "ms")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}
#: attributes every LogRecord has; anything else on a record came from ``extra``
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
_HANDLER_MARK = "_cubequeue_handler"


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


def setup_logging(config: Config, *, stream: TextIO | None = None) -> None:
    """Install the one stderr handler; calling it again replaces the previous one."""
    level = _LEVELS[config.log_level]
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if config.log_format == "json" else PlainFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))
    logging.getLogger("cubequeue").setLevel(level)
    logging.captureWarnings(True)
