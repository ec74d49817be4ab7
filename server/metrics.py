"""Prometheus metrics for ``GET /metrics``, on a registry of our own.

Two kinds of numbers:

* events the server reports as they happen: connections opened and closed per protocol,
  commands by name and outcome, command latency;
* the store's state, read from ``store.stats()`` at scrape time by a custom collector, so
  the numbers are exactly what ``SYS CACHESTORE INFO`` reports and nothing has to be
  updated on the hot path.

Each :class:`Metrics` owns its ``CollectorRegistry`` (no prometheus-client globals), so two
servers in one process, or a test, never see each other's counts.

Label cardinality is capped: per-prefix gauges keep the ``MAX_PREFIX_LABELS`` deepest
prefixes (pending + active) and fold the rest into ``prefix="__other__"``. A scrape over
HTTP (:meth:`Metrics.scrape`) reads the prefixes in slices of ``walk_slice``, letting the
event loop serve other clients between slices, so no turn of the loop grows with the number
of prefixes; only the deepest ones are kept while it walks. The ``command`` label is the
parsed command's name or a PostgreSQL verb (:func:`command_label`), fewer than
``MAX_COMMAND_LABELS`` values in all: a client inventing first words gets
``command="unknown"``, not a label value (and a 24-series histogram) per word.
Label values are capped in bytes too (``--max-metrics-label-bytes``): a longer one is cut
at a character boundary and ends in ``...`` (once per prefix name: the cut is kept), and
prefixes that become equal are summed, so 30 prefixes of 1 MiB make a scrape of a few
kilobytes, not 60 MiB.

The exposition (:meth:`Metrics.render_for`) adds the standard ``process_*`` and
``python_gc_*`` collectors, leaves out the ``_created`` series (Prometheus ignores them and
they double the scrape), speaks OpenMetrics when the ``Accept`` header asks for it and
gzip when ``Accept-Encoding`` allows it. Who may scrape is :func:`scrape_refusal`'s
decision (``--metrics-auth``). The names are a stable, versioned list: docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    ProcessCollector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder, generate_latest

from cubequeue.grammar.commands import Command
from cubequeue.server import __version__
from cubequeue.storage.capabilities import PoolHealth, capabilities_of
from cubequeue.storage.stats import (
    DEFAULT_STALLED_AFTER_MS,
    DEPARTURE_REASONS,
    WALK_SLICE,
    PrefixCensus,
    PrefixCounts,
    PrefixSample,
    StoreStats,
)

if TYPE_CHECKING:
    from cubequeue.server.config import Config

__all__ = [
    "DEFAULT_MAX_LABEL_BYTES",
    "MAX_COMMAND_LABELS",
    "MAX_PREFIX_LABELS",
    "METRICS_VERSION",
    "OTHER",
    "UNKNOWN_COMMAND",
    "WALK_SLICE",
    "Metrics",
    "Refusal",
    "capped_prefixes",
    "command_label",
    "metrics_auth_mode",
    "scrape_refusal",
    "truncate_label",
]

#: the version of the metric list in docs/metrics.md; bumped when a name or label changes
METRICS_VERSION = "2"
DEFAULT_MAX_LABEL_BYTES = 200
TRUNCATED = "..."
#: gzip level for scrapes: most of level 9's saving at a fraction of its time
_GZIP_LEVEL = 6

MAX_PREFIX_LABELS = 100
MAX_COMMAND_LABELS = 200
OTHER = "__other__"
#: the ``command`` label of a statement whose first word is no command we know
UNKNOWN_COMMAND = "unknown"
PROTOCOLS = ("pg", "ws")
#: a scrape of a store with more prefixes than this is answered from the previous census
#: (the per-prefix rows) while the next is taken (:meth:`Metrics.scrape`)
FRESH_PREFIXES = 8 * WALK_SLICE
#: ... unless that census is older than this (then the scrape waits for a new one)
CENSUS_MAX_AGE_S = 120.0
#: the longest a scrape of such a store waits for a census when it has none (the HTTP
#: server allows a request 10 s)
FIRST_WAIT_S = 5.0
#: the options whose caps refuse connections (``cubequeue_connections_refused``)
CONNECTION_CAPS = ("max_connections", "max_connections_per_user",
                   "max_unauthenticated_connections")
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


def _dialect_tags() -> frozenset[str]:
    """Every dialect command's name (``QUEUE ADD``…), from the parsed command classes."""
    tags: set[str] = set()
    todo: list[type[Command]] = [Command]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.tag:
            tags.add(cls.tag)
    return frozenset(tags)


