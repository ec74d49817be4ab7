"""Store-wide figures for metrics, ``SYS CACHESTORE INFO`` and the console.

:class:`StoreStats` is read at scrape time. Its totals are O(1) to take; its ``prefixes``
may be a :class:`PrefixCensus`, which reads the live prefixes only when asked: its length
at once, its rows (sorted by prefix, for the console) when iterated, or
:meth:`PrefixCensus.walk` for a reader that must not hold the event loop (``/metrics``):
slices of :data:`PrefixSample` rows, each built when asked for, so a caller can let other
work run between slices whatever the number of prefixes.

:class:`DepartureCounts` counts how items left the queue, by the reason
``system.queue_log`` gives (one increment per departure, kept by the in-memory store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, overload

__all__ = [
    "DEFAULT_STALLED_AFTER_MS",
    "DEPARTURE_REASONS",
    "WALK_SLICE",
    "DepartureCounts",
    "PrefixCensus",
    "PrefixCounts",
    "PrefixDepth",
    "PrefixSample",
    "SampledPrefix",
    "StoreStats",
    "WalkedPrefixes",
]

#: every reason an item leaves the queue (``system.queue_log``'s ``reason`` column):
#: ``cancelled_stalled`` / ``cancelled_orphaned`` are CANCELs of items the prefix's
#: latest TO_CANCEL/STALLED reported as stalled or orphaned
DEPARTURE_REASONS = ("acked", "cancelled", "cancelled_stalled", "cancelled_orphaned",
                     "expired", "truncated", "purged")
#: an active item is stalled once its heartbeat is this old, unless its prefix remembers
#: a STALLED/TO_CANCEL timeout: Cube's heartBeatTimeout (4 x its 30 s heartBeatInterval)
DEFAULT_STALLED_AFTER_MS = 120_000
#: prefixes a reader that must not hold the event loop takes per turn from
#: :meth:`PrefixCensus.walk` (a few milliseconds of work)
WALK_SLICE = 1024


class PrefixDepth(Protocol):
    """What a reader of one prefix's depth needs (the console's ring, the metrics' ranking):
    :class:`PrefixCounts` has it, and so may a test's own row."""

    @property
    def prefix(self) -> str: ...
    @property
    def pending(self) -> int: ...
    @property
    def active(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PrefixCounts:
    prefix: str
    pending: int
    active: int
    #: age of the oldest pending item in ms (None: nothing pending, or not known)
    oldest_pending_ms: int | None = None
    #: active items whose heartbeat is older than the stalled threshold (see
    #: :meth:`PrefixCensus.walk`)
    stalled: int = 0


#: one prefix in a walk: ``(-(pending + active), prefix, pending, active,
#: oldest pending age in ms or None, stalled)``. The first two fields make the natural
#: tuple order "deepest first, then by name", so a reader ranks a slice with a plain sort
#: (names are unique: the later fields are never compared).
PrefixSample = tuple[int, str, int, int, int | None, int]


class DepartureCounts(dict[str, int]):
    """Items that left the queue, by reason, since the store was built (a counter). A
    dict, so that counting one departure is one C-level item update on the ACK path."""

    def __init__(self) -> None:
        super().__init__(dict.fromkeys(DEPARTURE_REASONS, 0))

    def snapshot(self) -> dict[str, int]:
        return dict(self)


class SampledPrefix(Protocol):
    """What a census reads of one prefix state (``storage/prefixes.py``'s PrefixState)."""

    def sample(self, now: int, stalled_after_ms: int) -> PrefixSample: ...


class WalkedPrefixes(Protocol):
    """What a census reads of the store's prefixes (``storage/prefixes.py``'s Prefixes)."""

    def walk(self, size: int) -> Iterator[Sequence[SampledPrefix]]: ...


class PrefixCensus(Sequence[PrefixCounts]):
    """The live prefixes of an in-memory store, read on demand (see the module docstring).

    ``states`` returns the store's prefixes whenever it is called; a walk reads them a
    slice at a time with no copy of the whole, so it may span steps that add or drop
    prefixes and still reads every prefix that stays exactly once (``Prefixes.walk`` in
    ``storage/prefixes.py``); a TRUNCATE, which replaces them all, ends it. ``clock`` is
    the store's clock."""

    __slots__ = ("_clock", "_count", "_rows", "_states")

    def __init__(self, count: int, states: Callable[[], WalkedPrefixes],
                 clock: Callable[[], int]) -> None:
        self._count = count
        self._states = states
        self._clock = clock
        self._rows: list[PrefixCounts] | None = None

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> PrefixCounts: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[PrefixCounts]: ...
    def __getitem__(self, index: int | slice) -> PrefixCounts | Sequence[PrefixCounts]:
        return self._all()[index]

    def __iter__(self) -> Iterator[PrefixCounts]:
        return iter(self._all())

    def _all(self) -> list[PrefixCounts]:
        """Every prefix at once, sorted by name (what the console reads); O(P log P)."""
        rows = self._rows
        if rows is None:
            rows = []
            for part in self.walk(1 << 30, DEFAULT_STALLED_AFTER_MS):
                rows.extend(PrefixCounts(s[1], s[2], s[3], s[4], s[5]) for s in part)
            rows.sort(key=lambda r: r.prefix)
            self._rows = rows
        return rows

    def walk(self, size: int, stalled_after_ms: int) -> Iterator[list[PrefixSample]]:
        """The prefixes as :data:`PrefixSample` rows, at most ``size`` per slice, each
        slice read when asked for at the clock's instant then. An active item is stalled
        when its heartbeat is more than the prefix's own STALLED/TO_CANCEL heartbeat
        timeout old (the latest one a client sent there), else ``stalled_after_ms``."""
        current, clock = self._states, self._clock
        source = current()
        for part in source.walk(size):
            if current() is not source:  # a TRUNCATE: these states are being released
                return
            now = clock()
            yield [s.sample(now, stalled_after_ms) for s in part]


@dataclass(frozen=True, slots=True)
class StoreStats:
    prefixes: Sequence[PrefixCounts] = field(default_factory=list)
    items_total: int = 0
    results_total: int = 0
    waiters: int = 0
    cache_keys: int = 0
    cache_bytes: int = 0
    evictions_total: int = 0
    #: items that left the queue by reason (:data:`DEPARTURE_REASONS`); None for a store
    #: that does not count them (the PostgreSQL store)
    departures: Mapping[str, int] | None = None
