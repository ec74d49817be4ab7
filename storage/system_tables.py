"""The queue's system tables (dialect doc §8 rule 11, issue 9).

Only live rows are shown: expired rows were swept (§8 rule 9), unlike Cube Store whose
tables still show them until compaction (§5.2). Times are integer milliseconds
(ColumnType.TIMESTAMP), which the server renders as ``timestamptz``.
"""

from __future__ import annotations

from cubequeue.grammar.results import ColumnType, ResultSet, Row, columns
from cubequeue.storage.queue import QueueState
from cubequeue.storage.queue_log import QUEUE_LOG_COLUMNS

__all__ = [
    "QUEUE_COLUMNS",
    "QUEUE_LOG_COLUMNS",
    "QUEUE_PREFIXES_COLUMNS",
    "QUEUE_RESULTS_COLUMNS",
    "queue_prefixes_table",
    "queue_results_table",
    "queue_table",
]

_S, _I, _B, _T = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP

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
QUEUE_PREFIXES_COLUMNS = columns(
    ("prefix", _S),
    ("pending", _I),
    ("active", _I),
    ("results", _I),
    ("oldest_pending_ms", _I),
    ("max_heartbeat_age_ms", _I),
    ("last_concurrency", _I),
)


def queue_table(state: QueueState) -> ResultSet:
    """``system.queue``: every item in ascending id order; ``id`` is the key (§2.1)."""
    rows: list[Row] = [
        (
            item.key,
            item.id,
            item.prefix,
            item.created,
            item.status,
            item.priority,
            item.heartbeat,
            item.orphaned,
            item.payload,
            item.extra,
            item.process_id,
            item.exclusive,
            item.external_id,
        )
        for item in state.items()
    ]
    return ResultSet(QUEUE_COLUMNS, rows)


def queue_results_table(state: QueueState) -> ResultSet:
    rows: list[Row] = [
        (r.id, r.path, r.expire, r.deleted, r.value, r.external_id)
        for r in state.results.all_by_id()
    ]
    return ResultSet(QUEUE_RESULTS_COLUMNS, rows)


def queue_prefixes_table(state: QueueState, now: int) -> ResultSet:
    """One row per prefix holding items or results, ordered by prefix. The ages are
    ``now`` minus the oldest pending item's ``created`` and minus the stalest active
    item's heartbeat; NULL when there is no such item."""
    rows = [prefix.summary_row(now) for prefix in state.prefixes.sorted()]
    return ResultSet(QUEUE_PREFIXES_COLUMNS, rows)
