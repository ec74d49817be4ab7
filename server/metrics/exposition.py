"""The exposition of ``GET /metrics``: the registry's families without their ``_created``
series (Prometheus ignores them and they double the scrape), in the Prometheus text
format or OpenMetrics as the ``Accept`` header asks, gzipped when ``Accept-Encoding``
allows it. The names are a stable, versioned list: docs/metrics.md.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder, generate_latest

#: the version of the metric list in docs/metrics.md; bumped when a name or label changes
METRICS_VERSION = "2"
#: gzip level for scrapes: most of level 9's saving at a fraction of its time
_GZIP_LEVEL = 6


class WithoutCreated:
    """The registry's families without their ``_created`` samples (prometheus-client
    only offers a process-wide switch, ``disable_created_metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


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


def render(exposed: WithoutCreated) -> tuple[bytes, str]:
    """The Prometheus text body and its Content-Type (no negotiation)."""
    return generate_latest(exposed), CONTENT_TYPE_LATEST


def render_for(exposed: WithoutCreated, accept: str, accept_encoding: str
               ) -> tuple[bytes, list[tuple[str, str]]]:
    """``GET /metrics``: the body and its response headers, negotiated from the
    request's ``Accept`` (OpenMetrics when asked for) and ``Accept-Encoding`` (gzip
    when allowed)."""
    encoder, content_type = choose_encoder(accept)
    body = encoder(exposed)
    headers = [("Content-Type", content_type), ("Vary", "Accept, Accept-Encoding")]
    if _accepts_gzip(accept_encoding):
        body = gzip.compress(body, compresslevel=_GZIP_LEVEL)
        headers.append(("Content-Encoding", "gzip"))
    headers.append(("Content-Length", str(len(body))))
    return body, headers
