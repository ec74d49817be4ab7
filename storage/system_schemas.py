"""The columns of the ``system.*`` tables, defined once (``docs/dialect.md`` §8 rule 11).

The store builds its frames with these very tuples, and the plain-SQL evaluator plans a
SELECT (and answers Describe) from them without touching the store, so the two cannot
drift apart. Times are integer milliseconds (``ColumnType.TIMESTAMP``), which the server
renders as ``timestamptz``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from cubequeue.grammar.results import Column, ColumnType, columns

__all__ = [
    "CACHE_COLUMNS",
    "QUEUE_COLUMNS",
    "QUEUE_LOG_COLUMNS",
    "QUEUE_PREFIXES_COLUMNS",
    "QUEUE_RESULTS_COLUMNS",
    "SYSTEM_TABLES",
]

_S, _I, _B, _T = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP

#: every item in ascending id order; ``id`` is the key part of the path (§2.1)
QUEUE_COLUMNS = columns(
    ("id", _S),
    ("queue_id", _I),
    ("prefix", _S),
    ("created", _T),
    ("status", _S),
    ("priority", _I),
    ("heartbeat", _T),
    ("orphaned", _T),
    ("value", _S),
    ("extra", _S),
    ("process_id", _S),
    ("exclusive", _B),
    ("external_id", _S),
)
QUEUE_RESULTS_COLUMNS = columns(
    ("id", _I), ("path", _S), ("expire", _T), ("deleted", _B), ("value", _S), ("external_id", _S)
)
#: ``prefix`` is text, not NULL: a path without a colon has prefix "" (§2.1), as in
#: system.queue
CACHE_COLUMNS = columns(("id", _S), ("prefix", _S), ("expire", _T), ("value", _S))
#: ``last_concurrency``: the CONCURRENCY of the prefix's latest RETRIEVE or ADD_AND_RETRIEVE;
#: ``last_*_timeout_ms``: the timeouts of its latest TO_CANCEL (STALLED sets the heartbeat
#: one and clears the other), which the console judges stalled / orphan-prone rows by
QUEUE_PREFIXES_COLUMNS = columns(
    ("prefix", _S),
    ("pending", _I),
    ("active", _I),
    ("results", _I),
    ("oldest_pending_ms", _I),
    ("max_heartbeat_age_ms", _I),
    ("last_concurrency", _I),
    ("last_heartbeat_timeout_ms", _I),
    ("last_orphaned_timeout_ms", _I),
)
QUEUE_LOG_COLUMNS = columns(
    ("id", _I), ("path", _S), ("reason", _S), ("at", _T), ("queued_ms", _I), ("active_ms", _I)
)

#: table name (without ``system.``) → its columns, in the order ``SELECT *`` shows them
SYSTEM_TABLES: Mapping[str, tuple[Column, ...]] = MappingProxyType(
    {
        "queue": QUEUE_COLUMNS,
        "queue_results": QUEUE_RESULTS_COLUMNS,
        "cache": CACHE_COLUMNS,
        "queue_prefixes": QUEUE_PREFIXES_COLUMNS,
        "queue_log": QUEUE_LOG_COLUMNS,
    }
)
