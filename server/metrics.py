"""Prometheus metrics for ``GET /metrics``, on a registry of our own.

Two kinds of numbers:

* events the server reports as they happen: connections opened and closed per protocol,
  commands by name and outcome, command latency;
* the store's state, read from ``store.stats()`` at scrape time by a custom collector, so
  the numbers are exactly what ``SYS CACHESTORE INFO`` reports and nothing has to be
  updated on the hot path.

Each :class:`Metrics` owns its ``CollectorRegistry`` (no prometheus-client globals), so two
servers in one process, or a test, never see each other's counts.

Label cardinality is capped: per-prefix gauges keep the ``MAX_PREFIX_LABELS`` largest
prefixes (pending + active) and sum the rest under ``prefix="__other__"``; command names
beyond ``MAX_COMMAND_LABELS`` distinct values are counted as ``command="__other__"``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["MAX_COMMAND_LABELS", "MAX_PREFIX_LABELS", "OTHER", "Metrics"]

MAX_PREFIX_LABELS = 100
MAX_COMMAND_LABELS = 200
OTHER = "__other__"
PROTOCOLS = ("pg", "ws")
#: queue commands take micro- to milliseconds; RESULT_BLOCKING may wait up to the cap
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)


class PrefixCountsLike(Protocol):
    """The shape of ``cubequeue.storage.stats.PrefixCounts`` this module reads."""

    @property
    def prefix(self) -> str: ...
    @property
    def pending(self) -> int: ...
    @property
    def active(self) -> int: ...


class StoreStatsLike(Protocol):
    """The shape of ``cubequeue.storage.stats.StoreStats`` this module reads."""

    @property
    def prefixes(self) -> Sequence[PrefixCountsLike]: ...
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


def capped_prefixes(prefixes: Sequence[PrefixCountsLike],
                    limit: int = MAX_PREFIX_LABELS) -> list[tuple[str, int, int]]:
    """``(prefix, pending, active)`` for the ``limit`` largest prefixes, plus ``__other__``.

    Ties are broken by prefix name so that a scrape is deterministic; ``__other__`` appears
    only when something was folded into it.
    """
    ranked = sorted(prefixes, key=lambda p: (-(p.pending + p.active), p.prefix))
    rows = [(p.prefix, p.pending, p.active) for p in ranked[:limit]]
    rest = ranked[limit:]
    if rest:
        rows.append((OTHER, sum(p.pending for p in rest), sum(p.active for p in rest)))
    return rows


class _StoreCollector:
    """Reads the store at scrape time (prometheus-client custom collector protocol)."""

    def __init__(self, store: StatsSource) -> None:
        self._store = store

    def describe(self) -> list[Metric]:
        # Returning descriptions stops the registry from calling collect() at register time.
        return list(self._families(None))

    def collect(self) -> Iterator[Metric]:
        return self._families(self._store.stats())

    @staticmethod
    def _families(stats: StoreStatsLike | None) -> Iterator[Metric]:
        pending = GaugeMetricFamily("cubequeue_queue_pending",
                                    "Pending queue items per prefix (largest prefixes; the "
                                    f"rest summed under prefix=\"{OTHER}\")",
                                    labels=["prefix"])
        active = GaugeMetricFamily("cubequeue_queue_active",
                                   "Active (retrieved, not yet acked) queue items per prefix",
                                   labels=["prefix"])
        if stats is not None:
            for prefix, n_pending, n_active in capped_prefixes(stats.prefixes):
                pending.add_metric([prefix], n_pending)
                active.add_metric([prefix], n_active)
        yield pending
        yield active

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


class Metrics:
    """The server's metrics; every method is cheap and safe from any thread."""

    def __init__(self, store: StatsSource) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._connections = Gauge("cubequeue_connections_open",
                                  "Open client connections by protocol (pg or ws)",
                                  ["protocol"], registry=self.registry)
        self._connections_total = Counter("cubequeue_connections",
                                          "Client connections accepted by protocol",
                                          ["protocol"], registry=self.registry)
        self._commands = Counter("cubequeue_commands",
                                 "Commands run, by command and outcome (ok or the SQLSTATE)",
                                 ["command", "outcome"], registry=self.registry)
        self._latency = Histogram("cubequeue_command_duration_seconds",
                                  "Command latency, RESULT_BLOCKING waits included",
                                  ["command"], buckets=LATENCY_BUCKETS,
                                  registry=self.registry)
        for protocol in PROTOCOLS:  # export zeros before the first connection
            self._connections.labels(protocol)
            self._connections_total.labels(protocol)
        self._command_names: set[str] = set()
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self.registry.register(_StoreCollector(store))

    def connection_opened(self, protocol: str) -> None:
        self._connections.labels(protocol).inc()
        self._connections_total.labels(protocol).inc()

    def connection_closed(self, protocol: str) -> None:
        self._connections.labels(protocol).dec()

    def observe_command(self, name: str, outcome: str, seconds: float) -> None:
        # Runs for every command: resolve the labelled children once per (name, outcome)
        # instead of calling labels() (a locked dict lookup and tuple build) each time.
        children = self._children.get((name, outcome))
        if children is None:
            command = self._command_label(name)
            children = (self._commands.labels(command, outcome), self._latency.labels(command))
            if len(self._children) < MAX_COMMAND_LABELS * 8:
                self._children[(name, outcome)] = children
        children[0].inc()
        children[1].observe(seconds)

    def _command_label(self, name: str) -> str:
        if name in self._command_names:
            return name
        with self._lock:
            if len(self._command_names) < MAX_COMMAND_LABELS:
                self._command_names.add(name)
                return name
        return OTHER

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its Content-Type, for ``GET /metrics``."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
