"""State capture (a test helper): the in-memory store's whole state as plain records, in slices.

The durable store's snapshots do not use it (they write the store's own
``MemoryStore.snapshot_slices``); it stays here as a readable model of the store's state.
:func:`capture` takes only the *ids* of the rows at the start (a list of ints, not a
copy of the rows) and builds each slice of records when it is asked for.

What a capture holds:

* Consumed with no step in between, it is exactly the state at the moment it started.
* When steps run between slices, each record shows its row as it was when its slice was
  built; a row that left meanwhile is skipped, and rows created after the start are not
  included (their ids are at or above the captured counters). A log that records every
  step from the capture's start with absolute values therefore replays onto it to the
  present state (a fuzzy checkpoint).

Records come in a fixed order: :class:`Counters` first, then prefixes, items (ascending
id), results, cache entries (least recently used first, so LRU order survives) and the
departure log (oldest first). Departures are the log's own immutable
:class:`~cubequeue.storage.queue_log.Departure` rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cubequeue.storage.cache import CacheStore
from cubequeue.storage.queue import QueueState
from cubequeue.storage.queue_log import Departure
from cubequeue.storage.store import MemoryStore

__all__ = [
    "CacheRecord",
    "Counters",
    "ItemRecord",
    "PrefixRecord",
    "ResultRecord",
    "StateRecord",
    "capture",
    "capture_store",
]


@dataclass(frozen=True, slots=True)
class Counters:
    """The next queue id (items and results share it) and the next cache row id."""

    next_item_id: int
    next_cache_id: int


@dataclass(frozen=True, slots=True)
class PrefixRecord:
    """What a prefix remembers beyond its rows (system.queue_prefixes, CANCEL's reason)."""

    prefix: str
    last_concurrency: int | None
    last_to_cancel: tuple[int | None, int | None] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRecord:
    id: int
    path: str
    payload: str
    priority: int
    created: int
    orphaned: int | None
    expire: int
    process_id: str | None
    exclusive: bool
    external_id: str | None
    extra: str | None
    heartbeat: int | None
    activated: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRecord:
    id: int
    path: str
    value: str
    expire: int
    external_id: str | None
    deleted: bool


@dataclass(frozen=True, slots=True)
class CacheRecord:
    id: int
    path: str
    value: str
    expire: int | None


StateRecord = Counters | PrefixRecord | ItemRecord | ResultRecord | CacheRecord | Departure


def capture_store(store: MemoryStore, slice_items: int) -> Iterator[list[StateRecord]]:
    """The store's whole state in slices of records. Expired rows are swept first
    (a step's commit, then the cache's sweep), so none is captured."""
    store._begin()
    store._commit()
    store._cache.sweep()
    return capture(store._queue, store._cache, slice_items)


def capture(queue: QueueState, cache: CacheStore, slice_items: int) -> Iterator[list[StateRecord]]:
    """The state as slices of at most ``slice_items`` records (see the module docstring)."""
    if slice_items < 1:
        raise ValueError(f"slice_items must be at least 1, not {slice_items}")
    counters = Counters(queue.peek_next_id(), cache.next_id)
    keys = _Keys(
        prefixes=[s.prefix for s in queue.prefixes.sorted()],
        item_ids=queue.item_ids(),
        result_ids=queue.results.ids(),
        cache_paths=cache.lru_paths(),
        departures=queue.log.rows(),  # immutable rows: this list is their whole copy
    )
    return _slices(_records(queue, cache, counters, keys), slice_items)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Keys:
    """What the capture fixed at its start: the rows it will visit."""

    prefixes: list[str]
    item_ids: list[int]
    result_ids: list[int]
    cache_paths: list[str]
    departures: list[Departure]


def _records(
    queue: QueueState, cache: CacheStore, counters: Counters, keys: _Keys
) -> Iterator[StateRecord]:
    """Each record built when it is reached, from the row as it is then."""
    yield counters
    for prefix in keys.prefixes:
        state = queue.prefixes.get(prefix)
        if state is not None:
            yield PrefixRecord(prefix, state.last_concurrency, state.last_to_cancel)
    for id_ in keys.item_ids:
        item = queue.by_id(id_)
        if item is not None:
            yield ItemRecord(
                id=item.id,
                path=item.path,
                payload=item.payload,
                priority=item.priority,
                created=item.created,
                orphaned=item.orphaned,
                expire=item.expire,
                process_id=item.process_id,
                exclusive=item.exclusive,
                external_id=item.external_id,
                extra=item.extra,
                heartbeat=item.heartbeat,
                activated=item.activated,
            )
    for id_ in keys.result_ids:
        result = queue.results.by_id(id_)
        if result is not None:
            yield ResultRecord(
                id=result.id,
                path=result.path,
                value=result.value,
                expire=result.expire,
                external_id=result.external_id,
                deleted=result.deleted,
            )
    for path in keys.cache_paths:
        row = cache.row(path)
        if row is not None and row[0] < counters.next_cache_id:  # not a newer row
            yield CacheRecord(row[0], path, row[1], row[2])
    yield from keys.departures


def _slices(records: Iterator[StateRecord], size: int) -> Iterator[list[StateRecord]]:
    out: list[StateRecord] = []
    for record in records:
        out.append(record)
        if len(out) == size:
            yield out
            out = []
    if out:
        yield out
