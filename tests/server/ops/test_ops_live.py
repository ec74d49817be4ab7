"""Operations against the real server: /metrics after a workload, JSON logs, healthcheck.

Each test starts its own server (``start_server`` from tests/conftest.py) so the numbers
it checks are its own. Clients are the stdlib client of ``cubequeue.server.pgclient`` and
``websockets`` for the WebSocket side.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from cubequeue.server.pgclient import PgClient, PgError, connect

StartServer = Callable[..., Any]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
POLL_S = 10.0


def scrape(server: Any) -> Samples:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Poll (the server's state changes asynchronously); fail after POLL_S seconds."""
    deadline = time.monotonic() + POLL_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def pg(server: Any, **params: str) -> PgClient:
    return connect(server.host, server.port, timeout=30, params=params)


@contextmanager
def ws(server: Any) -> Iterator[ClientConnection]:
    with ws_connect(server.ws_url, open_timeout=10) as conn:
        yield conn


def test_metrics_after_a_scripted_workload(start_server: StartServer) -> None:
    server = start_server("--cache-max-keys", "2", "--cache-max-entry-bytes", "64")
    with pg(server, process_id="worker-1") as a, ws(server):
        for path in ("mq:1", "mq:2", "mq:3", "oth:1"):
            a.query(f"QUEUE ADD PRIORITY 1 '{path}' '{{}}'")
        a.query("QUEUE RETRIEVE CONCURRENCY 2 'mq:1'")
        a.query("QUEUE ACK 'mq:1' 'done'")
        a.query("QUEUE RETRIEVE CONCURRENCY 2 'mq:2'")
        for key in ("ck:1", "ck:2", "ck:3"):  # the third evicts the least recently used
            a.query(f"CACHE SET '{key}' 'v'")
        with pytest.raises(PgError) as too_big:
            a.query(f"CACHE SET 'ck:4' '{'x' * 100}'")
        assert too_big.value.sqlstate == "54000"

        # a second connection blocked in RESULT_BLOCKING on mq:3
        b = pg(server)
        blocked: list[object] = []
        waiter = threading.Thread(
            target=lambda: blocked.append(b.query("QUEUE RESULT_BLOCKING 30000 'mq:3'")))
        waiter.start()
        wait_for(lambda: metric(scrape(server), "cubequeue_blocked_waiters") == 1,
                 "the RESULT_BLOCKING waiter")

        got = scrape(server)
        assert metric(got, "cubequeue_connections_open", protocol="pg") == 2
        assert metric(got, "cubequeue_connections_open", protocol="ws") == 1
        assert metric(got, "cubequeue_commands_total", command="QUEUE ADD", outcome="ok") == 4
        assert metric(got, "cubequeue_commands_total", command="QUEUE RETRIEVE",
                      outcome="ok") == 2
        assert metric(got, "cubequeue_commands_total", command="QUEUE ACK", outcome="ok") == 1
        assert metric(got, "cubequeue_commands_total", command="CACHE SET", outcome="ok") == 3
        assert metric(got, "cubequeue_commands_total", command="CACHE SET",
                      outcome="54000") == 1
        assert metric(got, "cubequeue_command_duration_seconds_count", command="QUEUE ADD") == 4
        assert metric(got, "cubequeue_queue_pending", prefix="mq") == 1  # mq:3
        assert metric(got, "cubequeue_queue_active", prefix="mq") == 1  # mq:2
        assert metric(got, "cubequeue_queue_pending", prefix="oth") == 1
        assert metric(got, "cubequeue_queue_active", prefix="oth") == 0
        assert metric(got, "cubequeue_queue_items") == 3
        assert metric(got, "cubequeue_queue_prefixes") == 2
        assert metric(got, "cubequeue_queue_results") == 1  # mq:1's
        assert metric(got, "cubequeue_blocked_waiters") == 1
        assert metric(got, "cubequeue_cache_keys") == 2
        assert metric(got, "cubequeue_cache_bytes") > 0
        assert metric(got, "cubequeue_cache_evictions_total") == 1

        # the ACK wakes the waiter; then the gauges follow
        a.query("QUEUE RETRIEVE CONCURRENCY 2 'mq:3'")
        a.query("QUEUE ACK 'mq:3' 'r3'")
        waiter.join(10)
        assert blocked, "RESULT_BLOCKING was not woken by the ACK"
        b.close()
        wait_for(lambda: metric(scrape(server), "cubequeue_connections_open", protocol="pg") == 1,
                 "the closed connection to be counted")
        got = scrape(server)
        assert metric(got, "cubequeue_blocked_waiters") == 0
        assert metric(got, "cubequeue_queue_pending", prefix="mq") == 0
        assert metric(got, "cubequeue_commands_total", command="QUEUE RESULT_BLOCKING",
                      outcome="ok") == 1
    wait_for(lambda: metric(scrape(server), "cubequeue_connections_open", protocol="ws") == 0
             and metric(scrape(server), "cubequeue_connections_open", protocol="pg") == 0,
             "every connection to be counted as closed")


