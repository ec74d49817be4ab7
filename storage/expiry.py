"""The expiry heap that queue items, queue results and cache entries share
(``docs/dialect.md`` §8 rule 9: expired rows leave memory).

A min-heap of (due, id) pairs, each packed into one int, where ``due`` is the first
millisecond at which the row is gone. The owner keeps the rows; the heap only knows ids
and asks the owner's ``live(due, id)`` predicate whether an entry still stands for a row.

The owner checks the heap at the start of each step, so an idle store does no work and a
step with nothing due pays one comparison. A row removed for another reason (ACK, CANCEL,
REMOVE, a new TTL…) leaves its entry behind: the owner reports it with
:meth:`ExpiryHeap.note_dead`, and once dead entries outnumber live ones the heap is rebuilt
from the live ones, so memory stays proportional to live rows at O(1) amortized cost per
removal. Popping never returns a dead entry.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["REBUILD_AFTER", "ExpiryHeap", "Liveness"]

#: ``live(due, id)``: does this entry still stand for a row due at ``due``?
Liveness = Callable[[int, int], bool]

#: dead entries tolerated before a rebuild is considered (then: once they are the majority)
REBUILD_AFTER = 1024
#: dues are shifted by this so that a negative due still packs in order
_BIAS = 1 << 63
_ID_BITS = 64
_ID_MASK = (1 << _ID_BITS) - 1


class ExpiryHeap:
    __slots__ = ("_dead", "_heap", "_live")

    def __init__(self, live: Liveness) -> None:
        self._heap: list[int] = []
        self._dead = 0
        self._live = live

    def __len__(self) -> int:
        """Entries held, dead ones included."""
        return len(self._heap)

    def push(self, due: int, id_: int) -> None:
        heapq.heappush(self._heap, (due + _BIAS) << _ID_BITS | id_)

    def next_due(self) -> int | None:
        """The earliest due held (perhaps a dead entry's: an early look costs nothing)."""
        return (self._heap[0] >> _ID_BITS) - _BIAS if self._heap else None

    @property
    def entries(self) -> list[int]:
        """The packed entries (for releasing a detached heap in slices)."""
        return self._heap

    def pop_due(self, now: int, limit: int | None = None) -> list[int]:
        """Remove entries due at or before ``now``, oldest first, until ``limit`` live
        ones were found (all when None), or ``4 * limit`` entries were popped; their ids,
        each once (liveness is judged before the caller removes any row)."""
        heap = self._heap
        # entries due at or before now are exactly those below the first key of now + 1
        bound = (now + 1 + _BIAS) << _ID_BITS
        if not heap or heap[0] >= bound:
            return []
        live = self._live
        out: list[int] = []
        dead = 0
        previous = -1
        wanted = -1 if limit is None else limit
        # dead entries popped count too (a quarter unit each), so a run of them (a purge
        # leaves its items' entries behind) cannot hold one call for long either
        budget = -1 if limit is None else 4 * limit
        while heap and heap[0] < bound and len(out) != wanted and budget != 0:
            budget -= 1
            entry = heapq.heappop(heap)
            id_ = entry & _ID_MASK
            if entry != previous and live((entry >> _ID_BITS) - _BIAS, id_):
                out.append(id_)
            else:
                dead += 1
            previous = entry
        if dead:
            self._dead = max(0, self._dead - dead)
        return out

    def note_dead(self) -> None:
        """One row left before its due, so its entry is dead; rebuild when dead entries
        dominate (a rebuild also drops duplicate entries)."""
        self._dead += 1
        if self._dead > REBUILD_AFTER and self._dead * 2 > len(self._heap):
            live = self._live
            kept = {e for e in self._heap if live((e >> _ID_BITS) - _BIAS, e & _ID_MASK)}
            self._heap = list(kept)
            heapq.heapify(self._heap)
            self._dead = 0

    def clear(self) -> None:
        self._heap.clear()
        self._dead = 0
