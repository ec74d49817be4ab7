"""The departure log: the last N items that left the queue (``system.queue_log``).

Every way out of the queue is one :class:`Departure` with a reason. ``queued_ms`` is the
time from ADD to the claim (or to the departure when never claimed); ``active_ms`` is the
time from the claim to the departure, NULL for an item that was never active. The log is a
bounded deque, so it costs O(1) per departure and ``--queue-log-size`` rows at most.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from cubequeue.grammar.results import ResultSet
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

    @classmethod
    def of(cls, item: Item, reason: Reason, now: int) -> Departure:
        if item.activated is None:
            return cls(item.id, item.path, reason, now, now - item.created, None)
        return cls(
            item.id, item.path, reason, now, item.activated - item.created, now - item.activated
        )


class DepartureLog:
    __slots__ = ("_rows",)

    def __init__(self, size: int) -> None:
        self._rows: deque[Departure] = deque(maxlen=max(0, size))

    def record(self, departure: Departure) -> None:
        self._rows.append(departure)

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self) -> list[Departure]:
        """Oldest departure first."""
        return list(self._rows)

    def table(self) -> ResultSet:
        """Oldest departure first."""
        return ResultSet(
            QUEUE_LOG_COLUMNS,
            [(d.id, d.path, d.reason, d.at, d.queued_ms, d.active_ms) for d in self._rows],
        )
