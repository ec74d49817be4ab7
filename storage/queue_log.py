"""The departure log: the last N items that left the queue (``system.queue_log``).

Every way out of the queue is one :class:`Departure` with a reason. ``queued_ms`` is the
time from ADD to the claim (or to the departure when never claimed); ``active_ms`` is the
time from the claim to the departure, NULL for an item that was never active. The log is a
bounded deque, so it costs O(1) per departure and ``--queue-log-size`` rows at most.
A bulk departure (TRUNCATE, PURGE) records only the rows the log keeps (its last
``--queue-log-size`` items), as (item, reason, instant) entries that become
:class:`Departure` rows when read, so recording them costs a tuple each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.queue_item import Item
from cubequeue.storage.system_schemas import QUEUE_LOG_COLUMNS

__all__ = ["Departure", "DepartureLog", "Reason"]

Reason = Literal[
    "acked",
    "cancelled",
    "cancelled_stalled",
    "cancelled_orphaned",
    "purged",
    "truncated",
    "expired",
]


@dataclass(frozen=True, slots=True)
class Departure:
    id: int
    path: str
    reason: Reason
    at: int
    queued_ms: int
    active_ms: int | None
    #: how many items left in the bulk removal (TRUNCATE, PURGE, one expiry sweep) this one
    #: was part of; 0 for a departure of its own. The server names each item of a small one
    #: in the log and only the summary line of a large one.
    bulk: int = 0

    @classmethod
    def of(cls, item: Item, reason: Reason, now: int, bulk: int = 0) -> Departure:
        if item.activated is None:
            return cls(item.id, item.path, reason, now, now - item.created, None, bulk)
        return cls(
            item.id, item.path, reason, now, item.activated - item.created,
            now - item.activated, bulk,
        )


_Entry = Departure | tuple[Item, Reason, int]


def _departure(entry: _Entry) -> Departure:
    return entry if isinstance(entry, Departure) else Departure.of(*entry)


class DepartureLog:
    __slots__ = ("_rows",)

    def __init__(self, size: int) -> None:
        self._rows: deque[_Entry] = deque(maxlen=max(0, size))

    @property
    def size(self) -> int:
        """The most rows kept (``--queue-log-size``)."""
        return self._rows.maxlen or 0

    def record(self, departure: Departure) -> None:
        self._rows.append(departure)

    def record_bulk(self, items: Sequence[Item], reason: Reason, now: int) -> None:
        """``items`` left together, in this order; only the last :attr:`size` are kept, so
        the caller passes at most those."""
        self._rows.extend([(item, reason, now) for item in items[-self.size or len(items):]])

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self) -> list[Departure]:
        """Oldest departure first."""
        return [_departure(e) for e in self._rows]

    def table(self) -> ResultSet:
        """Oldest departure first."""
        return ResultSet(QUEUE_LOG_COLUMNS, list(_table_rows(self._rows)))


def _table_rows(entries: Iterable[_Entry]) -> Iterable[Row]:
    for entry in entries:
        d = _departure(entry)
        yield (d.id, d.path, d.reason, d.at, d.queued_ms, d.active_ms)
