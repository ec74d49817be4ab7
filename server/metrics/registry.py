"""The server's metrics on a registry of its own: the event tallies
(:mod:`~cubequeue.server.metrics.events`), the store's state and its optional parts'
(:mod:`~cubequeue.server.metrics.store`, :mod:`~cubequeue.server.metrics.durable`,
:mod:`~cubequeue.server.metrics.pool`), the build and the process, and a scrape over HTTP
that reads the store's prefixes in slices without holding the event loop.

Each :class:`Metrics` owns its ``CollectorRegistry`` (no prometheus-client globals), so two
servers in one process, or a test, never see each other's counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, GCCollector, ProcessCollector

from cubequeue.server import __version__
from cubequeue.server.metrics import exposition
from cubequeue.server.metrics.durable import DurableCollector
from cubequeue.server.metrics.events import EventCounts
from cubequeue.server.metrics.pool import PoolCollector
from cubequeue.server.metrics.prefixes import DEFAULT_MAX_LABEL_BYTES, MAX_PREFIX_LABELS, Labels
from cubequeue.server.metrics.store import Census, StatsSource, StoreCollector
from cubequeue.storage.stats import DEFAULT_STALLED_AFTER_MS, WALK_SLICE

#: a scrape of a store with more prefixes than this is answered from the previous census
#: (the per-prefix rows) while the next is taken (:meth:`Metrics.scrape`)
FRESH_PREFIXES = 8 * WALK_SLICE
#: ... unless that census is older than this (then the scrape waits for a new one)
CENSUS_MAX_AGE_S = 120.0
#: the longest a scrape of such a store waits for a census when it has none (the HTTP
#: server allows a request 10 s)
FIRST_WAIT_S = 5.0


class Metrics(EventCounts):
    """The server's metrics; every method is cheap and safe from any thread."""

    def __init__(self, store: StatsSource, *,
                 max_label_bytes: int = DEFAULT_MAX_LABEL_BYTES,
                 prefix_limit: int = MAX_PREFIX_LABELS,
                 walk_slice: int = WALK_SLICE,
                 stalled_after_ms: int = DEFAULT_STALLED_AFTER_MS,
                 fresh_prefixes: int = FRESH_PREFIXES,
                 census_max_age_s: float = CENSUS_MAX_AGE_S,
                 first_wait_s: float = FIRST_WAIT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._max_label_bytes = max_label_bytes
        self._fresh_prefixes = fresh_prefixes
        self._census_max_age_s = census_max_age_s
        self._first_wait_s = first_wait_s
        self._clock = clock
        #: the latest census taken by a scrape, and when (``clock``)
        self._last_census: tuple[Census, float] | None = None
        Gauge("cubequeue_build_info", "Always 1; the version label says which cubequeue "
              "serves", ["version"], registry=self.registry).labels(__version__).set(1)
        super().__init__(self.registry)  # the event families come next in the exposition
        self._labels = Labels(max_label_bytes)
        self._store = StoreCollector(store, self._labels, limit=prefix_limit,
                                      walk_slice=max(1, walk_slice),
                                      stalled_after_ms=stalled_after_ms)
        self._census_task: asyncio.Task[Census] | None = None
        self.registry.register(self._store)
        self.registry.register(DurableCollector(store))
        self.registry.register(PoolCollector(store))
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._exposed = exposition.WithoutCreated(self.registry)

    async def scrape(self, accept: str, accept_encoding: str
                     ) -> tuple[bytes, list[tuple[str, str]]]:
        """``GET /metrics`` (:meth:`render_for`'s answer) without holding the event loop:
        the store's prefixes are read in slices of ``walk_slice``, one per loop turn,
        keeping only the deepest; the families are then built from that census. Scrapes
        that arrive while a census is taken share it.

        A store of more than ``fresh_prefixes`` prefixes takes many turns to walk (seconds
        at 10^6), so its scrape does not wait: it is answered at once with the store's
        totals read now and the per-prefix rows of the latest census (at most
        ``census_max_age_s`` old), and starts the next census for the scrape after. With
        no such census (the first scrape), it waits at most ``first_wait_s`` and is then
        answered without per-prefix rows rather than failed."""
        stats = self._store.read()
        last = self._last_census
        large = len(stats.prefixes) > self._fresh_prefixes
        if large and last is not None and self._clock() - last[1] <= self._census_max_age_s:
            self._census_task_now()
            census = Census(stats, last[0].rows)
        elif large:
            try:  # shielded: a scrape that gives up does not cancel the census
                census = await asyncio.wait_for(asyncio.shield(self._census_task_now()),
                                                self._first_wait_s)
            except TimeoutError:
                census = Census(stats, [])
        else:
            census = await asyncio.shield(self._census_task_now())
        self._store.census = census
        try:
            return self.render_for(accept, accept_encoding)
        finally:
            self._store.census = None

    def _census_task_now(self) -> asyncio.Task[Census]:
        """The census being taken, or a new one."""
        task = self._census_task
        if task is None:
            task = self._census_task = asyncio.get_running_loop().create_task(
                self._take_census(), name="metrics-census")
            task.add_done_callback(self._census_taken)
        return task

    def _census_taken(self, task: asyncio.Task[Census]) -> None:
        if self._census_task is task:
            self._census_task = None
        if not task.cancelled() and task.exception() is None:  # retrieved either way
            self._last_census = (task.result(), self._clock())

    async def _take_census(self) -> Census:
        store = self._store
        stats = store.read()
        top, slices = store.walk(stats)
        for part in slices:  # each slice is read from the store when asked for
            top.add(part)
            await asyncio.sleep(0)
        return Census(stats, store.label(top))

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text body and its Content-Type (no negotiation)."""
        return exposition.render(self._exposed)

    def render_for(self, accept: str, accept_encoding: str
                   ) -> tuple[bytes, list[tuple[str, str]]]:
        """``GET /metrics``: the body and its response headers, negotiated from the
        request's ``Accept`` (OpenMetrics when asked for) and ``Accept-Encoding`` (gzip
        when allowed: :func:`~cubequeue.server.metrics.exposition.render_for`)."""
        return exposition.render_for(self._exposed, accept, accept_encoding)
