"""``SYS CACHESTORE INFO``'s rows (``docs/dialect.md`` §5.1), for the cache and the queue.

Seven rows per table (CacheItems, QueueItems, QueueResults), built by :func:`totals_rows`: keys_total, size_total, expired_keys_total, expired_size_total,
min_row_size, max_row_size and avg_row_size, sizes as humansize DECIMAL text
(:func:`~cubequeue.storage.sizes.format_size`). A row's size is the UTF-8 length of its
text fields (path, payload, extra for an item; path and value for a result), the same
measure the cache uses for its entries. ``expired_*`` count rows past their expiry that
the sweep has not removed yet (Cube Store: not yet compacted), which after a step's sweep
is 0 unless the bounded sweep left a backlog.

Neither table's cost grows with its rows: their sizes are kept as they change
(:mod:`.row_sizes`; the cache's in :mod:`.cache`), the expired ones are the expiry heaps'
due part (empty once a step's sweep has caught up), and only the items an unfinished
PURGE still holds are looked at one by one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from cubequeue.storage.queue import QueueState
from cubequeue.storage.row_sizes import SizeTally, item_row_size, result_row_size
from cubequeue.storage.sizes import format_size

__all__ = [
    "InfoRow",
    "item_row_size",
    "queue_info_rows",
    "result_row_size",
    "table_rows",
    "tally_rows",
    "totals_rows",
]

InfoRow = tuple[str, str, str | None]

_EXPIRED_KEYS = "Total number of keys that expired but were not truncated via compaction."
_EXPIRED_SIZE = "Total size of keys that expired but were not truncated via compaction."


def table_rows(table: str, rows: Iterable[tuple[int, bool]]) -> list[InfoRow]:
    """The seven ``<table>.*`` rows; ``rows`` yields (size, expired) per row (a walk of
    every row: the stores keep totals, and the tests check them against this)."""
    count = total = expired_keys = expired_size = smallest = largest = 0
    for size, expired in rows:
        count += 1
        total += size
        if expired:
            expired_keys += 1
            expired_size += size
        smallest = size if count == 1 else min(smallest, size)
        largest = max(largest, size)
    return totals_rows(table, count, total, expired_keys, expired_size, smallest, largest)


def totals_rows(table: str, count: int, total: int, expired_keys: int, expired_size: int,
                smallest: int, largest: int) -> list[InfoRow]:
    """The seven ``<table>.*`` rows from their totals (a store that sums in SQL calls
    this directly)."""
    average = total // count if count else 0
    return [
        (f"{table}.keys_total", str(count), None),
        (f"{table}.size_total", format_size(total), None),
        (f"{table}.expired_keys_total", str(expired_keys), _EXPIRED_KEYS),
        (f"{table}.expired_size_total", format_size(expired_size), _EXPIRED_SIZE),
        (f"{table}.min_row_size", format_size(smallest), None),
        (f"{table}.max_row_size", format_size(largest), None),
        (f"{table}.avg_row_size", format_size(average), None),
    ]


def queue_info_rows(state: QueueState, now: int) -> list[InfoRow]:
    """The 14 QueueItems.* and QueueResults.* rows; items expire at ``expire <= now``,
    results once ``expire < now`` (§2.7)."""
    purged = Counter(map(item_row_size, state.purged_items()))
    items = tally_rows("QueueItems", state.item_sizes, purged,
                       map(item_row_size, state.due_items(now)))
    results = tally_rows("QueueResults", state.result_sizes, None,
                         map(result_row_size, state.due_results(now)))
    return items + results


def tally_rows(table: str, tally: SizeTally, hidden: Counter[int] | None,
               expired: Iterable[int]) -> list[InfoRow]:
    """The seven ``<table>.*`` rows from ``tally`` less ``hidden`` (see
    :meth:`SizeTally.figures`), ``expired`` yielding the size of each expired row."""
    count, total, smallest, largest = tally.figures(hidden)
    expired_keys = expired_size = 0
    for size in expired:
        expired_keys += 1
        expired_size += size
    return totals_rows(table, count, total, expired_keys, expired_size, smallest, largest)
