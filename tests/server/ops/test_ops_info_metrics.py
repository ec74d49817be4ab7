"""/metrics and ``SYS CACHESTORE INFO`` tell the same truths; departures are logged.

"``SYS CACHESTORE INFO`` reports the same truths" as the gauges of ``/metrics``.
After a scripted workload both are read and compared with each other *and* with the
counts the workload implies, so two equally wrong sources still fail.

"Each departure other than ``acked`` is also logged at INFO with its queue id."
With ``--log-format json`` the ``cubequeue.queue`` records carry ``queue_id`` and
``reason`` as fields; an ACK leaves no such record.

Each test starts its own server (``start_server``), so the numbers are its own.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cubequeue.server.pgclient import PgClient, connect

StartServer = Callable[..., Any]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def pg(server: Any) -> PgClient:
    return connect(server.host, server.port, timeout=30)


def scrape(server: Any) -> Samples:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def gauge(samples: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"/metrics has no {name}{labels or ''}"
    return samples[key]


def info(client: PgClient) -> dict[str, str | None]:
    (result,) = client.query("SYS CACHESTORE INFO")
    assert result.columns == ["name", "value", "description"]
    values = {row[0]: row[1] for row in result.rows}
    assert all(name is not None for name in values)
    return {str(name): value for name, value in values.items()}


def size_bytes(text: str | None) -> int:
    """An INFO size under 1 kB, as humansize writes it: ``"<n> B"``."""
    assert text is not None and text.endswith(" B"), text
    return int(text[:-2])


def _id(client: PgClient, sql: str) -> int:
    (result,) = client.query(sql)
    row = dict(zip(result.columns, result.rows[0], strict=True))
    assert row["added"] == "t", row
    return int(row["id"] or "")


def test_metrics_and_info_agree_after_a_workload(start_server: StartServer) -> None:
    server = start_server()
    with pg(server) as c:
        # cache: 3 keys (one overwritten, one removed): 1 + 2 + 5 bytes of values
        c.query("CACHE SET 'mi:k1' 'a'")
        c.query("CACHE SET 'mi:k2' 'bb'")
        c.query("CACHE SET 'mi:k3' 'c'")
        c.query("CACHE SET 'mi:k3' 'ccccc'")
        c.query("CACHE SET 'mi:k4' 'gone'")
        assert c.query("CACHE REMOVE 'mi:k4'")[-1].tag.startswith("CACHE REMOVE")
        # queue: 6 items over two prefixes
        for path in ("mq:1", "mq:2", "mq:3", "mq:4", "oq:1", "oq:2"):
            _id(c, f"QUEUE ADD PRIORITY 1 '{path}' 'payload'")
        c.query("QUEUE RETRIEVE CONCURRENCY 3 'mq:1'")
        c.query("QUEUE RETRIEVE CONCURRENCY 3 'mq:2'")
        assert c.query("QUEUE ACK 'mq:1' 'result one'")[-1].rows == [("t",)]  # a result
        assert c.query("QUEUE ACK 'oq:1' NULL")[-1].rows == [("t",)]  # no result row
        assert len(c.query("QUEUE CANCEL 'mq:3'")[-1].rows) == 1  # no result either
        # left: mq:2 active, mq:4 pending, oq:2 pending; one result (mq:1)

        got = scrape(server)
        rows = info(c)

    assert gauge(got, "cubequeue_cache_keys") == 3
    assert rows["CacheItems.keys_total"] == "3"
    assert gauge(got, "cubequeue_cache_bytes") == size_bytes(rows["CacheItems.size_total"])

    assert gauge(got, "cubequeue_queue_items") == 3
    assert rows["QueueItems.keys_total"] == "3"
    per_prefix = {
        prefix: (
            gauge(got, "cubequeue_queue_pending", prefix=prefix),
            gauge(got, "cubequeue_queue_active", prefix=prefix),
        )
        for prefix in ("mq", "oq")
    }
    assert per_prefix == {"mq": (1, 1), "oq": (1, 0)}
    assert sum(p + a for p, a in per_prefix.values()) == int(rows["QueueItems.keys_total"] or "")

    assert gauge(got, "cubequeue_queue_results") == 1
    assert rows["QueueResults.keys_total"] == "1"
    assert size_bytes(rows["QueueResults.size_total"]) > 0


def test_metrics_and_info_agree_on_an_empty_store_then_after_truncate(
    start_server: StartServer,
) -> None:
    server = start_server()
    with pg(server) as c:
        rows = info(c)
        got = scrape(server)
        for metric, name in (
            ("cubequeue_cache_keys", "CacheItems.keys_total"),
            ("cubequeue_queue_items", "QueueItems.keys_total"),
            ("cubequeue_queue_results", "QueueResults.keys_total"),
        ):
            assert gauge(got, metric) == 0
            assert rows[name] == "0"

        c.query("CACHE SET 'tr:a' 'x'")
        _id(c, "QUEUE ADD PRIORITY 1 'tr:1' 'p'")
        _id(c, "QUEUE ADD PRIORITY 1 'tr:2' 'p'")
        c.query("QUEUE ACK 'tr:1' 'r'")
        c.query("QUEUE TRUNCATE")
        c.query("CACHE TRUNCATE")
        rows = info(c)
        got = scrape(server)
    assert gauge(got, "cubequeue_cache_keys") == 0 and rows["CacheItems.keys_total"] == "0"
    assert gauge(got, "cubequeue_queue_items") == 0 and rows["QueueItems.keys_total"] == "0"
    assert gauge(got, "cubequeue_queue_results") == int(rows["QueueResults.keys_total"] or "-1")


# ---------------------------------------------------------------- departure log


def _json_records(text: str) -> list[dict[str, Any]]:
    records = []
    for line in text.splitlines():
        assert line.startswith("{"), f"not a JSON log line: {line!r}"
        records.append(json.loads(line))
    return records


def test_departures_other_than_ack_are_logged_with_their_queue_id(
    start_server: StartServer,
) -> None:
    server = start_server("--log-format", "json")
    with pg(server) as c:
        cancelled = _id(c, "QUEUE ADD PRIORITY 1 'dep:cancel' 'p'")
        purged = _id(c, "QUEUE ADD PRIORITY 1 'purge:one' 'p'")
        acked = _id(c, "QUEUE ADD PRIORITY 1 'dep:ack' 'p'")
        assert len({cancelled, purged, acked}) == 3
        assert c.query("QUEUE CANCEL 'dep:cancel'")[-1].rows == [("p", None)]
        assert c.query("QUEUE PURGE 'purge'")[-1].rows == [("1",)]
        c.query("QUEUE RETRIEVE CONCURRENCY 1 'dep:ack'")
        assert c.query("QUEUE ACK 'dep:ack' 'r'")[-1].rows == [("t",)]
    assert server.stop() == 0  # every record is flushed by now
    records = _json_records(server.log())

    queue = [r for r in records if r["logger"] == "cubequeue.queue" and "queue_id" in r]
    by_id = {r.get("queue_id"): r for r in queue}
    assert set(by_id) == {cancelled, purged}, queue
    for queue_id, reason, path in (
        (cancelled, "cancelled", "dep:cancel"),
        (purged, "purged", "purge:one"),
    ):
        rec = by_id[queue_id]
        assert rec["level"] == "info"
        assert rec["reason"] == reason
        assert isinstance(rec["queue_id"], int)
        assert str(queue_id) in rec["msg"] and path in rec["msg"] and reason in rec["msg"]
    # nothing anywhere in the log names the acked item as departing
    assert not [r for r in records if r.get("queue_id") == acked]
    assert not [r for r in queue if "dep:ack" in r["msg"]]


def test_metrics_and_info_agree_after_results_expire_by_the_test_clock(
    start_server: StartServer,
) -> None:
    """An expired result leaves both reports at once (scrape first, then INFO)."""
    server = start_server("--test-clock")
    with pg(server) as c:
        _id(c, "QUEUE ADD PRIORITY 1 'ex:1' 'p'")
        _id(c, "QUEUE ADD PRIORITY 1 'ex:2' 'p'")
        assert c.query("QUEUE ACK 'ex:1' 'r'")[-1].rows == [("t",)]
        before = scrape(server)
        assert gauge(before, "cubequeue_queue_results") == 1
        assert gauge(before, "cubequeue_queue_items") == 1
        assert info(c)["QueueResults.keys_total"] == "1"

        c.query("SYS CLOCK ADVANCE 400000")  # past the 5 min result TTL
        got = scrape(server)
        rows = info(c)
    assert gauge(got, "cubequeue_queue_results") == 0
    assert rows["QueueResults.keys_total"] == "0"
    assert gauge(got, "cubequeue_queue_items") == 1
    assert rows["QueueItems.keys_total"] == "1"


def test_metrics_and_info_agree_after_a_cache_ttl_expires(start_server: StartServer) -> None:
    """Scrape first, then INFO: the gauges must not count a key CACHE GET no longer sees."""
    server = start_server("--test-clock")
    with pg(server) as c:
        c.query("CACHE SET TTL 1 'ex:short' 'xx'")
        c.query("CACHE SET 'ex:long' 'y'")
        assert gauge(scrape(server), "cubequeue_cache_keys") == 2

        c.query("SYS CLOCK ADVANCE 400000")  # past the 1 s TTL; no cache command follows
        got = scrape(server)
        rows = info(c)
        assert c.query("CACHE GET 'ex:short'")[-1].rows == [(None,)]  # expired
    assert rows["CacheItems.keys_total"] == "1"
    assert gauge(got, "cubequeue_cache_keys") == 1
    assert gauge(got, "cubequeue_cache_bytes") == size_bytes(rows["CacheItems.size_total"])


def test_a_large_bulk_removal_is_one_summary_line(start_server: StartServer) -> None:
    """QUEUE PURGE of many items writes its summary line, not one line per item (a small
    one still names each item, as the test above shows)."""
    server = start_server("--log-format", "json")
    with pg(server) as c:
        for i in range(25):
            c.query(f"QUEUE ADD PRIORITY 1 'big:{i}' 'p'")
        assert c.query("QUEUE PURGE 'big'")[-1].rows == [("25",)]
        for _ in range(25):  # later statements let the release finish
            c.query("SELECT 1")
    assert server.stop() == 0
    queue = [r for r in _json_records(server.log()) if r["logger"] == "cubequeue.queue"]
    assert not [r for r in queue if "queue_id" in r], queue
    (summary,) = [r for r in queue if r.get("reason") == "purged"]
    assert "25 items removed" in summary["msg"] and summary["count"] == 25

