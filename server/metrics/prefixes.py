"""The prefix census as label values: prefix names cut to a byte cap, the deepest
prefixes kept and the rest folded into one row.

Label cardinality is capped: per-prefix gauges keep the ``MAX_PREFIX_LABELS`` deepest
prefixes (pending + active) and fold the rest into ``prefix="__other__"``; a walk feeds
:class:`_TopPrefixes` a slice at a time and only the deepest are kept between slices.
Label values are capped in bytes too (``--max-metrics-label-bytes``): a longer one is cut
at a character boundary and ends in ``...`` (once per prefix name: the cut is kept), and
prefixes that become equal are summed, so 30 prefixes of 1 MiB make a scrape of a few
kilobytes, not 60 MiB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from cubequeue.storage.stats import WALK_SLICE, PrefixCounts, PrefixDepth, PrefixSample

DEFAULT_MAX_LABEL_BYTES = 200
TRUNCATED = "..."
MAX_PREFIX_LABELS = 100
OTHER = "__other__"


def truncate_label(value: str, max_bytes: int = DEFAULT_MAX_LABEL_BYTES) -> str:
    """``value`` when it fits in ``max_bytes`` UTF-8 bytes, else its longest head that fits
    together with the ``...`` marker (cut at a character boundary)."""
    if len(value) * 4 <= max_bytes:  # fast path: no UTF-8 character is longer than 4
        return value
    encoded = value.encode("utf-8")
    if len(encoded) <= max_bytes:
        return value
    head = encoded[: max(0, max_bytes - len(TRUNCATED))].decode("utf-8", "ignore")
    return head + TRUNCATED


#: one exported prefix row: (label, pending, active, oldest pending age in ms or None,
#: stalled)
PrefixRow = tuple[str, int, int, int | None, int]


class Labels:
    """Prefix names as label values, cut once per name (:func:`truncate_label`) and kept
    while the name stays among the exported ones: a name the store keeps (one string
    object for the prefix's life) hashes once, so a 1 MiB name costs one encode, not one
    per scrape. Only the names of the latest census are held (:meth:`settle`), so the
    cache keeps no name alive that the store has dropped and the rows no longer show."""

    __slots__ = ("_cut", "_max_bytes", "_next")

    def __init__(self, max_bytes: int) -> None:
        self._cut: dict[str, str] = {}
        self._next: dict[str, str] = {}
        self._max_bytes = max_bytes

    def __call__(self, prefix: str) -> str:
        label = self._next.get(prefix)
        if label is None:
            label = self._cut.get(prefix)
            if label is None:
                label = truncate_label(prefix, self._max_bytes)
            self._next[prefix] = label
        return label

    def settle(self) -> None:
        """A census is labelled: keep its names' cuts, forget the others."""
        self._cut, self._next = self._next, {}


class _TopPrefixes:
    """The ``limit`` deepest prefixes of a walk, the rest folded into one row: fed a
    slice at a time (:data:`~cubequeue.storage.stats.PrefixSample` rows, whose natural
    order is deepest first, then by name), it keeps at most ``limit`` rows between slices,
    so its memory and each slice's work are bounded whatever the number of prefixes."""

    __slots__ = ("_folded", "_limit", "_oldest", "_pool", "_sums")

    def __init__(self, limit: int) -> None:
        self._limit = max(0, limit)
        self._pool: list[PrefixSample] = []
        self._sums = [0, 0, 0]  # pending, active, stalled of the folded prefixes
        self._oldest: int | None = None
        self._folded = 0

    def add(self, rows: Iterable[PrefixSample]) -> None:
        pool = self._pool
        pool.extend(rows)
        if len(pool) <= self._limit:
            return
        pool.sort()
        rest = pool[self._limit:]
        del pool[self._limit:]
        sums, oldest = self._sums, self._oldest
        for _, _, pending, active, age, stalled in rest:
            sums[0] += pending
            sums[1] += active
            sums[2] += stalled
            if age is not None and (oldest is None or age > oldest):
                oldest = age
        self._oldest = oldest
        self._folded += len(rest)

    def rows(self, label: Callable[[str], str]) -> list[PrefixRow]:
        """The kept prefixes deepest first, then ``__other__`` when anything was folded;
        prefixes whose labels are equal (cut names) are merged into one row."""
        self._pool.sort()
        merged: dict[str, list[Any]] = {}
        for _, prefix, pending, active, age, stalled in self._pool:
            row = merged.get(name := label(prefix))
            if row is None:
                merged[name] = [pending, active, age, stalled]
                continue
            row[0] += pending
            row[1] += active
            row[2] = _older(row[2], age)
            row[3] += stalled
        if self._folded:
            row = merged.setdefault(OTHER, [0, 0, None, 0])
            row[0] += self._sums[0]
            row[1] += self._sums[1]
            row[2] = _older(row[2], self._oldest)
            row[3] += self._sums[2]
        return [(name, p, a, age, st) for name, (p, a, age, st) in merged.items()]


def _older(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def slices_of(prefixes: Sequence[PrefixDepth], size: int) -> Iterator[list[PrefixSample]]:
    """A store's list of prefix counts (the PostgreSQL store's sample, a test's fake) as
    walk slices."""
    for start in range(0, len(prefixes), size):
        out: list[PrefixSample] = []
        for p in prefixes[start:start + size]:
            if isinstance(p, PrefixCounts):
                age, stalled = p.oldest_pending_ms, p.stalled
            else:
                age, stalled = None, 0
            out.append((-(p.pending + p.active), p.prefix, p.pending, p.active, age, stalled))
        yield out


def capped_prefixes(prefixes: Sequence[PrefixDepth],
                    limit: int = MAX_PREFIX_LABELS,
                    max_label_bytes: int = DEFAULT_MAX_LABEL_BYTES,
                    ) -> list[tuple[str, int, int]]:
    """``(prefix, pending, active)`` for the ``limit`` largest prefixes, plus ``__other__``.

    Ties are broken by prefix name so that a scrape is deterministic; ``__other__`` appears
    only when something was folded into it. Prefixes equal once truncated are summed
    under one label: an exposition may not repeat a label set.
    """
    top = _TopPrefixes(limit)
    for part in slices_of(prefixes, WALK_SLICE):
        top.add(part)
    rows = top.rows(Labels(max_label_bytes))
    return [(label, pending, active) for label, pending, active, _, _ in rows]