#: PostgreSQL's statement verbs (the first words of its SQL commands): plain SQL is
#: counted under its verb, answered or refused, since the set is fixed and small
SQL_VERBS = frozenset((
    "ABORT", "ALTER", "ANALYZE", "BEGIN", "CALL", "CHECKPOINT", "CLOSE", "CLUSTER",
    "COMMENT", "COMMIT", "COPY", "CREATE", "DEALLOCATE", "DECLARE", "DELETE", "DISCARD",
    "DO", "DROP", "END", "EXECUTE", "EXPLAIN", "FETCH", "GRANT", "IMPORT", "INSERT",
    "LISTEN", "LOAD", "LOCK", "MERGE", "MOVE", "NOTIFY", "PREPARE", "REASSIGN", "REFRESH",
    "REINDEX", "RELEASE", "RESET", "REVOKE", "ROLLBACK", "SAVEPOINT", "SECURITY", "SELECT",
    "SET", "SHOW", "START", "TABLE", "TRUNCATE", "UNLISTEN", "UPDATE", "VACUUM", "VALUES",
    "WITH"))
#: the executor's names for a statement that did not parse and for an empty one
_PSEUDO = frozenset(("(parse)", "(empty)"))
_KNOWN_COMMANDS = _dialect_tags() | SQL_VERBS | _PSEUDO
assert len(_KNOWN_COMMANDS) < MAX_COMMAND_LABELS, "the command label's values are bounded"


def command_label(name: str) -> str:
    """The ``command`` label of a statement the executor names ``name``: a dialect
    command's name, a PostgreSQL verb, ``(parse)`` or ``(empty)``; anything else (a
    first word nobody knows, ``XYZZY0``) is ``unknown``, so junk cannot mint label values."""
    return name if name in _KNOWN_COMMANDS else UNKNOWN_COMMAND


#: one exported prefix row: (label, pending, active, oldest pending age in ms or None,
#: stalled)
PrefixRow = tuple[str, int, int, int | None, int]


class _Labels:
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


def _samples(prefixes: Sequence[PrefixCountsLike], size: int) -> Iterator[list[PrefixSample]]:
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


def capped_prefixes(prefixes: Sequence[PrefixCountsLike],
                    limit: int = MAX_PREFIX_LABELS,
                    max_label_bytes: int = DEFAULT_MAX_LABEL_BYTES,
                    ) -> list[tuple[str, int, int]]:
    """``(prefix, pending, active)`` for the ``limit`` largest prefixes, plus ``__other__``.

    Ties are broken by prefix name so that a scrape is deterministic; ``__other__`` appears
    only when something was folded into it. Prefixes equal once truncated are summed
    under one label: an exposition may not repeat a label set.
    """
    top = _TopPrefixes(limit)
    for part in _samples(prefixes, WALK_SLICE):
        top.add(part)
    rows = top.rows(_Labels(max_label_bytes))
    return [(label, pending, active) for label, pending, active, _, _ in rows]


@dataclass(frozen=True, slots=True)
class _Census:
    """What one scrape read of the store: its stats and the exported prefix rows."""

    stats: StoreStatsLike
    rows: list[PrefixRow]


