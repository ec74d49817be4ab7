"""The store's state, read from ``store.stats()`` at scrape time by a custom collector, so
the numbers are exactly what ``SYS CACHESTORE INFO`` reports and nothing has to be
updated on the hot path: the queue's per-prefix and total gauges, the cache's, and the
departures by reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cubequeue.server.metrics.prefixes import (
    MAX_PREFIX_LABELS,
    OTHER,
    Labels,
    PrefixRow,
    _TopPrefixes,
    slices_of,
)
from cubequeue.storage.stats import (
    DEPARTURE_REASONS,
    PrefixCensus,
    PrefixDepth,
    PrefixSample,
    StoreStats,
)


class StoreStatsLike(Protocol):
    """The shape of ``cubequeue.storage.stats.StoreStats`` this module reads."""

    @property
    def prefixes(self) -> Sequence[PrefixDepth]: ...
    @property
    def items_total(self) -> int: ...
    @property
    def results_total(self) -> int: ...
    @property
    def waiters(self) -> int: ...
    @property
    def cache_keys(self) -> int: ...
    @property
    def cache_bytes(self) -> int: ...
    @property
    def evictions_total(self) -> int: ...


class StatsSource(Protocol):
    def stats(self) -> StoreStatsLike: ...


@dataclass(frozen=True, slots=True)
class Census:
    """What one scrape read of the store: its stats and the exported prefix rows."""

    stats: StoreStatsLike
    rows: list[PrefixRow]


class StoreCollector:
    """The store's state (prometheus-client custom collector protocol). A scrape over
    HTTP hands it a census taken in slices (:meth:`Metrics.scrape`); otherwise (a test,
    :meth:`Metrics.render_for`) it reads the store at once."""

    def __init__(self, store: StatsSource, labels: Labels, *, limit: int, walk_slice: int,
                 stalled_after_ms: int) -> None:
        self._store = store
        self._labels = labels
        self._limit = limit
        self._walk_slice = walk_slice
        self._stalled_after_ms = stalled_after_ms
        #: the census of the scrape being rendered (set and cleared around one render)
        self.census: Census | None = None

    def walk(self, stats: StoreStatsLike) -> tuple[_TopPrefixes, Iterator[list[PrefixSample]]]:
        """The ranking to feed and the slices to feed it (each read when asked for)."""
        prefixes = stats.prefixes
        slices = (prefixes.walk(self._walk_slice, self._stalled_after_ms)
                  if isinstance(prefixes, PrefixCensus)
                  else slices_of(prefixes, self._walk_slice))
        return _TopPrefixes(self._limit), slices

    def read(self) -> StoreStatsLike:
        return self._store.stats()

    def census_now(self) -> Census:
        stats = self._store.stats()
        top, slices = self.walk(stats)
        for part in slices:
            top.add(part)
        return Census(stats, self.label(top))

    def label(self, top: _TopPrefixes) -> list[PrefixRow]:
        rows = top.rows(self._labels)
        self._labels.settle()
        return rows

    def describe(self) -> list[Metric]:
        # Returning descriptions stops the registry from calling collect() at register time.
        return list(_store_families(None))

    def collect(self) -> Iterator[Metric]:
        return _store_families(self.census or self.census_now())


_FOLDED = f"; the deepest {MAX_PREFIX_LABELS} prefixes, the rest folded into prefix=\"{OTHER}\""


def _store_families(census: Census | None) -> Iterator[Metric]:
    pending = GaugeMetricFamily("cubequeue_queue_pending",
                                "Pending queue items per prefix (largest prefixes; the "
                                f"rest summed under prefix=\"{OTHER}\")",
                                labels=["prefix"])
    active = GaugeMetricFamily("cubequeue_queue_active",
                               "Active (retrieved, not yet acked) queue items per prefix"
                               f"{_FOLDED}", labels=["prefix"])
    oldest = GaugeMetricFamily("cubequeue_queue_oldest_pending_age_seconds",
                               "Age of the oldest pending item per prefix (only prefixes "
                               "with pending items; the oldest of the folded ones under "
                               f"prefix=\"{OTHER}\"){_FOLDED}", labels=["prefix"])
    stalled = GaugeMetricFamily("cubequeue_queue_stalled",
                                "Active items whose heartbeat is older than the prefix's "
                                "latest STALLED/TO_CANCEL timeout (else 120 s) per prefix"
                                f"{_FOLDED}", labels=["prefix"])
    stats = None if census is None else census.stats
    if census is not None:
        for prefix, n_pending, n_active, age_ms, n_stalled in census.rows:
            pending.add_metric([prefix], n_pending)
            active.add_metric([prefix], n_active)
            if age_ms is not None:
                oldest.add_metric([prefix], max(0, age_ms) / 1000)
            stalled.add_metric([prefix], n_stalled)
    yield pending
    yield active
    yield oldest
    yield stalled

    def gauge(name: str, doc: str, value: int | None) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, value=None if value is None else float(value))

    s = stats
    yield gauge("cubequeue_queue_prefixes", "Queue prefixes with at least one item",
                None if s is None else len(s.prefixes))
    yield gauge("cubequeue_queue_items", "Queue items in total (pending + active)",
                None if s is None else s.items_total)
    yield gauge("cubequeue_queue_results", "Stored results waiting to be read or expire",
                None if s is None else s.results_total)
    yield gauge("cubequeue_blocked_waiters", "Connections blocked in RESULT_BLOCKING",
                None if s is None else s.waiters)
    yield gauge("cubequeue_cache_keys", "Cache keys stored",
                None if s is None else s.cache_keys)
    yield gauge("cubequeue_cache_bytes", "Bytes of cache keys and values stored",
                None if s is None else s.cache_bytes)
    yield CounterMetricFamily("cubequeue_cache_evictions",
                              "Cache keys evicted by the LRU limits",
                              value=None if s is None else float(s.evictions_total))
    departures = CounterMetricFamily(
        "cubequeue_queue_departures",
        "Items that left the queue, by reason (system.queue_log's reasons; the in-memory "
        "and durable stores count them, a PostgreSQL store's front end does not)",
        labels=["reason"])
    counts = s.departures if isinstance(s, StoreStats) else None
    if counts is not None:
        for reason in DEPARTURE_REASONS:
            departures.add_metric([reason], float(counts.get(reason, 0)))
    yield departures
