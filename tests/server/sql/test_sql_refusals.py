"""What Cube sends a pre-aggregation store is refused by what it asks for, with a hint."""

from __future__ import annotations

import pytest

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.refusals import PREAGGREGATION_HINT, refuse_statement
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

PLAN_LEVEL = [  # refused inside the plain-SQL SELECT path (server/sql/select.py)
    "SELECT `orders__count` FROM dev_pre_aggregations.orders_main_abcd1234_efgh5678_ijkl9012",
    'SELECT "orders__count" FROM prod_pre_aggregations.orders_main LIMIT 10',
    "SELECT table_name, build_range_end FROM information_schema.tables "
    "WHERE table_schema = 'dev_pre_aggregations'",
    "SELECT schema_name FROM information_schema.schemata WHERE schema_name = 'dev_pre_aggregations'",
    "SELECT table_name FROM information_schema.tables WHERE table_schema IN ('my_preaggs')",
]
STATEMENTS = [
    "CREATE SCHEMA IF NOT EXISTS dev_pre_aggregations",
    "CREATE TABLE dev_pre_aggregations.orders_main (count bigint) LOCATION 'x.csv'",
    "  -- leading comment\n  drop table dev_pre_aggregations.orders_main",
    "INSERT INTO dev_pre_aggregations.orders_main (count) VALUES (1)",
    "SHOW SCHEMAS",
    "CREATE INDEX i ON dev_pre_aggregations.t (a)",
]


@pytest.mark.parametrize("sql", PLAN_LEVEL)
def test_preaggregation_reads_are_refused_with_the_hint(sql: str) -> None:
    with pytest.raises(FeatureNotSupported) as e:
        run_plain(sql, PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(0)))
    assert e.value.sqlstate == "0A000"
    assert "pre-aggregation" in e.value.message
    assert e.value.hint == PREAGGREGATION_HINT
    assert "source database" in PREAGGREGATION_HINT


@pytest.mark.parametrize("sql", STATEMENTS)
def test_preaggregation_statements_are_classified(sql: str) -> None:
    refused = refuse_statement(sql)
    assert refused is not None and refused.sqlstate == "0A000"
    assert refused.hint == PREAGGREGATION_HINT


@pytest.mark.parametrize("sql", [
    "SELECT 1", "SHOW server_version", "CREATE TYPE x AS ENUM ('a')", "QUEUE TRUNCATE",
])
def test_other_statements_are_left_alone(sql: str) -> None:
    assert refuse_statement(sql) is None


@pytest.mark.parametrize("sql", [
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'system'",
    "SELECT column_name FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog')",
    "SELECT count(*) FROM system.queue",
])
def test_catalog_queries_about_our_own_schemas_are_not_refused_as_preaggregations(sql: str) -> None:
    try:
        run_plain(sql, PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(0)))
    except FeatureNotSupported as e:  # information_schema may not be served (yet)
        assert e.hint != PREAGGREGATION_HINT