class _StoreCollector:
    """The store's state (prometheus-client custom collector protocol). A scrape over
    HTTP hands it a census taken in slices (:meth:`Metrics.scrape`); otherwise (a test,
    :meth:`Metrics.render_for`) it reads the store at once."""

    def __init__(self, store: StatsSource, labels: _Labels, *, limit: int, walk_slice: int,
                 stalled_after_ms: int) -> None:
        self._store = store
        self._labels = labels
        self._limit = limit
        self._walk_slice = walk_slice
        self._stalled_after_ms = stalled_after_ms
        #: the census of the scrape being rendered (set and cleared around one render)
        self.census: _Census | None = None

    def walk(self, stats: StoreStatsLike) -> tuple[_TopPrefixes, Iterator[list[PrefixSample]]]:
        """The ranking to feed and the slices to feed it (each read when asked for)."""
        prefixes = stats.prefixes
        slices = (prefixes.walk(self._walk_slice, self._stalled_after_ms)
                  if isinstance(prefixes, PrefixCensus)
                  else _samples(prefixes, self._walk_slice))
        return _TopPrefixes(self._limit), slices

    def read(self) -> StoreStatsLike:
        return self._store.stats()

    def census_now(self) -> _Census:
        stats = self._store.stats()
        top, slices = self.walk(stats)
        for part in slices:
            top.add(part)
        return _Census(stats, self.label(top))

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


def _store_families(census: _Census | None) -> Iterator[Metric]:
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


class _DurableCollector:
    """Durable mode's log, disk, snapshot and recovery figures, read at scrape time from a
    store that keeps them (:class:`~cubequeue.storage.capabilities.ReportsPersistence`,
    found when the store was attached; this module does not load the durable package); an
    in-memory store yields nothing, so the names exist only where they mean something."""

    def __init__(self, store: object) -> None:
        self._store = store

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        store = capabilities_of(self._store).persistence
        if store is None:
            return
        stats = store.log.stats
        for name, doc, value in (
                ("cubequeue_log_frames", "Log frames (group commits) written", stats.frames),
                ("cubequeue_log_bytes", "Log bytes written", stats.bytes),
                ("cubequeue_log_records", "State records written to the log", stats.records),
                ("cubequeue_log_fsyncs", "fdatasync calls on the log", stats.fsyncs),
                ("cubequeue_log_fsync_seconds", "Time spent in fdatasync on the log",
                 stats.fsync_seconds),
                ("cubequeue_log_delayed_fsyncs", "everysec fsyncs still running after 2 s "
                 "(the disk is busy)", stats.delayed_fsyncs)):
            yield CounterMetricFamily(name, doc, value=float(value))
        yield GaugeMetricFamily("cubequeue_log_fsync_max_seconds",
                                "Slowest fdatasync on the log so far",
                                value=float(stats.fsync_max_seconds))
        yield GaugeMetricFamily("cubequeue_log_stopped",
                                "1 while the log refuses writes after a failed write or "
                                "fsync (mutating commands get 58030)",
                                value=0.0 if store.log.failed is None else 1.0)
        disk = GaugeMetricFamily("cubequeue_persist_disk_bytes",
                                 "Bytes in the data directory by kind (log, snapshot, "
                                 "quarantine)", labels=["kind"])
        by_kind = dict(store.disk_by_kind())
        by_kind["log"] = by_kind.get("log", 0) + store.log.bytes_since_snapshot
        for kind, size in sorted(by_kind.items()):
            disk.add_metric([kind], float(size))
        yield disk
        yield GaugeMetricFamily("cubequeue_persist_segments",
                                "Log segment files in the data directory",
                                value=float(_log_segments(store.settings.data_dir)))
        snap = store.last_snapshot
        yield GaugeMetricFamily("cubequeue_snapshot_bytes", "Size of the latest snapshot",
                                value=float(0 if snap is None else snap.bytes))
        yield GaugeMetricFamily("cubequeue_snapshot_last_time_seconds",
                                "When the latest snapshot was finished, since the Unix "
                                "epoch (0: none this run)",
                                value=0.0 if snap is None else snap.finished_ms / 1000)
        yield GaugeMetricFamily("cubequeue_snapshot_last_lsn",
                                "Last log sequence number the latest snapshot holds",
                                value=float(0 if snap is None else snap.lsn))
        yield CounterMetricFamily("cubequeue_snapshots", "Snapshots written this run",
                                  value=float(store.snapshots_total))
        report = store.recovery
        if report is not None:
            yield GaugeMetricFamily("cubequeue_recovery_duration_seconds",
                                    "How long the startup recovery took",
                                    value=float(report.seconds))
            yield GaugeMetricFamily("cubequeue_recovery_records",
                                    "State records replayed by the startup recovery",
                                    value=float(report.records))
            yield GaugeMetricFamily("cubequeue_recovery_quarantined_frames",
                                    "Torn or corrupt frames the startup recovery moved to "
                                    "quarantine/", value=float(report.torn_tails
                                                              + report.corrupt_frames))
            yield GaugeMetricFamily("cubequeue_recovery_quarantined_records",
                                    "Records that failed validation at startup (in "
                                    "quarantine/records.jsonl)",
                                    value=float(report.quarantined_records))