def _json_lines(text: str) -> list[dict[str, Any]]:
    records = []
    for line in text.splitlines():
        assert line.startswith("{"), f"not a JSON log line: {line!r}"
        records.append(json.loads(line))
    return records


def test_json_log_lines(start_server: StartServer) -> None:
    server = start_server("--log-format", "json", "--slow-command-ms", "0",
                          "--cache-max-entry-bytes", "64")
    with pg(server) as client:
        client.query("QUEUE ADD PRIORITY 1 'logs:1' '{}'")
        with pytest.raises(PgError):
            client.query(f"CACHE SET 'logs:big' '{'x' * 100}'")  # over the cap: 54000
    with ws(server):
        pass
    server.stop()
    records = _json_lines(server.log())
    for rec in records:
        assert {"ts", "level", "logger", "msg"} <= set(rec)
        assert rec["logger"].startswith("cubequeue")

    conn = [r for r in records if r["logger"] == "cubequeue.conn"]
    opened = [r for r in conn if r["msg"].startswith("connection opened")]
    closed = [r for r in conn if r["msg"].startswith("connection closed")]
    assert [r["protocol"] for r in opened] == ["pg", "ws"]
    assert [r["protocol"] for r in closed] == ["pg", "ws"]
    for rec in opened + closed:
        assert isinstance(rec["conn_id"], int)
        assert rec["peer"].startswith("127.0.0.1:")
    assert [r["conn_id"] for r in opened] == [r["conn_id"] for r in closed]
    assert len({r["conn_id"] for r in opened}) == 2

    errors = [r for r in records if r.get("sqlstate") == "54000"]
    assert errors and errors[0]["command"] == "CACHE SET", "errors carry their SQLSTATE"
    slow = [r for r in records if r.get("command") == "QUEUE ADD" and "ms" in r]
    assert slow and slow[0]["level"] == "warning", "--slow-command-ms 0 logs every command"


def _healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", "healthcheck", *args],
                          capture_output=True, text=True, timeout=30, env=env or {})


def test_healthcheck_against_the_server(start_server: StartServer) -> None:
    server = start_server()
    proc = _healthcheck("--port", str(server.port))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"healthy: 127.0.0.1:{server.port} answered ")
    # as in the image: no flags, everything from the environment
    proc = _healthcheck(env={"CUBEQUEUE_HOST": "0.0.0.0", "CUBEQUEUE_PORT": str(server.port)})
    assert proc.returncode == 0, proc.stderr
    server.stop()
    proc = _healthcheck("--port", str(server.port))
    assert proc.returncode == 1
    assert proc.stderr.startswith("unhealthy: cannot connect to ")


@pytest.mark.parametrize("auth", ["scram-sha-256", "md5"])
def test_healthcheck_with_auth(start_server: StartServer, tmp_path: Path, auth: str) -> None:
    users = tmp_path / "users"
    users.write_text("# healthcheck user first\nprobe: pr0be:x  # a comment\ncube:other\n")
    server = start_server("--ws-auth", "none", "--auth", auth, "--users-file", str(users))
    env = {"CUBEQUEUE_PORT": str(server.port), "CUBEQUEUE_USERS_FILE": str(users)}
    proc = _healthcheck(env=env)
    assert proc.returncode == 0, proc.stderr
    proc = _healthcheck("--port", str(server.port), "--user", "cube", "--password", "wrong")
    assert proc.returncode == 1
    assert "28P01" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_advance_over_the_mini_client(start_server: StartServer) -> None:
    server = start_server("--test-clock")
    with pg(server) as client:
        before = client.query("SYS CLOCK")[0]
        client.query("SYS CLOCK ADVANCE 120001")
        after = client.query("SYS CLOCK")[0]
    col = before.columns.index("offset_ms")
    assert int(after.rows[0][col] or 0) - int(before.rows[0][col] or 0) == 120001
