"""The errors durable mode answers with (each names its cause or limit)."""

from __future__ import annotations

from cubequeue.grammar.errors import QueueError

__all__ = ["DataDirLocked", "DiskFull", "LogFailed", "StartingUp"]


class DiskFull(QueueError, sqlstate="53100"):
    """Above ``--max-disk-bytes`` (or ENOSPC): commands that grow state are refused."""


class LogFailed(QueueError, sqlstate="58030"):
    """The log stopped after a failed write or sync: mutating commands are refused."""


class StartingUp(QueueError, sqlstate="57P03"):
    """Recovery is running: PostgreSQL's "the database system is starting up"."""


class DataDirLocked(Exception):
    """Another server holds the data directory; ``str(err)`` is the one line to print."""
