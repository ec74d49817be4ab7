"""Plain SQL on the PostgreSQL wire: session statements and system tables.

Pure (no asyncio, no sockets). Entry points:

* :class:`PlainSession` — per-connection settings, process id and transaction status;
* :func:`run_plain` — answer one statement that is not QUEUE/CACHE/SYS;
* :func:`describe_plain` — its parameter and result types, without running it.

Everything else is 0A000 with a hint naming what cubequeue answers.
"""

from __future__ import annotations

from .outcome import Notice, PlainDescription, PlainOutcome, default_oid
from .plain_store import PlainStore
from .session import MAX_PROCESS_ID_LEN, PlainSession
from .statements import HINT, describe_plain, run_plain

__all__ = [
    "HINT",
    "MAX_PROCESS_ID_LEN",
    "Notice",
    "PlainDescription",
    "PlainOutcome",
    "PlainSession",
    "PlainStore",
    "default_oid",
    "describe_plain",
    "run_plain",
]
