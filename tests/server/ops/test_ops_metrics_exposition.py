"""``GET /metrics`` as scrapers see it: the standard process and GC collectors, no
``_created`` series, OpenMetrics and gzip on request, label values bounded in bytes, who
may scrape (``--metrics-auth``), and docs/metrics.md as the stable list of names."""

from __future__ import annotations

import gzip
import re
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families

from cubequeue.server.config import Config
from cubequeue.server.metrics import (
    METRICS_VERSION,
    OTHER,
    Metrics,
    capped_prefixes,
    metrics_auth_mode,
    scrape_refusal,
    truncate_label,
)
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.storage.stats import DEPARTURE_REASONS, PrefixCounts, StoreStats

OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-"
                      "text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


@dataclass(frozen=True)
class Prefix:
    prefix: str
    pending: int
    active: int = 0


@dataclass
class Stats:
    prefixes: list[Prefix] = field(default_factory=list)
    items_total: int = 0
    results_total: int = 0
    waiters: int = 0
    cache_keys: int = 0
    cache_bytes: int = 0
    evictions_total: int = 0


@dataclass
class FakeStore:
    current: Stats = field(default_factory=Stats)

    def stats(self) -> Stats:
        return self.current


def _names(text: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


# --- the exposition -----------------------------------------------------------------------


def test_standard_collectors_and_no_created_series() -> None:
    metrics = Metrics(FakeStore())
    metrics.observe_command("QUEUE ADD", "ok", 0.001)
    metrics.connection_opened("pg")
    body, headers = metrics.render_for("", "")
    names = _names(body.decode())
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total",
            "process_open_fds", "python_gc_objects_collected_total",
            "python_gc_collections_total"} <= names
    assert {"cubequeue_commands_total", "cubequeue_connections_total",
            "cubequeue_command_duration_seconds_bucket"} <= names
    assert not [n for n in names if n.endswith("_created")]
    assert dict(headers)["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "Content-Encoding" not in dict(headers)
    assert dict(headers)["Content-Length"] == str(len(body))


def test_openmetrics_when_asked_and_gzip_when_accepted() -> None:
    metrics = Metrics(FakeStore(Stats(prefixes=[Prefix("q", 3)], items_total=3)))
    metrics.observe_command("QUEUE ADD", "ok", 0.001)
    body, headers = metrics.render_for(OPENMETRICS_ACCEPT, "deflate, gzip;q=0.8")
    h = dict(headers)
    assert h["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert h["Content-Encoding"] == "gzip"
    assert h["Content-Length"] == str(len(body))
    text = gzip.decompress(body).decode()
    assert text.endswith("# EOF\n")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in om_parse(text) for s in family.samples}
    assert samples[("cubequeue_queue_pending", (("prefix", "q"),))] == 3
    assert samples[("cubequeue_commands_total", (("command", "QUEUE ADD"),
                                                 ("outcome", "ok")))] == 1
    assert not [name for name, _ in samples if name.endswith("_created")]


@pytest.mark.parametrize("accept_encoding", ["", "identity", "gzip;q=0", "br", "gzip;q=x"])
def test_no_gzip_unless_accepted(accept_encoding: str) -> None:
    _body, headers = Metrics(FakeStore()).render_for("", accept_encoding)
    assert "Content-Encoding" not in dict(headers)


# --- label values bounded in bytes ----------------------------------------------------------


def test_truncate_label_cuts_at_a_character_boundary() -> None:
    assert truncate_label("short", 16) == "short"
    assert truncate_label("x" * 16, 16) == "x" * 16
    assert truncate_label("x" * 17, 16) == "x" * 13 + "..."
    cut = truncate_label("é" * 20, 16)  # two bytes each
    assert cut == "é" * 6 + "..." and len(cut.encode()) <= 16


def test_prefixes_equal_once_truncated_are_summed() -> None:
    rows = capped_prefixes([Prefix("a" * 50 + "1", 1), Prefix("a" * 50 + "2", 2, 1),
                            Prefix("b", 5)], max_label_bytes=20)
    assert rows == [("b", 5, 0), ("a" * 17 + "...", 3, 1)]
    many = [Prefix(f"p{i}", 1) for i in range(5)]
    assert capped_prefixes(many, limit=2)[-1] == (OTHER, 3, 0)


def test_thirty_prefixes_of_one_mib_make_a_small_scrape() -> None:
    mib = 1024 * 1024
    store = FakeStore(Stats(prefixes=[Prefix(chr(ord("a") + i % 26) * mib + str(i), 1)
                                      for i in range(30)]))
    body, _ = Metrics(store).render_for("", "")
    assert len(body) < 64 * 1024
    labels = [s.labels["prefix"] for family in text_string_to_metric_families(body.decode())
              if family.name == "cubequeue_queue_pending" for s in family.samples]
    assert labels and all(len(label.encode()) <= 200 and label.endswith("...")
                          for label in labels)


def test_long_prefix_over_psycopg_is_truncated_on_the_scrape(
        cubequeue_server: CubequeueServer) -> None:
    prefix = "p" * 5000
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        conn.execute("QUEUE ADD PRIORITY 1 %s '{}'", (f"{prefix}:k",), prepare=False)
    with urllib.request.urlopen(f"{cubequeue_server.http_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    pending = {s.labels["prefix"]: s.value for family in text_string_to_metric_families(text)
               if family.name == "cubequeue_queue_pending" for s in family.samples}
    assert pending == {"p" * 197 + "...": 1}
    assert "process_resident_memory_bytes" in text
    assert "_created" not in text


def test_real_server_negotiates_openmetrics_and_gzip(
        cubequeue_server: CubequeueServer) -> None:
    request = urllib.request.Request(f"{cubequeue_server.http_url}/metrics", headers={
        "Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        assert gzip.decompress(resp.read()).decode().endswith("# EOF\n")


# --- who may scrape -------------------------------------------------------------------------


def test_metrics_auth_mode_follows_auth_unless_given() -> None:
    assert metrics_auth_mode(Config()) == "none"
    assert metrics_auth_mode(Config(auth="md5", password="pw")) == "basic"
    assert metrics_auth_mode(Config(auth="md5", password="pw", metrics_auth="none")) == "none"
    assert metrics_auth_mode(Config(metrics_auth="loopback")) == "loopback"


@pytest.mark.parametrize(("mode", "peer", "authorized", "status"), [
    ("none", "203.0.113.9", False, None),
    ("loopback", "127.0.0.1", False, None),
    ("loopback", "::1", False, None),
    ("loopback", "::ffff:127.0.0.1", False, None),
    ("loopback", "203.0.113.9", True, 403),
    ("loopback", None, True, 403),
    ("basic", "127.0.0.1", True, None),
    ("basic", "127.0.0.1", False, 401),
])
def test_scrape_refusal(mode: str, peer: str | None, authorized: bool,
                        status: int | None) -> None:
    refusal = scrape_refusal(mode, peer, lambda: authorized)
    assert (refusal.status if refusal else None) == status
    if refusal is not None and status == 401:
        assert dict(refusal.headers)["WWW-Authenticate"].startswith("Basic ")
        assert b"--metrics-auth basic" in refusal.body


# --- docs/metrics.md: the stable, versioned list ---------------------------------------

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
_ROW = re.compile(r"^\| `([a-z_]+)` \| (\w+) \|([^|]*)\|", re.MULTILINE)


def _documented() -> dict[str, tuple[str, frozenset[str]]]:
    """Every documented metric but the durable mode's and the PostgreSQL store's own
    sections, which an in-memory store does not serve (tests/storage/durable/
    test_durable_metrics.py and test_ops_metrics_store.py check those)."""
    text = DOC.read_text()
    for section in ("## Durable mode metrics", "## PostgreSQL store metrics"):
        head, rest = text.split(section, 1)
        text = head + "## " + rest.split("\n## ", 1)[1]
    out = {}
    for name, kind, labels in _ROW.findall(text):
        out[name] = (kind, frozenset(re.findall(r"`([a-z_]+)`", labels.split("(")[0])))
    return out


def _served() -> dict[str, tuple[str, frozenset[str]]]:
    # every family with a sample, so that its labels show
    stats = StoreStats(prefixes=[PrefixCounts("q", 1, 1, 5000, 1)],
                       departures=dict.fromkeys(DEPARTURE_REASONS, 0))
    metrics = Metrics(FakeStore(stats))  # type: ignore[arg-type]
    metrics.observe_command("QUEUE ADD", "ok", 0.001)
    body, _ = metrics.render_for("application/openmetrics-text", "")
    out = {}
    for family in om_parse(body.decode()):
        labels = frozenset(k for s in family.samples for k in s.labels) - {"le"}
        out[family.name] = (family.type, labels)
    return out


def test_docs_list_every_served_metric_and_nothing_else() -> None:
    assert _documented() == _served()


def test_docs_state_the_list_version() -> None:
    assert f"**Metric list version {METRICS_VERSION}.**" in DOC.read_text()
