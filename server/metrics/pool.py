"""The PostgreSQL store's pool and failures, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cubequeue.storage.capabilities import PoolHealth, capabilities_of


class PoolCollector:
    """The PostgreSQL store's pool and failures (:class:`ReportsPoolHealth`), read at
    scrape time from the capabilities found when the store was attached (the server's
    slot holds no store until it has connected): nothing before, nothing for a store
    without a pool."""

    def __init__(self, store: object) -> None:
        self._store = store

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        source = capabilities_of(self._store).pool_health
        if source is None:
            return
        yield from pool_families(source.pool_health())


#: the kinds of failure :class:`PoolHealth` counts, exported as zeros before the first
POOL_ERROR_KINDS = ("unreachable", "in_doubt", "timeout", "database")


def pool_families(health: PoolHealth) -> Iterator[Metric]:
    yield GaugeMetricFamily("cubequeue_store_connections",
                            "Connections open from this front end to the queue database",
                            value=float(health.open))
    yield GaugeMetricFamily("cubequeue_store_connections_in_use",
                            "Of those, connections running a statement",
                            value=float(health.in_use))
    yield GaugeMetricFamily("cubequeue_store_connections_max",
                            "The pool's upper bound", value=float(health.max_size))
    yield GaugeMetricFamily("cubequeue_store_reachable",
                            "1 while the last attempt to reach a writable queue database "
                            "succeeded, else 0", value=1.0 if health.reachable else 0.0)
    errors = CounterMetricFamily(
        "cubequeue_store_errors",
        "Statements to the queue database that failed, by kind: unreachable (no writable "
        "database, never sent), in_doubt (the connection died before the answer), timeout, "
        "database (an error the database answered)", labels=["kind"])
    counts: Mapping[str, int] = health.errors
    for kind in (*POOL_ERROR_KINDS, *sorted(set(counts) - set(POOL_ERROR_KINDS))):
        errors.add_metric([kind], float(counts.get(kind, 0)))
    yield errors
