"""The expiry heap that queue items, queue results and cache entries share
(``docs/dialect.md`` §8 rule 9: expired rows leave memory).

A min-heap of (due, id) pairs, each packed into one int, where ``due`` is the first
millisecond at which the row is gone. The owner keeps the rows; the heap only knows ids
and asks the owner's ``live(due, id)`` predicate whether an entry still stands for a row.

The owner checks the heap at the start of each step, so an idle store does no work and a
step with nothing due pays one comparison. A row removed for another reason (ACK, CANCEL,
REMOVE, a new TTL…) leaves its entry behind: the owner reports it with
:meth:`ExpiryHeap.note_dead`, and once dead entries outnumber live ones a compaction pass
starts, so memory stays proportional to live rows. Popping never returns a dead entry.

The pass works in place and a few entries at a time, never in one O(n) step (filtering
10⁶ entries and heapifying them held the event loop for hundreds of milliseconds): each
:meth:`~ExpiryHeap.push` and :meth:`~ExpiryHeap.note_dead` while it runs examines
``step`` more entries, from the end of the array towards the root. A dead entry is
deleted where it stands (the last entry takes its place and sifts), so the array is a
valid heap after every call and pops go on as usual: nothing due is missed, and only
entries the owner's predicate calls dead are deleted. An entry a sift moves past the
cursor escapes this pass (it is dropped when popped, or by a later pass). With ``step``
examinations per call, a pass over n entries ends within 2n / ``step`` calls (a deleted
entry's slot is examined again), so the pushes that keep the heap growing cannot outrun
it: memory stays within a constant factor of the live rows. Duplicate entries (a row re-timed back to a due
it had) are kept, and popped once.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["COMPACT_STEP", "REBUILD_AFTER", "ExpiryHeap", "Liveness"]

#: ``live(due, id)``: does this entry still stand for a row due at ``due``?
Liveness = Callable[[int, int], bool]

#: dead entries tolerated before a compaction is considered (then: once they are the majority)
REBUILD_AFTER = 1024
#: entries a running compaction examines per push or note_dead (a few microseconds)
COMPACT_STEP = 8
#: dues are shifted by this so that a negative due still packs in order
_BIAS = 1 << 63
_ID_BITS = 64
_ID_MASK = (1 << _ID_BITS) - 1


class ExpiryHeap:
    __slots__ = ("_cursor", "_dead", "_heap", "_live", "_noted", "_rebuild_after", "_step")

    def __init__(
        self, live: Liveness, *, rebuild_after: int = REBUILD_AFTER, step: int = COMPACT_STEP
    ) -> None:
        self._heap: list[int] = []
        #: dead entries believed held (an estimate: never below zero, reset by each pass)
        self._dead = 0
        self._live = live
        #: the next index the running compaction examines; -1 when none runs
        self._cursor = -1
        #: note_dead calls since the running compaction started
        self._noted = 0
        self._rebuild_after = rebuild_after
        self._step = max(1, step)

    def __len__(self) -> int:
        """Entries held, dead ones included."""
        return len(self._heap)

    def push(self, due: int, id_: int) -> None:
        heapq.heappush(self._heap, (due + _BIAS) << _ID_BITS | id_)
        if self._cursor >= 0:
            self._compact(self._step)

    def load(self, dues: list[int], ids: list[int]) -> None:
        """Many entries at once (recovery): one heapify instead of a sift per push."""
        heap = self._heap
        heap.extend([(due + _BIAS) << _ID_BITS | id_ for due, id_ in zip(dues, ids, strict=True)])
        heapq.heapify(heap)

    @property
    def compacting(self) -> bool:
        """A compaction pass is under way (tests, INFO)."""
        return self._cursor >= 0

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

    def due_ids(self, now: int) -> list[int]:
        """The ids of the live entries due at or before ``now``, each once, left in place
        (INFO: the rows expired that the sweep has not reached yet). The due entries are
        a subtree at the top of the heap, so this visits them and their children only:
        nothing once a step's sweep has caught up."""
        heap = self._heap
        bound = (now + 1 + _BIAS) << _ID_BITS
        if not heap or heap[0] >= bound:
            return []
        live, size = self._live, len(heap)
        out: list[int] = []
        seen: set[int] = set()
        stack = [0]
        while stack:
            i = stack.pop()
            entry = heap[i]
            if entry not in seen:  # duplicates are equal entries
                seen.add(entry)
                id_ = entry & _ID_MASK
                if live((entry >> _ID_BITS) - _BIAS, id_):
                    out.append(id_)
            for child in (2 * i + 1, 2 * i + 2):
                if child < size and heap[child] < bound:
                    stack.append(child)
        return out

    def note_dead(self) -> None:
        """One row left before its due, so its entry is dead; once dead entries dominate,
        start a compaction pass (see the module docstring), and advance a running one."""
        self._dead += 1
        if self._cursor >= 0:
            self._noted += 1
        elif self._dead > self._rebuild_after and self._dead * 2 > len(self._heap):
            self._cursor, self._noted = len(self._heap) - 1, 0
        else:
            return
        self._compact(self._step)

    def _compact(self, budget: int) -> None:
        """Examine up to ``budget`` entries from the cursor down, deleting the dead ones
        in place. The cursor stays put after a deletion, so the entry that took the slot
        is examined too; each examination either deletes or moves down, so it ends."""
        heap, live = self._heap, self._live
        i = min(self._cursor, len(heap) - 1)
        deleted = 0
        while i >= 0 and budget:
            budget -= 1
            entry = heap[i]
            if live((entry >> _ID_BITS) - _BIAS, entry & _ID_MASK):
                i -= 1
                continue
            deleted += 1
            last = heap.pop()
            if i < len(heap):
                _replace(heap, i, last)
            else:
                i -= 1  # the last slot itself went
        self._cursor = i
        if deleted:
            self._dead = max(0, self._dead - deleted)
        if i < 0:  # the pass is over: what died meanwhile may still be held
            self._dead = min(self._dead, self._noted)

    def clear(self) -> None:
        self._heap.clear()
        self._dead = 0
        self._cursor = -1


def _replace(heap: list[int], i: int, item: int) -> None:
    """Put ``item`` at ``heap[i]`` (whose entry was deleted) and restore the heap order:
    up towards the root if it is smaller than its parent, else down."""
    while i:
        parent = (i - 1) >> 1
        above = heap[parent]
        if above <= item:
            break
        heap[i] = above
        i = parent
    size = len(heap)
    child = 2 * i + 1
    while child < size:
        right = child + 1
        if right < size and heap[right] < heap[child]:
            child = right
        below = heap[child]
        if item <= below:
            break
        heap[i] = below
        i = child
        child = 2 * i + 1
    heap[i] = item
