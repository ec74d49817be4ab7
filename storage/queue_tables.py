"""The rows of the queue's system tables: ``system.queue``, ``system.queue_results`` and
``system.queue_prefixes`` (``docs/dialect.md`` §8 rule 11; columns in :mod:`.system_schemas`).

Only live rows are shown: expired rows were swept (§8 rule 9), unlike Cube Store whose
tables still show them until compaction (§5.2).
"""

from __future__ import annotations

from collections.abc import Iterator

from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.interface import RowStream
from cubequeue.storage.queue import QueueState
from cubequeue.storage.queue_item import Item
from cubequeue.storage.system_schemas import (
    QUEUE_COLUMNS,
    QUEUE_PREFIXES_COLUMNS,
    QUEUE_RESULTS_COLUMNS,
)

__all__ = [
    "queue_prefixes_table",
    "queue_results_table",
    "queue_stream",
    "queue_table",
]


def queue_stream(state: QueueState, slice_rows: int) -> ResultSet | RowStream:
    """``system.queue`` as a frame when it fits one slice, else as a stream that knows
    its length up front (so plain SQL refuses a huge table before building a row, see
    ``--max-sql-rows``) and builds ``slice_rows`` rows at a time from the ids held when
    the first slice is read. Its reader reads it within one step (plain SQL does), so
    the rows are those of that instant."""
    count = len(state)
    if count <= slice_rows:
        return queue_table(state)
    return RowStream(QUEUE_COLUMNS, _queue_slices(state, slice_rows), count)


def _queue_slices(state: QueueState, slice_rows: int) -> Iterator[list[Row]]:
    ids = state.item_ids()
    for start in range(0, len(ids), slice_rows):
        items = [state.by_id(id_) for id_ in ids[start:start + slice_rows]]
        yield [_queue_row(item) for item in items if item is not None]


def _queue_row(item: Item) -> Row:
    return (
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


def queue_table(state: QueueState) -> ResultSet:
    """``system.queue``: every item in ascending id order; ``id`` is the key (§2.1)."""
    rows: list[Row] = [_queue_row(item) for item in state.items()]
    return ResultSet(QUEUE_COLUMNS, rows)


def queue_results_table(state: QueueState) -> ResultSet:
    rows: list[Row] = [
        (r.id, r.path, r.expire, r.deleted, r.value, r.external_id)
        for r in state.results.all_by_id()
    ]
    return ResultSet(QUEUE_RESULTS_COLUMNS, rows)


def queue_prefixes_table(state: QueueState, now: int, slice_rows: int) -> ResultSet | RowStream:
    """One row per prefix holding items or results, ordered by prefix. The ages are
    ``now`` minus the oldest pending item's ``created`` and minus the stalest active
    item's heartbeat; NULL when there is no such item. Like :func:`queue_stream`, more
    prefixes than one slice are a stream that knows its length before a row is built
    (or the prefixes sorted), so ``--max-sql-rows`` refuses it first."""
    count = len(state.prefixes)
    if count <= slice_rows:
        rows = [prefix.summary_row(now) for prefix in state.prefixes.sorted()]
        return ResultSet(QUEUE_PREFIXES_COLUMNS, rows)
    return RowStream(QUEUE_PREFIXES_COLUMNS, _prefix_slices(state, now, slice_rows), count)


def _prefix_slices(state: QueueState, now: int, slice_rows: int) -> Iterator[list[Row]]:
    prefixes = state.prefixes.sorted()
    for start in range(0, len(prefixes), slice_rows):
        yield [prefix.summary_row(now) for prefix in prefixes[start:start + slice_rows]]
