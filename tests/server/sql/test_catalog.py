"""The catalog engine on its own: psql 15's captured queries, types, bounds, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.server.pgtypes import oids
from cubequeue.server.sql.catalog import (
    MAX_ROWS,
    CatalogLimit,
    describe_catalog,
    is_catalog_query,
    run_catalog,
)
from cubequeue.server.sql.catalog_functions import format_array, parse_array
from cubequeue.server.sql.errors import UndefinedColumn
from cubequeue.server.sql.session import PlainSession
from cubequeue.storage.system_schemas import SYSTEM_TABLES

_TEXT = (Path(__file__).parent / "psql15_catalog_queries.sql").read_text()
_BODY = "\n".join(line for line in _TEXT.splitlines() if not line.startswith("--"))
QUERIES = [q.strip() for q in _BODY.split(";;;;") if q.strip()]


def session(user: str = "cube", database: str = "cube") -> PlainSession:
    return PlainSession(server_version="15.0", user=user,
                        startup_params={"user": user, "database": database})


@pytest.mark.parametrize("sql", QUERIES, ids=lambda q: " ".join(q.split())[:50])
def test_every_captured_psql_query_runs(sql):
    assert is_catalog_query(sql)
    out = run_catalog(sql, session())
    assert out.result is not None
    assert out.type_oids is not None and len(out.type_oids) == len(out.result.columns)
    assert out.tag == f"SELECT {len(out.result.rows)}"


def test_attributes_carry_the_system_tables_types():
    names = {"STRING": "text", "INT": "bigint", "BOOLEAN": "boolean",
             "TIMESTAMP": "timestamp with time zone"}
    for table, columns in SYSTEM_TABLES.items():
        out = run_catalog(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            f"WHERE c.relname = '{table}' AND a.attnum > 0 ORDER BY a.attnum", session())
        assert out.result is not None
        assert out.result.rows == [(c.name, names[c.type.name], False) for c in columns]
        assert out.type_oids == (oids.TEXT, oids.TEXT, oids.BOOL)


def test_the_session_user_and_database_are_the_catalogs():
    out = run_catalog("SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba) "
                      "FROM pg_catalog.pg_database d", session("alice", "jobs"))
    assert out.result is not None and out.result.rows == [("jobs", "alice")]


def test_information_schema_lists_the_system_tables():
    out = run_catalog("SELECT table_schema, table_name FROM information_schema.tables "
                      "ORDER BY 2", session())
    assert out.result is not None
    assert out.result.rows == [("system", t) for t in sorted(SYSTEM_TABLES)]
    cols = run_catalog("SELECT column_name, data_type FROM information_schema.columns "
                       "WHERE table_name = 'queue_log' ORDER BY ordinal_position", session())
    assert cols.result is not None and cols.result.rows[3] == ("at", "timestamp with time zone")


def test_like_is_case_sensitive_and_escapes_with_backslash():
    def names(pattern: str) -> list[object]:
        out = run_catalog(f"SELECT relname FROM pg_catalog.pg_class WHERE relname LIKE "
                          f"E'{pattern}' ORDER BY 1", session())
        assert out.result is not None
        return [r[0] for r in out.result.rows]

    assert names("queue\\\\_%") == ["queue_log", "queue_prefixes", "queue_results"]
    assert names("QUEUE%") == []
    assert names("queue_") == []


def test_parameters_and_describe():
    sql = "SELECT oid, typname FROM pg_catalog.pg_type WHERE typname = $1"
    desc = describe_catalog(sql, session())
    assert desc.param_count == 1
    assert [c.name for c in desc.columns or ()] == ["oid", "typname"]
    out = run_catalog(sql, session(), ["int8"])
    assert out.result is not None and out.result.rows == [(20, "int8")]


def test_select_star_reads_names_and_types_from_the_catalog():
    out = run_catalog("SELECT * FROM pg_catalog.pg_am", session())
    assert out.result is not None
    assert [c.name for c in out.result.columns] == ["oid", "amname", "amhandler", "amtype"]
    assert out.result.rows == [(2, "heap", "heap_tableam_handler", "t")]


def test_pre_aggregation_schema_queries_are_not_the_catalogs():
    assert not is_catalog_query(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name = "
        "'dev_pre_aggregations'")
    assert not is_catalog_query("SELECT * FROM system.queue")
    assert not is_catalog_query("SELECT 1")


@pytest.mark.parametrize(("sql", "error"), [
    ("SELECT * FROM pg_catalog.pg_stat_activity", FeatureNotSupported),
    ("SELECT pg_catalog.pg_nope(oid) FROM pg_catalog.pg_class", FeatureNotSupported),
    ("SELECT nope FROM pg_catalog.pg_class", UndefinedColumn),
])
def test_what_the_catalog_cannot_answer(sql, error):
    with pytest.raises(error):
        run_catalog(sql, session())


def test_rows_and_work_are_bounded():
    many = ", ".join(["pg_catalog.pg_attribute"] * 3)  # 40³ rows: over MAX_ROWS
    with pytest.raises(CatalogLimit, match=str(MAX_ROWS)):
        run_catalog(f"SELECT 1 FROM {many}", session())
    huge = ", ".join(["pg_catalog.pg_attribute"] * 6)  # counted, never materialised
    with pytest.raises(CatalogLimit, match="steps"):
        run_catalog(f"SELECT count(*) FROM {huge}", session())
    with pytest.raises(CatalogLimit, match="bytes"):
        run_catalog("SELECT 1 FROM pg_catalog.pg_class WHERE " + "true AND " * 10_000 + "true",
                    session())


@settings(deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.characters(codec="utf-8",
                                                                      exclude_characters="\0")))))
def test_array_text_round_trips(items):
    assert parse_array(format_array(list(items))) == items
