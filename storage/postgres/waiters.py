"""RESULT_BLOCKING waiters of one front end, matched against ACK events from any front end.

A waiter is registered under an id or a path *before* its first look at the results
(docs/topology.md §3, RESULT_BLOCKING), so an ACK that commits after that look is seen as
an event: a NOTIFY ``<id> <flags> <path>`` or, when notifications were lost, an ack
marker whose sequence number is above the waiter's ``watermark`` (read in the look, under
the prefix lock).
Events that arrive while the look is still running are held back (``deferred``) and
dropped if the look found the row, so one ACK never answers a waiter twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from cubequeue.grammar.results import ResultSet

__all__ = ["AckEvent", "Waiter", "WaiterHub", "path_hash"]

#: flags of an ACK event (the NOTIFY payload's second word)
HAS_RESULT = 1
HASHED_PATH = 2


def path_hash(path: str) -> str:
    """How an over-long path travels in a notification (PostgreSQL's md5)."""
    return hashlib.md5(path.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class AckEvent:
    """One committed ACK: its item id, whether it stored a result, its path (or md5)."""

    id: int
    has_result: bool
    path: str
    hashed: bool = False
    #: the ack marker's sequence number (0 for a NOTIFY, which needs no ordering)
    seq: int = 0

    @classmethod
    def parse(cls, payload: str) -> AckEvent | None:
        """``<id> <flags> <path>``; None for anything else (never raises)."""
        head, _, rest = payload.partition(" ")
        flags, _, path = rest.partition(" ")
        if not head.isdigit() or not flags.isdigit():
            return None
        bits = int(flags)
        return cls(int(head), bool(bits & HAS_RESULT), path, bool(bits & HASHED_PATH))


class Waiter:
    """One waiting RESULT_BLOCKING; :meth:`cancel` is idempotent (the ``Cancellable``)."""

    __slots__ = ("_hub", "callback", "cancelled", "deferred", "key", "looking", "watermark")

    def __init__(self, hub: WaiterHub, key: int | str, callback: Callable[[ResultSet], None]):
        self._hub = hub
        self.key = key
        self.callback = callback
        #: set by the server (timeout, disconnect): never called back after that
        self.cancelled = False
        #: True until the first look returned; events meanwhile wait in ``deferred``
        self.looking = True
        self.deferred: list[AckEvent] = []
        #: the ack-marker sequence at the first look; only markers above it are news
        self.watermark = 0

    def cancel(self) -> None:
        self.cancelled = True
        self._hub._remove(self)

    def take(self) -> None:
        """Unregister while a delivery is under way (a second event then finds nothing)."""
        self._hub._remove(self)

    def restore(self) -> None:
        """Register again after a delivery that could not be made (unless cancelled)."""
        if not self.cancelled:
            self._hub._add(self)

    def fire(self, result: ResultSet) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.callback(result)


class WaiterHub:
    """Waiters by id and by path (and by the md5 of a path, for long paths)."""

    __slots__ = ("_by_id", "_by_path")

    def __init__(self) -> None:
        self._by_id: dict[int, dict[Waiter, None]] = {}
        self._by_path: dict[str, dict[Waiter, None]] = {}

    @property
    def count(self) -> int:
        return sum(map(len, self._by_id.values())) + sum(map(len, self._by_path.values()))

    def register(self, key: int | str, callback: Callable[[ResultSet], None]) -> Waiter:
        waiter = Waiter(self, key, callback)
        self._add(waiter)
        return waiter

    def _add(self, waiter: Waiter) -> None:
        key = waiter.key
        if isinstance(key, int):
            self._by_id.setdefault(key, {})[waiter] = None
        else:
            self._by_path.setdefault(key, {})[waiter] = None

    def _remove(self, waiter: Waiter) -> None:
        key = waiter.key
        if isinstance(key, int):
            group = self._by_id.get(key)
            if group is not None:
                group.pop(waiter, None)
                if not group:
                    del self._by_id[key]
        else:
            group = self._by_path.get(key)
            if group is not None:
                group.pop(waiter, None)
                if not group:
                    del self._by_path[key]

    def matching(self, event: AckEvent) -> tuple[list[Waiter], list[Waiter]]:
        """(id waiters, path waiters) that ``event`` answers, looking ones excluded."""
        by_id = list(self._by_id.get(event.id, ()))
        if event.hashed:
            by_path = [w for path, group in self._by_path.items()
                       if len(path) * 4 > 7000 and path_hash(path) == event.path for w in group]
        else:
            by_path = list(self._by_path.get(event.path, ()))
        return by_id, by_path

    def all(self) -> list[Waiter]:
        return [w for g in self._by_id.values() for w in g] + [
            w for g in self._by_path.values() for w in g
        ]