def _log_segments(data_dir: str) -> int:
    """The data directory's log segments (a listing of a few names; the store is durable,
    so its layout module is loaded already)."""
    from cubequeue.storage.durable import layout

    try:
        names = os.listdir(data_dir)
    except OSError:
        return 0
    return sum(1 for name in names if (parsed := layout.parse_name(name)) and parsed[0] == "log")


class _PoolCollector:
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


class _WithoutCreated:
    """The registry's families without their ``_created`` samples (prometheus-client
    only offers a process-wide switch, ``disable_created_metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


#: the histogram's upper bounds, +Inf last: a latency's bucket is the first bound >= it
_BOUNDS: tuple[float, ...] = (*LATENCY_BUCKETS, float("inf"))


class _Latency:
    """One command label's latency histogram: per-bucket (not cumulative) counts and
    the sum, as prometheus-client's ``Histogram`` keeps them."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * len(_BOUNDS)
        self.sum = 0.0


class _Tally:
    """One (command label, outcome)'s count, with its command's histogram."""

    __slots__ = ("count", "latency")

    def __init__(self, latency: _Latency) -> None:
        self.count = 0
        self.latency = latency


class _CommandCollector:
    """``cubequeue_commands_total`` and ``cubequeue_command_duration_seconds`` as plain
    numbers exported at scrape time. prometheus-client's ``Counter.inc`` and
    ``Histogram.observe`` take a lock per value (three per statement, a noticeable share
    of a ``SELECT 1`` round trip: bench/RESULTS-notes.md); these are updated by the
    event loop alone. The exposition
    is the same families, samples and order as those classes produce."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], _Tally] = {}
        self._latency: dict[str, _Latency] = {}

    def tally(self, command: str, outcome: str) -> _Tally:
        tally = self._counts.get((command, outcome))
        if tally is None:
            latency = self._latency.get(command)
            if latency is None:
                latency = self._latency[command] = _Latency()
            tally = self._counts[(command, outcome)] = _Tally(latency)
        return tally

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily("cubequeue_commands", _COMMANDS_HELP,
                                  labels=["command", "outcome"])
        yield HistogramMetricFamily("cubequeue_command_duration_seconds", _LATENCY_HELP,
                                    labels=["command"])

    def collect(self) -> Iterator[Metric]:
        counts = CounterMetricFamily("cubequeue_commands", _COMMANDS_HELP,
                                     labels=["command", "outcome"])
        for (command, outcome), tally in list(self._counts.items()):
            counts.add_metric([command, outcome], float(tally.count))
        yield counts
        latency = HistogramMetricFamily("cubequeue_command_duration_seconds", _LATENCY_HELP,
                                        labels=["command"])
        for command, hist in list(self._latency.items()):
            running, buckets = 0, []
            for bound, n in zip(_LE, hist.buckets, strict=True):
                running += n
                buckets.append((bound, float(running)))
            latency.add_metric([command], buckets, hist.sum)
        yield latency


_COMMANDS_HELP = "Commands run, by command and outcome (ok or the SQLSTATE)"
_LATENCY_HELP = "Command latency, RESULT_BLOCKING waits included"
#: the ``le`` label of each bound, spelled as prometheus-client spells these bounds
#: (``floatToGoString``: repr of the float, ``+Inf``)
_LE = tuple("+Inf" if b == float("inf") else repr(float(b)) for b in _BOUNDS)


def _accepts_gzip(accept_encoding: str) -> bool:
    """RFC 9110 §12.5.3: ``gzip`` (or ``*``) listed with a q-value above 0."""
    for item in accept_encoding.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        if coding.lower() not in ("gzip", "*"):
            continue
        q = next((p[2:] for p in params if p.lower().startswith("q=")), "1")
        try:
            return float(q) > 0
        except ValueError:
            return False
    return False


class Metrics:
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
        self._last_census: tuple[_Census, float] | None = None
        Gauge("cubequeue_build_info", "Always 1; the version label says which cubequeue "
              "serves", ["version"], registry=self.registry).labels(__version__).set(1)
        self._connections = Gauge("cubequeue_connections_open",
                                  "Open client connections by protocol (pg or ws)",
                                  ["protocol"], registry=self.registry)
        self._connections_total = Counter("cubequeue_connections",
                                          "Client connections accepted by protocol",
                                          ["protocol"], registry=self.registry)
        self._http_refusals = Counter(
            "cubequeue_http_refusals",
            "HTTP requests refused because a browser sent them: origin (a /ws upgrade "
            "whose Origin is not in --ws-allowed-origins), host (a console or /metrics "
            "request whose Host is not in --allowed-hosts)",
            ["reason"], registry=self.registry)
        for reason in ("origin", "host"):
            self._http_refusals.labels(reason)
        self._refused = Counter("cubequeue_connections_refused",
                                "Connections refused with 53300, by the cap that refused "
                                "them (the option's name)", ["cap"], registry=self.registry)
        for cap in CONNECTION_CAPS:
            self._refused.labels(cap)
        self._commands = _CommandCollector()
        self.registry.register(self._commands)
        for protocol in PROTOCOLS:  # export zeros before the first connection
            self._connections.labels(protocol)
            self._connections_total.labels(protocol)
        self._tallies: dict[tuple[str, str], _Tally] = {}
        self._labels = _Labels(max_label_bytes)
        self._store = _StoreCollector(store, self._labels, limit=prefix_limit,
                                      walk_slice=max(1, walk_slice),
                                      stalled_after_ms=stalled_after_ms)
        self._census_task: asyncio.Task[_Census] | None = None
        self.registry.register(self._store)
        self.registry.register(_DurableCollector(store))
        self.registry.register(_PoolCollector(store))
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._exposed = _WithoutCreated(self.registry)

    def connection_opened(self, protocol: str) -> None:
        self._connections.labels(protocol).inc()
        self._connections_total.labels(protocol).inc()

    def connection_closed(self, protocol: str) -> None:
        self._connections.labels(protocol).dec()

    def connection_refused(self, cap: str) -> None:
        """Count one connection refused by a connection cap (server/context.py)."""
        self._refused.labels(cap).inc()

    def http_refused(self, reason: str) -> None:
        """Count one request refused by the Origin or Host rule (server/browsers.py)."""
        self._http_refusals.labels(reason).inc()

    def observe_command(self, name: str, outcome: str, seconds: float) -> None:
        """Count one command and its latency. Runs for every statement, so it is a few
        attribute updates and one bisect (:class:`_CommandCollector`); called from the
        event loop only (the executor's thread)."""
        tally = self._tallies.get((name, outcome))
        if tally is None:
            tally = self._tally(name, outcome)
        tally.count += 1
        latency = tally.latency
        latency.sum += seconds
        latency.buckets[bisect_left(_BOUNDS, seconds)] += 1

    def _tally(self, name: str, outcome: str) -> _Tally:
        tally = self._commands.tally(command_label(name), outcome)
        if len(self._tallies) < MAX_COMMAND_LABELS * 8:
            self._tallies[(name, outcome)] = tally
        return tally

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
            census = _Census(stats, last[0].rows)
        elif large:
            try:  # shielded: a scrape that gives up does not cancel the census
                census = await asyncio.wait_for(asyncio.shield(self._census_task_now()),
                                                self._first_wait_s)
            except TimeoutError:
                census = _Census(stats, [])
        else:
            census = await asyncio.shield(self._census_task_now())
        self._store.census = census
        try:
            return self.render_for(accept, accept_encoding)
        finally:
            self._store.census = None

    def _census_task_now(self) -> asyncio.Task[_Census]:
        """The census being taken, or a new one."""
        task = self._census_task
        if task is None:
            task = self._census_task = asyncio.get_running_loop().create_task(
                self._take_census(), name="metrics-census")
            task.add_done_callback(self._census_taken)
        return task

    def _census_taken(self, task: asyncio.Task[_Census]) -> None:
        if self._census_task is task:
            self._census_task = None
        if not task.cancelled() and task.exception() is None:  # retrieved either way
            self._last_census = (task.result(), self._clock())

    async def _take_census(self) -> _Census:
        store = self._store
        stats = store.read()
        top, slices = store.walk(stats)
        for part in slices:  # each slice is read from the store when asked for
            top.add(part)
            await asyncio.sleep(0)
        return _Census(stats, store.label(top))

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text body and its Content-Type (no negotiation)."""
        return generate_latest(self._exposed), CONTENT_TYPE_LATEST

    def render_for(self, accept: str, accept_encoding: str
                   ) -> tuple[bytes, list[tuple[str, str]]]:
        """``GET /metrics``: the body and its response headers, negotiated from the
        request's ``Accept`` (OpenMetrics when asked for) and ``Accept-Encoding`` (gzip
        when allowed)."""
        encoder, content_type = choose_encoder(accept)
        body = encoder(self._exposed)
        headers = [("Content-Type", content_type), ("Vary", "Accept, Accept-Encoding")]
        if _accepts_gzip(accept_encoding):
            body = gzip.compress(body, compresslevel=_GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        return body, headers


# --- who may scrape ------------------------------------------------------------------

#: RFC 7617's challenge for a scraper without credentials
METRICS_CHALLENGE = 'Basic realm="cubequeue metrics", charset="UTF-8"'


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a scrape that may not see the metrics."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def metrics_auth_mode(config: Config) -> str:
    """``--metrics-auth`` when given, else ``basic`` when the PostgreSQL wire asks for
    passwords and ``none`` otherwise (as the console decides): prefix names and counts
    are not for anyone who can reach the HTTP port of a protected server."""
    if config.metrics_auth is not None:
        return config.metrics_auth
    return "none" if config.auth == "trust" else "basic"


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def scrape_refusal(mode: str, peer_host: str | None,
                   authorized: Callable[[], bool]) -> Refusal | None:
    """None when the scrape may proceed; else the 401 or 403 to answer.

    ``authorized`` checks the request's Basic credentials against the PostgreSQL wire's
    users; it is called only in ``basic`` mode."""
    if mode == "none":
        return None
    if mode == "loopback":
        if _is_loopback(peer_host):
            return None
        return Refusal(403, (("Content-Type", "text/plain; charset=utf-8"),),
                       b"metrics are served to loopback addresses only "
                       b"(--metrics-auth loopback)\n")
    if mode == "basic":
        if authorized():
            return None
        return Refusal(401, (("WWW-Authenticate", METRICS_CHALLENGE),
                             ("Content-Type", "text/plain; charset=utf-8")),
                       b"metrics need the user and password of the PostgreSQL wire "
                       b"(--metrics-auth basic)\n")
    raise ValueError(f"unknown --metrics-auth {mode!r}")
