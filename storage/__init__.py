"""The in-memory, single-writer queue and cache store (pure, synchronous, clock injected).

Entry point: :class:`MemoryStore` (``docs/dialect.md`` §3 to §5 and §8). Import submodules as
``cubequeue.storage.<module>``; this package re-exports the public API.
"""

from __future__ import annotations

from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import EMPTY, Column, ColumnType, ResultSet
from cubequeue.storage.clock import AdjustableClock, Clock, FakeClock
from cubequeue.storage.limits import MAX_EXTERNAL_ID_BYTES, MAX_PROCESS_ID_BYTES, Limits
from cubequeue.storage.queue_log import Departure
from cubequeue.storage.sizes import utf8_len
from cubequeue.storage.stats import PrefixCounts, StoreStats
from cubequeue.storage.store import MemoryStore
from cubequeue.storage.system_schemas import SYSTEM_TABLES
from cubequeue.storage.waiters import Waiter

__all__ = [
    "EMPTY",
    "MAX_EXTERNAL_ID_BYTES",
    "MAX_PROCESS_ID_BYTES",
    "SYSTEM_TABLES",
    "AdjustableClock",
    "Clock",
    "Column",
    "ColumnType",
    "Departure",
    "FakeClock",
    "Limits",
    "MemoryStore",
    "PrefixCounts",
    "QueueError",
    "ResultSet",
    "StoreStats",
    "Waiter",
    "utf8_len",
]
