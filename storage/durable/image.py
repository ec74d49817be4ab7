"""The durable state as plain rows: what recovery replays records into.

An :class:`Image` is the store's persistent state without its indexes: items, results,
cache entries and remembered prefix fields by key, the id reservation and the newest
timestamp seen. Each row is the validated record itself, kind first: no copy per item (a
slice of each ITEM_PUT cost a tenth of a recovery at 10^6 items). Applying a record is
idempotent (records are states), and :meth:`Image.records` lists the state back as
records, so ``image == replay(image.records())``; recovery builds the live store from an
image in one pass (the indexes are rebuilt there, not replayed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.records import Record
from cubequeue.storage.queue_item import path_prefix

__all__ = ["Image"]


#: one stored row: its latest state record, kind first
Row = tuple[object, ...]


class Image:
    __slots__ = ("cache", "clock_offset", "items", "max_ts", "prefixes", "reserved", "results")

    def __init__(self) -> None:
        #: id → its ITEM_PUT record (the decoded tuple itself; ITEM_SET, rarer, builds a
        #: new one)
        self.items: dict[int, Row] = {}
        #: id → its RESULT_PUT record
        self.results: dict[int, Row] = {}
        #: path → its CACHE_PUT record, least recently written first
        self.cache: dict[str, Row] = {}
        #: prefix → its PREFIX record (only prefixes that remember something)
        self.prefixes: dict[str, Row] = {}
        #: the highest ID_RESERVE seen: no queue id at or above it was handed out
        self.reserved = 1
        #: the newest timestamp in the data (expiry at load uses max(wall clock, this))
        self.max_ts = 0
        self.clock_offset = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Image):
            return NotImplemented
        return (self.items, self.results, list(self.cache.items()), self.prefixes) == (
            other.items, other.results, list(other.cache.items()), other.prefixes)

    def __repr__(self) -> str:
        return (f"Image(items={self.items}, results={self.results}, cache={self.cache}, "
                f"prefixes={self.prefixes})")

    @property
    def next_id(self) -> int:
        """The first queue id recovery may hand out: past every id seen or reserved."""
        top = max(max(self.items, default=0), max(self.results, default=0))
        return max(self.reserved, top + 1)

    @property
    def next_cache_id(self) -> int:
        return 1 + max((cast(int, row[1]) for row in self.cache.values()), default=0)

    # Field reads below rely on validate() having checked each record's types, so they
    # are typed with ignores rather than cast(): cast is a call, three per item at 10^6.

    def apply(self, rec: Record) -> None:
        kind = rec[0]
        if kind == r.ITEM_PUT:
            self.items[rec[1]] = rec  # type: ignore[index]  # validated int id
            if rec[5] > self.max_ts:  # type: ignore[operator]  # validated int
                self.max_ts = rec[5]  # type: ignore[assignment]  # validated int
            if rec[12] is not None or rec[13] is not None:
                self._seen(rec[12], rec[13])
        elif kind == r.ITEM_SET:
            item = self.items.get(rec[1])  # type: ignore[call-overload]  # validated int
            if item is not None:
                self.items[item[1]] = (*item[:11], rec[4], rec[3], rec[2])
            self._seen(rec[2], rec[3])
        elif kind == r.ITEM_DEL:
            self.items.pop(rec[1], None)  # type: ignore[call-overload]  # validated int
        elif kind == r.RESULT_PUT:
            self.results[rec[1]] = rec  # type: ignore[index]  # validated int
        elif kind == r.RESULT_FLAG:
            result = self.results.get(rec[1])  # type: ignore[call-overload]  # validated int
            if result is not None:
                self.results[result[1]] = (*result[:6], True)
        elif kind == r.RESULT_DEL:
            self.results.pop(rec[1], None)  # type: ignore[call-overload]  # validated int
        elif kind == r.CACHE_PUT:
            path = cast(str, rec[2])
            self.cache.pop(path, None)
            self.cache[path] = rec
        elif kind == r.CACHE_DEL:
            self.cache.pop(cast(str, rec[1]), None)
        elif kind == r.PREFIX:
            if rec[2] is None and rec[3] is None and rec[4] is None:
                self.prefixes.pop(cast(str, rec[1]), None)  # forgotten
            else:
                self.prefixes[cast(str, rec[1])] = rec
        elif kind == r.TRUNCATE:
            if rec[1] == "queue":
                self.items.clear()
                self.results.clear()
                self.prefixes.clear()
            else:
                self.cache.clear()
        elif kind == r.PURGE:
            self._purge(cast(str, rec[1]), cast(str, rec[2]), cast("str | None", rec[3]),
                        cast(int, rec[4]))
        elif kind == r.ID_RESERVE:
            self.reserved = max(self.reserved, cast(int, rec[1]))
        elif kind == r.CLOCK:
            self._seen(rec[1])
            self.clock_offset = cast(int, rec[2])

    def load_item_puts(self, records: list[Record]) -> None:
        """Apply many pending ITEM_PUTs at once (:func:`~.records.plain_item_puts` said
        so): as :meth:`apply` of each in order, with the dict and the newest timestamp
        updated by C loops."""
        self.items.update(zip([rec[1] for rec in records], records, strict=True))  # type: ignore[misc]  # validated int ids
        newest = max(rec[5] for rec in records)  # type: ignore[type-var]  # validated ints
        if newest > self.max_ts:  # type: ignore[operator]  # validated int
            self.max_ts = newest  # type: ignore[assignment]  # validated int

    def _purge(self, table: str, prefix: str, status: str | None, bound: int) -> None:
        """Replay a PURGE: one pass over the table (the live statement detached the
        prefix in O(1); replaying it costs a scan, once per PURGE in the log)."""
        if table == "queue":
            items = self.items
            gone = [id_ for id_, item in items.items()
                    if id_ < bound and path_prefix(cast(str, item[2])) == prefix
                    and (status is None or (item[13] is None) == (status == "pending"))]
            for id_ in gone:
                del items[id_]
        else:
            cache = self.cache
            for path in [p for p, row in cache.items()
                         if cast(int, row[1]) < bound and path_prefix(p) == prefix]:
                del cache[path]

    def _seen(self, *stamps: object) -> None:
        for stamp in stamps:
            if stamp is not None and cast(int, stamp) > self.max_ts:
                self.max_ts = cast(int, stamp)

    def expire(self, now: int) -> int:
        """Drop what has expired by ``now`` with the live store's rules (items at
        ``expire <= now``, results once ``expire < now``, cache at ``expire <= now``)."""
        items = [k for k, v in self.items.items() if v[7] <= now]  # type: ignore[operator]  # validated int
        results = [k for k, v in self.results.items() if v[4] < now]  # type: ignore[operator]  # validated int
        cache = [k for k, v in self.cache.items() if v[4] is not None and v[4] <= now]  # type: ignore[operator]  # validated int
        for id_ in items:
            del self.items[id_]
        for id_ in results:
            del self.results[id_]
        for path in cache:
            del self.cache[path]
        return len(items) + len(results) + len(cache)

    def records(self) -> Iterator[Record]:
        """The state as records, in an order that replays to it."""
        yield (r.CLOCK, self.max_ts, self.clock_offset)
        yield (r.ID_RESERVE, self.next_id)
        yield from self.prefixes.values()
        yield from self.items.values()
        yield from self.results.values()
        yield from self.cache.values()
