"""Prometheus metrics for ``GET /metrics``, on a registry of our own.

Two kinds of numbers:

* events the server reports as they happen: connections opened and closed per protocol,
  commands by name and outcome, command latency (:mod:`.events`);
* the store's state, read from ``store.stats()`` at scrape time by a custom collector, so
  the numbers are exactly what ``SYS CACHESTORE INFO`` reports and nothing has to be
  updated on the hot path (:mod:`.store`, its prefixes as bounded labels in
  :mod:`.prefixes`; a durable store's log and snapshots in :mod:`.durable`, a PostgreSQL
  store's pool in :mod:`.pool`).

:class:`Metrics` (:mod:`.registry`) owns the registry and the scrape over HTTP, which
reads the prefixes in slices without holding the event loop. The exposition
(:mod:`.exposition`) adds the standard ``process_*`` and ``python_gc_*`` collectors,
leaves out the ``_created`` series and negotiates OpenMetrics and gzip; who may scrape is
:mod:`.access`'s decision (``--metrics-auth``). The names are a stable, versioned list:
docs/metrics.md.
"""

from cubequeue.server.metrics.access import Refusal, metrics_auth_mode, scrape_refusal
from cubequeue.server.metrics.events import (
    LATENCY_BUCKETS,
    MAX_COMMAND_LABELS,
    UNKNOWN_COMMAND,
    command_label,
)
from cubequeue.server.metrics.exposition import METRICS_VERSION
from cubequeue.server.metrics.prefixes import (
    DEFAULT_MAX_LABEL_BYTES,
    MAX_PREFIX_LABELS,
    OTHER,
    capped_prefixes,
    truncate_label,
)
from cubequeue.server.metrics.registry import Metrics
from cubequeue.storage.stats import WALK_SLICE

__all__ = [
    "DEFAULT_MAX_LABEL_BYTES",
    "LATENCY_BUCKETS",
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
