"""Metrics: exact values from the exposition text, with a fake store (live scrape: test_ops_live)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cubequeue.server.metrics import (
    MAX_COMMAND_LABELS,
    MAX_PREFIX_LABELS,
    OTHER,
    UNKNOWN_COMMAND,
    Metrics,
)
from cubequeue.storage.stats import PrefixCounts, StoreStats


@dataclass
class FakeStore:
    current: StoreStats = field(default_factory=StoreStats)
    calls: int = 0

    def stats(self) -> StoreStats:
        self.calls += 1
        return self.current


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return samples(metrics)[(name, tuple(sorted(labels.items())))]


def test_connections_by_protocol() -> None:
    m = Metrics(FakeStore())
    assert value(m, "cubequeue_connections_open", protocol="pg") == 0
    assert value(m, "cubequeue_connections_open", protocol="ws") == 0
    for _ in range(3):
        m.connection_opened("pg")
    m.connection_opened("ws")
    m.connection_closed("pg")
    assert value(m, "cubequeue_connections_open", protocol="pg") == 2
    assert value(m, "cubequeue_connections_open", protocol="ws") == 1
    assert value(m, "cubequeue_connections_total", protocol="pg") == 3


def test_commands_and_latency() -> None:
    m = Metrics(FakeStore())
    m.observe_command("QUEUE ADD", "ok", 0.0002)
    m.observe_command("QUEUE ADD", "ok", 0.003)
    m.observe_command("QUEUE ADD", "54000", 0.0001)
    m.observe_command("CACHE GET", "ok", 2.0)
    assert value(m, "cubequeue_commands_total", command="QUEUE ADD", outcome="ok") == 2
    assert value(m, "cubequeue_commands_total", command="QUEUE ADD", outcome="54000") == 1
    assert value(m, "cubequeue_command_duration_seconds_count", command="QUEUE ADD") == 3
    assert value(m, "cubequeue_command_duration_seconds_sum",
                 command="QUEUE ADD") == pytest.approx(0.0033)
    assert value(m, "cubequeue_command_duration_seconds_bucket", command="QUEUE ADD",
                 le="0.00025") == 2
    assert value(m, "cubequeue_command_duration_seconds_bucket", command="CACHE GET",
                 le="1.0") == 0
    assert value(m, "cubequeue_command_duration_seconds_bucket", command="CACHE GET",
                 le="2.5") == 1


def test_store_state_read_at_scrape_time() -> None:
    store = FakeStore()
    m = Metrics(store)
    store.calls = 0
    store.current = StoreStats(
        prefixes=[PrefixCounts("q", 3, 1), PrefixCounts("r", 0, 2)],
        items_total=6, results_total=4, waiters=2, cache_keys=9, cache_bytes=1234,
        evictions_total=5)
    got = samples(m)
    assert store.calls == 1
    assert got[("cubequeue_queue_pending", (("prefix", "q"),))] == 3
    assert got[("cubequeue_queue_pending", (("prefix", "r"),))] == 0
    assert got[("cubequeue_queue_active", (("prefix", "q"),))] == 1
    assert got[("cubequeue_queue_active", (("prefix", "r"),))] == 2
    assert got[("cubequeue_queue_prefixes", ())] == 2
    assert got[("cubequeue_queue_items", ())] == 6
    assert got[("cubequeue_queue_results", ())] == 4
    assert got[("cubequeue_blocked_waiters", ())] == 2
    assert got[("cubequeue_cache_keys", ())] == 9
    assert got[("cubequeue_cache_bytes", ())] == 1234
    assert got[("cubequeue_cache_evictions_total", ())] == 5
    # the next scrape sees the new state, not a cached one
    store.current = StoreStats()
    got = samples(m)
    assert ("cubequeue_queue_pending", (("prefix", "q"),)) not in got
    assert got[("cubequeue_queue_items", ())] == 0


def test_prefix_labels_are_capped_and_the_rest_summed() -> None:
    n = MAX_PREFIX_LABELS + 50
    # prefix i has i pending and 1 active: the largest MAX_PREFIX_LABELS keep their label
    prefixes = [PrefixCounts(f"p{i:04d}", i, 1) for i in range(n)]
    m = Metrics(FakeStore(StoreStats(prefixes=prefixes, items_total=sum(range(n)) + n)))
    got = samples(m)
    pending = {dict(labels)["prefix"]: v for (name, labels), v in got.items()
               if name == "cubequeue_queue_pending"}
    active = {dict(labels)["prefix"]: v for (name, labels), v in got.items()
              if name == "cubequeue_queue_active"}
    assert len(pending) == len(active) == MAX_PREFIX_LABELS + 1
    assert f"p{n - 1:04d}" in pending and "p0049" not in pending and "p0050" in pending
    assert pending[OTHER] == sum(range(50))
    assert active[OTHER] == 50
    assert sum(pending.values()) + sum(active.values()) == sum(range(n)) + n


def test_no_other_label_when_under_the_cap() -> None:
    m = Metrics(FakeStore(StoreStats(prefixes=[PrefixCounts("a", 1, 0)])))
    assert (("cubequeue_queue_pending", (("prefix", OTHER),))) not in samples(m)


def test_junk_first_words_are_one_label_value() -> None:
    """Issue 27: 300 statements ``XYZZY0 1``... made 200 label values (the old cap), each
    with a 24-series histogram. A word that names no command is ``unknown``; the parsed
    command names and PostgreSQL's verbs keep their own label."""
    m = Metrics(FakeStore())
    for i in range(300):
        m.observe_command(f"XYZZY{i}", "0A000", 0.001)
    m.observe_command("QUEUE ADD", "ok", 0.001)
    m.observe_command("SELECT", "ok", 0.001)
    m.observe_command("DELETE", "0A000", 0.001)
    m.observe_command("(parse)", "42601", 0.001)
    got = samples(m)
    names = {dict(labels)["command"] for (name, labels) in got
             if name == "cubequeue_commands_total"}
    assert names == {UNKNOWN_COMMAND, "QUEUE ADD", "SELECT", "DELETE", "(parse)"}
    assert got[("cubequeue_commands_total",
                (("command", UNKNOWN_COMMAND), ("outcome", "0A000")))] == 300
    histograms = {dict(labels)["command"] for (name, labels) in got
                  if name == "cubequeue_command_duration_seconds_count"}
    assert histograms == names
    assert len(names) < MAX_COMMAND_LABELS
    assert OTHER not in names


def test_registries_are_separate() -> None:
    a, b = Metrics(FakeStore()), Metrics(FakeStore())
    a.connection_opened("pg")
    assert value(a, "cubequeue_connections_open", protocol="pg") == 1
    assert value(b, "cubequeue_connections_open", protocol="pg") == 0
