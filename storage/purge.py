"""What a QUEUE PURGE detached from one prefix, until it is released in slices.

PURGE answers once the prefix's pending and/or active structures are swapped for empty
ones (O(1)), so every count, list and claim sees the purge at once. The items themselves
are still in the store's id and path maps until :meth:`~cubequeue.storage.queue.QueueState`
releases them (a budget at a time, :mod:`.deferred`); meanwhile key lookups ask
:meth:`DetachedPrefix.holds` and treat a held item as gone. The test is exact and needs
no per-item mark: a detached item is pending in the detached pending set (its rank is
immutable) or active in the detached active map, and it cannot change status while
hidden, since nothing can reach it.
"""

from __future__ import annotations

from sortedcontainers import SortedDict, SortedList

from cubequeue.storage.queue_item import Item

__all__ = ["DetachedPrefix"]


class DetachedPrefix:
    __slots__ = ("active", "by_id", "by_path", "count", "keys", "lists", "pending", "prefix")

    def __init__(
        self,
        prefix: str,
        pending: SortedList | None,
        active: SortedDict | None,
        keys: dict[int, str],
        lists: list[list[int]],
        by_id: dict[int, Item],
        by_path: dict[str, Item],
    ) -> None:
        self.prefix = prefix
        #: the detached pending ranks and active items, emptied as items are released
        self.pending = pending
        self.active = active
        #: the detached active keys and the plain int lists of the other sorted indexes
        #: (nobody reads them any more: released from the tail)
        self.keys = keys
        self.lists = lists
        #: the id and path maps the items were in (a later TRUNCATE swaps the store's)
        self.by_id = by_id
        self.by_path = by_path
        #: items detached, for the summary line
        self.count = (0 if pending is None else len(pending)) + (
            0 if active is None else len(active))

    def holds(self, item: Item) -> bool:
        """``item`` was purged and is not released yet (so it must look gone)."""
        if item.prefix != self.prefix:
            return False
        if item.activated is None:
            return self.pending is not None and item.rank in self.pending
        return self.active is not None and item.id in self.active

    @property
    def done(self) -> bool:
        return not (self.pending or self.active or self.keys or self.lists)
