"""What a QUEUE TRUNCATE detached, until it is released in slices.

TRUNCATE answers once every queue structure is swapped for an empty one (O(1):
:meth:`~cubequeue.storage.queue.QueueState.truncate`), so the statement is atomic as
clients see it. The old structures are released here, a budget at a time
(:mod:`.deferred`): the items first (each departure reported to the ``on_departure``
hook, newest first), then the paths, the sorted indexes and heaps, and the results.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from cubequeue.storage.ack_results import Results
from cubequeue.storage.deferred import ENTRIES_PER_UNIT, release_lists
from cubequeue.storage.expiry import ExpiryHeap
from cubequeue.storage.list_snapshot import ListSnapshot
from cubequeue.storage.prefixes import Prefixes
from cubequeue.storage.queue_item import Item
from cubequeue.storage.queue_log import Departure

__all__ = ["DetachedQueue"]


class DetachedQueue:
    """What a TRUNCATE swapped out: its id and path maps, results, indexes and heaps."""

    __slots__ = ("by_id", "by_path", "count", "indexes", "results")

    def __init__(self, by_id: dict[int, Item], by_path: dict[str, Item], results: Results,
                 prefixes: Prefixes, *heaps: ExpiryHeap) -> None:
        self.by_id, self.by_path = by_id, by_path
        self.count = len(by_id)  #: items truncated (see Departure.bulk)
        self.results: Results | None = results
        #: the plain int lists behind the sorted indexes and heaps (detached: nobody else
        #: reads them, so emptying them from the tail is safe)
        self.indexes: list[list[int]] = [heap.entries for heap in heaps]
        for state in prefixes:
            self.indexes.extend(state.index_lists())

    def release(self, budget: int, now: int, hook: Callable[[Departure], None] | None,
                effects: list[Callable[[], None]], snapshots: list[ListSnapshot],
                ) -> tuple[int, bool]:
        """One slice of at most ``budget`` units: (units used, finished). Each item's
        departure goes to ``hook`` after the step (through ``effects``), and the
        listings open since before the TRUNCATE (``snapshots``) keep showing it."""
        used = 0
        by_id = self.by_id
        while by_id and used < budget:
            _, item = by_id.popitem()
            for snapshot in snapshots:
                snapshot.note(item)
            if hook is not None:
                effects.append(partial(hook, Departure.of(item, "truncated", now, self.count)))
            used += 1
        by_path = self.by_path
        while by_path and used < budget:
            by_path.popitem()
            used += 1
        used += release_lists(self.indexes, budget - used)
        if used < budget and self.results is not None:
            used += 1 + len(self.results) // ENTRIES_PER_UNIT  # rare and bounded by expiry
            self.results = None
        return used, not (by_id or by_path or self.indexes or self.results is not None)
