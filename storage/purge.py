"""What a QUEUE PURGE detached from one prefix, until it is released in slices.

PURGE answers once the prefix's pending and/or active structures are swapped for empty
ones (O(1)), so every count, list and claim sees the purge at once. The items themselves
are still in the store's id and path maps until :meth:`DetachedPrefix.release` takes them
out (a budget at a time, :mod:`.deferred`); meanwhile key lookups ask
:meth:`DetachedPrefix.holds` and treat a held item as gone. The test is exact and needs
no per-item mark: a detached item is pending in the detached pending set (its rank is
immutable) or active in the detached active map, and it cannot change status while
hidden, since nothing can reach it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from sortedcontainers import SortedDict, SortedList

from cubequeue.storage.deferred import ENTRIES_PER_UNIT, release_lists
from cubequeue.storage.list_snapshot import ListSnapshot
from cubequeue.storage.queue_item import ID_MASK, Item
from cubequeue.storage.queue_log import Departure
from cubequeue.storage.row_sizes import SizeTally, item_row_size

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

    def held(self) -> Iterator[Item]:
        """The items detached and not released yet (INFO leaves them out of its sizes)."""
        by_id = self.by_id
        ids = [rank & ID_MASK for rank in self.pending or ()]
        ids.extend(self.active or ())
        for id_ in ids:
            item = by_id.get(id_)
            if item is not None:
                yield item

    @property
    def done(self) -> bool:
        return not (self.pending or self.active or self.keys or self.lists)

    def release(self, budget: int, now: int, hook: Callable[[Departure], None] | None,
                effects: list[Callable[[], None]], snapshots: list[ListSnapshot],
                sizes: SizeTally | None = None) -> tuple[int, int]:
        """One slice of at most ``budget`` units: items leave the id and path maps (each
        departure goes to ``hook`` after the step, through ``effects``, and the listings
        open since before the purge, ``snapshots``, keep showing it), then the detached
        keys and index lists are dropped. (units used, items taken out of the maps). Each
        item leaves ``sizes`` too (None: a TRUNCATE since has reset the store's)."""
        used = released = 0
        by_id, by_path = self.by_id, self.by_path
        pending, active = self.pending, self.active
        while used < budget and (pending or active):
            if pending:
                item = by_id.pop(pending.pop() & ID_MASK, None)
            else:
                assert active is not None
                item = by_id.pop(active.popitem()[0], None)
            used += 1
            if item is None:  # a TRUNCATE's release took it first
                continue
            for snapshot in snapshots:
                snapshot.note(item)
            if by_path.get(item.path) is item:
                del by_path[item.path]
            if sizes is not None:
                sizes.remove(item_row_size(item))
            released += 1
            if hook is not None:
                effects.append(partial(hook, Departure.of(item, "purged", now, self.count)))
        keys = self.keys
        while used < budget and keys:
            for _ in range(min(len(keys), ENTRIES_PER_UNIT)):
                keys.popitem()
            used += 1
        used += release_lists(self.lists, budget - used)
        return used, released
