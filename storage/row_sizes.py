"""Row sizes, kept as rows come and go, so ``SYS CACHESTORE INFO`` reads totals instead
of walking every queue item and result (``docs/dialect.md`` §5.1).

A row's size is the UTF-8 length of its text fields (path, payload, extra for an item;
path and value for a result), the measure the cache uses for its entries.
:class:`SizeTally` is the multiset of the sizes of one table's rows: a count, a sum, and
how many rows have each size. A change costs two integer adds and a dict update. The
smallest and largest are looked for among the distinct sizes when INFO asks: rows of d
distinct sizes hold at least d(d-1)/2 bytes, so there are at most about sqrt(2 x bytes
held) of them whatever the number of rows (a few hundred in practice; 45,000 for 1 GB of
rows all of different sizes), and the hot path keeps no sorted structure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from cubequeue.storage.ack_results import Result
from cubequeue.storage.queue_item import Item

__all__ = ["SizeTally", "item_row_size", "result_row_size"]


def item_row_size(item: Item) -> int:
    """O(1): characters plus the UTF-8 excess the item keeps (nothing encoded here)."""
    extra = item.extra
    size = len(item.path) + len(item.payload) + item.wide
    return size if extra is None else size + len(extra)


def result_row_size(result: Result) -> int:
    return len(result.path) + len(result.value) + result.wide


class SizeTally:
    """The sizes of one table's rows: ``count``, ``total`` and how many have each size."""

    __slots__ = ("_counts", "count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        #: size -> rows of that size (only sizes some row has)
        self._counts: dict[int, int] = {}

    def add(self, size: int) -> None:
        self.count += 1
        self.total += size
        counts = self._counts
        counts[size] = counts.get(size, 0) + 1

    def remove(self, size: int) -> None:
        self.count -= 1
        self.total -= size
        counts = self._counts
        held = counts[size] - 1
        if held:
            counts[size] = held
        else:
            del counts[size]

    def resize(self, old: int, new: int) -> None:
        """One row's size changes from ``old`` to ``new`` (a replacing CACHE SET, INCR)."""
        self.total += new - old
        counts = self._counts
        held = counts[old] - 1
        if held:
            counts[old] = held
        else:
            del counts[old]
        counts[new] = counts.get(new, 0) + 1

    def extend(self, sizes: Iterable[int]) -> None:
        """Many rows at once (recovery)."""
        counts = self._counts
        for size, many in Counter(sizes).items():
            self.count += many
            self.total += size * many
            counts[size] = counts.get(size, 0) + many

    def figures(self, hidden: Counter[int] | None = None) -> tuple[int, int, int, int]:
        """(count, total, smallest, largest) of the rows not in ``hidden`` (a
        sub-multiset: rows a PURGE detached but has not released yet); the extremes are
        0 when no row is left. O(distinct sizes), see the module docstring."""
        counts = self._counts
        if not hidden:
            if not counts:
                return 0, 0, 0, 0
            return self.count, self.total, min(counts), max(counts)
        count = self.count - hidden.total()
        if not count:
            return 0, 0, 0, 0
        total = self.total - sum(size * many for size, many in hidden.items())
        shown = [size for size, many in counts.items() if many > hidden[size]]
        return count, total, min(shown), max(shown)
