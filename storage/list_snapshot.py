"""QUEUE LIST / PENDING / ACTIVE of a large prefix as a stream of one instant's rows.

Building 10⁶ rows at once holds the event loop for seconds, so a listing larger than one
work budget (:attr:`~cubequeue.storage.limits.Limits.work_budget`) is answered as a
:class:`~cubequeue.storage.interface.RowStream` whose slices build ``work_budget`` rows
each. The statement stays atomic as clients see it (``docs/dialect.md`` §3.9): its rows
are the state at the step that ran it, however many steps run between its slices.

How, at O(1) per later change instead of a copy of every row:

* at the step, the listing's order is copied at C speed: the prefix's pending ranks
  (a list of ints) and its active ids (ascending), plus a reference to the id map;
  items added later have larger ids than any copied, so they are never shown;
* a :class:`ListSnapshot` is registered on the queue state while the stream is open;
  every change that alters what a listing shows (a claim, a departure by ACK, CANCEL,
  expiry, PURGE or TRUNCATE, a MERGE_EXTRA) first hands the item to each open snapshot,
  which keeps its **pre-image** ``(item, status, extra)`` the first time. HEARTBEAT
  changes nothing a listing shows. With no snapshot open the cost is one falsy check;
* a slice resolves each copied id to its pre-image when there is one, else to the live
  item in the id map held at the step (a TRUNCATE swaps the store's map, but the old
  one is released item by item, and each release records a pre-image first).

A full copy of the rows at the step would cost the very stall this avoids; copying the
items' references alone (instead of their ids) would cost a dict lookup per item.

The stream unregisters its snapshot when it is exhausted, closed (:meth:`ListStream.close`;
the server closes a stream it abandons on an error, a cancel or a disconnect) or dropped.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator, Iterator

from cubequeue.grammar.results import Row
from cubequeue.storage.prefixes import PrefixState
from cubequeue.storage.queue_item import ID_MASK, Item

__all__ = ["ListSnapshot", "ListStream"]

#: what a snapshot keeps of an item the first time it changes: the item, its status
#: and its ``extra`` as the listing saw them
PreImage = tuple[Item, str, str | None]


class ListSnapshot:
    """The pre-images one open listing needs: of its prefix's items older than it."""

    __slots__ = ("next_id", "pre", "prefix")

    def __init__(self, prefix: str, next_id: int) -> None:
        self.prefix = prefix
        #: items with this id or above were added after the listing: never shown
        self.next_id = next_id
        self.pre: dict[int, PreImage] = {}

    def note(self, item: Item) -> None:
        """``item`` is about to change or leave: keep what the listing saw of it."""
        id_ = item.id
        if id_ < self.next_id and id_ not in self.pre and item.prefix == self.prefix:
            self.pre[id_] = (item, item.status, item.extra)


class ListStream(Iterator[list[Row]]):
    """The slices of one listing (see the module docstring); an iterator, not a
    generator, so that a stream dropped before its first slice still unregisters."""

    __slots__ = ("_open", "_slices", "_snapshot", "_snapshots")

    def __init__(
        self,
        state: PrefixState,
        status: str | None,
        with_payload: bool,
        process_id: str | None,
        *,
        by_id: dict[int, Item],
        next_id: int,
        snapshots: list[ListSnapshot],
        budget: int,
    ) -> None:
        self._open = False
        ranks: list[int] = list(state.pending) if status != "active" else []
        active: list[int] = list(state.active) if status != "pending" else []
        self._snapshot = ListSnapshot(state.prefix, next_id)
        self._snapshots = snapshots
        snapshots.append(self._snapshot)
        self._open = True
        self._slices = _build(_resolver(self._snapshot.pre, by_id), ranks, active, status,
                              with_payload, process_id, max(1, budget))

    def __next__(self) -> list[Row]:
        if not self._open:
            raise StopIteration
        try:
            return next(self._slices)
        except BaseException:  # exhausted, or a bug: either way the snapshot goes
            self.close()
            raise

    def close(self) -> None:
        """Unregister the snapshot (idempotent); the stream yields nothing more."""
        if self._open:
            self._open = False
            snapshots = self._snapshots
            for i, snapshot in enumerate(snapshots):
                if snapshot is self._snapshot:
                    del snapshots[i]
                    break
            self._slices.close()

    def __del__(self) -> None:
        self.close()



def _resolver(pre: dict[int, PreImage], by_id: dict[int, Item]) -> Callable[[int], PreImage]:
    def resolve(id_: int) -> PreImage:
        image = pre.get(id_)
        if image is not None:
            return image
        item = by_id[id_]
        return item, item.status, item.extra

    return resolve


def _build(
    resolve: Callable[[int], PreImage], ranks: list[int], active: list[int],
    status: str | None, with_payload: bool, process_id: str | None, budget: int,
) -> Generator[list[Row], None, None]:
    """The slices (a plain function, so the generator holds no reference to its
    :class:`ListStream` and dropping the stream frees it at once)."""
    order: Iterator[int]
    if status == "active":
        order = iter(active)
    elif status == "pending" or not active:
        order = map(ID_MASK.__and__, ranks)
    else:
        # LIST merges both sets by rank (§3.9): the active ranks are sorted a budget
        # at a time, and the sorted runs merged lazily with the pending ranks
        runs: list[list[int]] = []
        for start in range(0, len(active), budget):
            run = [resolve(id_)[0].rank for id_ in active[start:start + budget]]
            run.sort()
            runs.append(run)
            if start + budget < len(active):
                yield []
        order = map(ID_MASK.__and__, heapq.merge(ranks, *runs))
    out: list[Row] = []
    seen = 0
    for id_ in order:
        item, item_status, extra = resolve(id_)
        if item.visible_to(process_id):
            row: Row = (item.key, str(id_), item_status, extra)
            out.append((*row, item.payload) if with_payload else row)
        seen += 1
        if seen >= budget:
            yield out
            out, seen = [], 0
    if out:
        yield out
