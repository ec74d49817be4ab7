"""Every statement is counted and logged once, on both wires, with real clients: a
refused one shows in ``/metrics`` with its SQLSTATE and in the log at WARNING, a
successful one at DEBUG with its duration, and a failed login names user and peer.
Pre-aggregation statements are refused by what they ask for, with the setup hint, while
the session statements that share their first word keep working."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from typing import Any

import psycopg
import pytest
from wsclient import WsClient, rows

from cubequeue.server.cubews.messages import HttpError
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql.refusals import PREAGGREGATION_HINT

_JSON_DEBUG = ("--log-format", "json", "--log-level", "debug")


def _count(server: CubequeueServer, command: str, outcome: str) -> float:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    pattern = (rf'^cubequeue_commands_total\{{command="{re.escape(command)}",'
               rf'outcome="{re.escape(outcome)}"\}} (\S+)$')
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def _lines(server: CubequeueServer, logger: str) -> list[dict[str, Any]]:
    return [record for line in server.log().splitlines() if line.startswith("{")
            if (record := json.loads(line)).get("logger") == logger]


def _ws(server: CubequeueServer, sql: str, params: list[Any] | None = None) -> Any:
    async def main() -> Any:
        async with WsClient(server.ws_url) as client:
            return await client.query(sql, params)

    return asyncio.run(main())


@pytest.mark.cubequeue_args(*_JSON_DEBUG)
def test_a_refused_statement_over_the_websocket_is_counted_and_a_warning(
        cubequeue_server: CubequeueServer) -> None:
    answer = _ws(cubequeue_server, "CREATE SCHEMA IF NOT EXISTS dev_pre_aggregations")
    assert isinstance(answer, HttpError)
    assert answer.error.startswith("cubequeue does not support pre-aggregation schemas")
    assert _count(cubequeue_server, "CREATE", "0A000") == 1
    (line,) = [r for r in _lines(cubequeue_server, "cubequeue.statement")
               if r["level"] == "warning"]
    assert (line["protocol"], line["command"], line["sqlstate"]) == ("ws", "CREATE", "0A000")
    assert "CREATE SCHEMA IF NOT EXISTS dev_pre_aggregations" in line["msg"]
    assert line["peer"].startswith("127.0.0.1:")  # the WebSocket names its peer too


@pytest.mark.cubequeue_args(*_JSON_DEBUG)
def test_a_refused_statement_over_psycopg_is_counted_and_a_warning(
        cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            conn.execute("SHOW SCHEMAS")
        assert refused.value.diag.message_hint == PREAGGREGATION_HINT
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("SELECT * FROM a JOIN b ON true")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    assert _count(cubequeue_server, "SHOW", "0A000") == 1
    assert _count(cubequeue_server, "SELECT", "0A000") == 1
    assert _count(cubequeue_server, "SELECT", "ok") >= 1
    warnings = [r for r in _lines(cubequeue_server, "cubequeue.statement")
                if r["level"] == "warning"]
    assert [(r["command"], r["sqlstate"], r["protocol"]) for r in warnings] == [
        ("SHOW", "0A000", "pg"), ("SELECT", "0A000", "pg")]
    assert warnings[0]["user"] == "cube" and warnings[0]["peer"].startswith("127.0.0.1:")
    # the statement lines carry the connection log's id
    opened = [r for r in _lines(cubequeue_server, "cubequeue.conn")
              if "opened" in r["msg"] and r.get("protocol") == "pg"]
    assert {w["conn_id"] for w in warnings} <= {r["conn_id"] for r in opened}
    assert all(isinstance(w["conn_id"], int) for w in warnings)
    assert "SHOW SCHEMAS" in warnings[0]["msg"]


@pytest.mark.cubequeue_args(*_JSON_DEBUG)
def test_debug_shows_each_statement_with_its_duration_once(
        cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        conn.execute("QUEUE ADD PRIORITY 1 'acct:a' '{}'")
        conn.execute("SELECT count(*) FROM system.queue WHERE prefix = %s", ["acct"])
    _ws(cubequeue_server, "CACHE GET 'acct:k'")
    debug = [r for r in _lines(cubequeue_server, "cubequeue.statement")
             if r["level"] == "debug"]
    seen = [(r["protocol"], r["command"]) for r in debug]
    assert seen.count(("pg", "QUEUE ADD")) == 1
    assert seen.count(("pg", "SELECT")) == 1
    assert seen.count(("ws", "CACHE GET")) == 1
    for record in debug:
        assert record["sqlstate"] == "00000"
        assert isinstance(record["ms"], int | float) and record["ms"] >= 0
        assert " ok in " in record["msg"] and " ms: " in record["msg"]
    assert _count(cubequeue_server, "QUEUE ADD", "ok") == 1


@pytest.mark.cubequeue_args("--auth", "scram-sha-256", "--password", "right",
                            "--ws-auth", "none", "--log-format", "json")
def test_a_wrong_password_is_logged_with_user_and_peer(
        cubequeue_server: CubequeueServer) -> None:
    dsn = (f"host={cubequeue_server.host} port={cubequeue_server.port} user=alice "
           "password=wrong dbname=cube")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn, connect_timeout=30)
    with psycopg.connect(dsn.replace("wrong", "right"), autocommit=True) as conn:
        conn.execute("SELECT 1")  # everything before this answer is logged
    (line,) = _lines(cubequeue_server, "cubequeue.auth")
    assert line["user"] == "alice"
    assert re.fullmatch(r"127\.0\.0\.1:\d+", line["peer"])
    assert f"from {line['peer']}" in line["msg"]


@pytest.mark.parametrize("sql", ["SHOW SCHEMAS", "CREATE SCHEMA x"])
def test_preaggregation_statements_are_0a000_with_the_hint_over_both_wires(
        cubequeue_server: CubequeueServer, sql: str) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            conn.execute(sql)
        assert refused.value.diag.message_hint == PREAGGREGATION_HINT
        assert refused.value.diag.message_primary.startswith("cubequeue does not support pre-aggregation")
    answer = _ws(cubequeue_server, sql)
    assert isinstance(answer, HttpError)
    assert answer.error.startswith("cubequeue does not support pre-aggregation")
    assert answer.error.endswith(PREAGGREGATION_HINT)  # HttpError has no hint field


def test_show_all_and_show_timezone_still_work_over_both_wires(
        cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        zone = conn.execute("SHOW TimeZone").fetchone()
        names = {row[0] for row in conn.execute("SHOW ALL").fetchall()}
        assert "TimeZone" in names
    assert zone is not None and "UTC" in zone[0]
    assert [tuple(r.values()) for r in rows(_ws(cubequeue_server, "SHOW TimeZone"))] == [zone]
    assert len(rows(_ws(cubequeue_server, "SHOW ALL"))) > 1


def test_websocket_parameters_reach_plain_sql_as_text(
        cubequeue_server: CubequeueServer) -> None:
    answer = _ws(cubequeue_server, "SELECT CAST(? as TIMESTAMP) AS t",
                 ["2024-01-02T03:04:05.000Z"])
    assert not isinstance(answer, HttpError), answer
    (row,) = rows(answer)
    assert str(row["t"]).startswith("2024-01-02")
