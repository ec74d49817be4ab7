"""docs/monitoring: the alert rules pass ``promtool check rules`` and their own
``promtool test rules``, and every metric the rules and the Grafana dashboard query is one
the server serves (read from live servers' ``/metrics``: in memory, durable, and over a real
PostgreSQL for the pool's families)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cubequeue.server.metrics import Metrics
from cubequeue.server.pytest_plugin import start_cubequeue
from cubequeue.storage.capabilities import PoolHealth
from cubequeue.storage.stats import StoreStats

MONITORING = Path(__file__).resolve().parents[3] / "docs" / "monitoring"
RULES = MONITORING / "cubequeue-alerts.yml"
RULE_TESTS = MONITORING / "cubequeue-alerts.test.yml"
DASHBOARD = MONITORING / "cubequeue-dashboard.json"

_PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    _PROMTOOL is None, reason="promtool is not installed (make system-deps installs it)")

#: PromQL words that are not metric names
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right",
                       "bool", "and", "or", "unless", "offset", "inf", "nan"})


def promql_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (enough PromQL for our files: label
    matchers, ranges, grouping clauses, strings and Grafana's ``$variables`` removed, the
    identifiers left that are not functions or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group()
        if text[match.end():].lstrip().startswith("(") or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def test_promql_metrics_reads_names_only() -> None:
    assert promql_metrics('histogram_quantile(0.99, sum by (command, le) (rate('
                          'x_bucket{a=~"$job", b!="ok"}[$__rate_interval])))') == {"x_bucket"}
    assert promql_metrics("max by (p) (a) > 0 unless on (job) sum(increase(b[5m])) > 0"
                          ) == {"a", "b"}
    assert promql_metrics("time() - max(c > 0)") == {"c"}


def rule_exprs() -> Iterator[str]:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def dashboard_exprs() -> Iterator[str]:
    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                yield node["expr"]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    dashboard = json.loads(DASHBOARD.read_text())
    yield from walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        query = variable.get("definition", "")
        if query.startswith("label_values("):
            yield query.removeprefix("label_values(").rsplit(",", 1)[0]


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    assert _PROMTOOL is not None
    check = subprocess.run([_PROMTOOL, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    tested = subprocess.run([_PROMTOOL, "test", "rules", RULE_TESTS.name], cwd=MONITORING,
                            capture_output=True, text=True, timeout=120)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _served_names(body: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(body) for s in family.samples}


def _scrape(http_url: str) -> str:
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=30) as resp:
        body: bytes = resp.read()
    return body.decode()


class _PoolStore:
    def stats(self) -> StoreStats:
        return StoreStats()

    def pool_health(self) -> PoolHealth:
        return PoolHealth(open=1, in_use=0, max_size=10, reachable=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The sample names each mode serves."""
    out = {}
    data_dir = tmp_path_factory.mktemp("durable")
    for mode, args in (("memory", ()), ("durable", ("--data-dir", str(data_dir)))):
        server = start_cubequeue(*args)
        try:
            server.query("QUEUE ADD PRIORITY 1 'q:1' '{}'")
            out[mode] = _served_names(_scrape(server.http_url))
        finally:
            server.stop()
    body, _ = Metrics(_PoolStore()).render_for("", "")
    out["postgresql"] = {n for n in _served_names(body.decode()) if n.startswith("cubequeue_store_")}
    return out


def test_every_metric_the_rules_and_dashboard_query_is_served(
        served: dict[str, set[str]]) -> None:
    everywhere = set().union(*served.values())
    queried = {name for expr in (*rule_exprs(), *dashboard_exprs())
               for name in promql_metrics(expr)}
    assert queried, "no expression found"
    assert not queried - everywhere, f"queried but never served: {queried - everywhere}"
    # the store-independent families are served by every mode, the durable ones in durable
    # mode, the pool's with the PostgreSQL store
    for name in queried:
        if name.startswith(("cubequeue_log_", "cubequeue_persist_", "cubequeue_snapshot")):
            assert name in served["durable"], name
        elif name.startswith("cubequeue_store_"):
            assert name in served["postgresql"], name
        else:
            assert name in served["memory"] and name in served["durable"], name
    # the rules cover what issue 27 asks an operator to be warned of
    alerted = {name for expr in rule_exprs() for name in promql_metrics(expr)}
    assert {"cubequeue_queue_pending", "cubequeue_queue_oldest_pending_age_seconds",
            "cubequeue_queue_stalled", "cubequeue_log_stopped", "cubequeue_store_reachable",
            "cubequeue_connections_refused_total"} <= alerted


def test_the_pool_families_are_served_over_a_real_postgresql() -> None:
    """The queries on cubequeue_store_* against a front end over a real PostgreSQL (Debian's,
    in a temporary directory), where the unit fixture above only had a store that reports a
    pool."""
    from pgcluster import find_bin, start_cluster
    from pgstore_servers import front_ends

    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs it)")
    cluster = start_cluster()
    try:
        dsn = cluster.create_database("monitoring")
        with front_ends(dsn, 1) as (server,):
            server.query("QUEUE ADD PRIORITY 1 'q:1' '{}'")
            deadline = time.monotonic() + 30
            # the database's counts are a sample taken after the first scrape asks
            while "cubequeue_queue_pending" not in (names := _served_names(
                    _scrape(server.http_url))) and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        cluster.stop()
    queried = {name for expr in (*rule_exprs(), *dashboard_exprs())
               for name in promql_metrics(expr) if name.startswith("cubequeue_store_")}
    assert queried and queried <= names, queried - names
    assert "cubequeue_queue_pending" in names
