"""The expiry heap: items and results leave memory when they expire (dialect doc §8 rule 9).

One min-heap of (due, id, kind), each entry packed into one int, where ``due`` is the first millisecond at which the row is
gone: an item at its ``expire`` (index lookups skip ``expire <= now``, §2.7), a result one
millisecond after its ``expire`` (results are returned while ``expire >= now``, §2.7).

The store checks the heap at the start of each step, so an idle store does no work and a
step with nothing due pays one comparison. Rows removed for other reasons (ACK, CANCEL…)
leave their entry behind; the caller reports them with :meth:`discard`, and once dead
entries outnumber live ones the heap is rebuilt, keeping memory proportional to live rows
at O(1) amortized cost per removal.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["ITEM", "RESULT", "ExpiryHeap"]

ITEM = 0
RESULT = 1

_MIN_REBUILD = 1024
_BIAS = 1 << 63
_ID_MASK = (1 << 64) - 1


class ExpiryHeap:
    __slots__ = ("_dead", "_heap")

    def __init__(self) -> None:
        self._heap: list[int] = []
        self._dead = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, due: int, kind: int, id_: int) -> None:
        heapq.heappush(self._heap, (((due + _BIAS) << 64 | id_) << 1) | kind)

    def next_due(self) -> int | None:
        return (self._heap[0] >> 65) - _BIAS if self._heap else None

    def pop_due(self, now: int) -> list[tuple[int, int]]:
        """Remove and return (kind, id) of every entry due at ``now``, oldest first."""
        heap = self._heap
        # entries due at or before now are exactly those below the first key of now + 1
        limit = (now + 1 + _BIAS) << 65
        if not heap or heap[0] >= limit:
            return []
        out: list[tuple[int, int]] = []
        while heap and heap[0] < limit:
            entry = heapq.heappop(heap)
            out.append((entry & 1, (entry >> 1) & _ID_MASK))
        return out

    def discard(self, live: Callable[[int, int], bool]) -> None:
        """Note that one tracked row left early; rebuild when dead entries dominate.

        ``live(kind, id)`` tells whether an entry's row still exists.
        """
        self._dead += 1
        if self._dead > _MIN_REBUILD and self._dead * 2 > len(self._heap):
            self._heap = [e for e in self._heap if live(e & 1, (e >> 1) & _ID_MASK)]
            heapq.heapify(self._heap)
            self._dead = 0

    def clear(self) -> None:
        self._heap.clear()
        self._dead = 0

    def forget_dead(self, count: int) -> None:
        """``count`` entries popped by :meth:`pop_due` were already dead."""
        self._dead = max(0, self._dead - count)
