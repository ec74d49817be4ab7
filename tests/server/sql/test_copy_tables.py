"""COPY of a system table (issue 27): ``\\copy system.queue TO 'q.csv' CSV HEADER`` and a
column list, served as COPY of ``SELECT *`` (or the columns) of the table, within the
same bounds as any SELECT."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import uuid

import psycopg
import pytest

from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql.copy import CopyOptions, parse_copy
from cubequeue.server.sql.errors import DuplicateColumn, UndefinedTable
from cubequeue.storage.system_schemas import SYSTEM_TABLES

needs_psql = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
QUEUE_COLUMNS = [c.name for c in SYSTEM_TABLES["queue"]]


@pytest.mark.parametrize(("sql", "query", "opts"), [
    # what psql 15 sends for \copy system.queue TO 'q.csv' CSV HEADER (captured)
    ("COPY  system.queue TO STDOUT CSV HEADER", 'SELECT * FROM "system"."queue"',
     CopyOptions("csv", True, ",", "", '"', '"')),
    # … and for \copy system.queue (id, status) TO STDOUT
    ("COPY  system.queue ( id, status ) TO STDOUT ", 'SELECT "id", "status" FROM "system"."queue"',
     CopyOptions()),
    ("COPY queue TO STDOUT", 'SELECT * FROM "system"."queue"', CopyOptions()),
    ('COPY "system"."cache" ("Value") TO STDOUT WITH (FORMAT csv)',
     'SELECT "Value" FROM "system"."cache"', CopyOptions("csv", False, ",", "", '"', '"')),
])
def test_a_table_is_copied_as_its_select(sql: str, query: str, opts: CopyOptions) -> None:
    request = parse_copy(sql)
    assert (request.query, request.options) == (query, opts)


@pytest.mark.parametrize(("sql", "error"), [
    ("COPY system.queue (id, id) TO STDOUT", DuplicateColumn),
    ("COPY system.queue () TO STDOUT", SqlSyntaxError),
    ("COPY system.queue (id,) TO STDOUT", SqlSyntaxError),
    ("COPY system.queue (id status) TO STDOUT", SqlSyntaxError),
    ("COPY nope TO STDOUT", UndefinedTable),
])
def test_bad_table_copies(sql: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_copy(sql)


def psql(server: CubequeueServer, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-d", "cube",
           *args]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def prefix(server: CubequeueServer) -> str:
    p = "t" + uuid.uuid4().hex[:10]
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"QUEUE ADD PRIORITY 2 '{p}:a' $$" + '{"sql":"SELECT 1, 2"}$$')
        conn.execute(f"QUEUE ADD '{p}:b' 'two'")
    return p


@needs_psql
def test_psql_copies_system_queue_to_a_csv_file(server: CubequeueServer, prefix: str,
                                                tmp_path) -> None:
    target = tmp_path / "q.csv"
    out = psql(server, "-c", f"\\copy system.queue TO '{target}' CSV HEADER")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert out.stdout == f"COPY {len(rows)}\n"
    assert list(rows[0]) == QUEUE_COLUMNS
    mine = {r["id"]: r for r in rows if r["prefix"] == prefix}
    assert mine["a"]["value"] == '{"sql":"SELECT 1, 2"}' and mine["a"]["priority"] == "2"
    assert mine["b"]["value"] == "two" and mine["b"]["status"] == "pending"


@needs_psql
def test_psql_copies_a_column_list(server: CubequeueServer, prefix: str) -> None:
    out = psql(server, "-c", "\\copy system.queue (id, prefix, status) TO STDOUT")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if f"\t{prefix}\t" in line]
    assert sorted(lines) == [f"a\t{prefix}\tpending", f"b\t{prefix}\tpending"]


def test_psycopg_copies_a_table_and_errors_name_the_table(server: CubequeueServer,
                                                          prefix: str) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        cur = conn.cursor()
        with cur.copy("COPY system.queue (id, priority, prefix) TO STDOUT (FORMAT csv, HEADER)") \
                as copy:
            data = b"".join(bytes(chunk) for chunk in copy).decode()
        lines = data.splitlines()
        assert lines[0] == "id,priority,prefix"
        assert f"a,2,{prefix}" in lines and f"b,0,{prefix}" in lines
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("COPY system.nope TO STDOUT")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("COPY system.queue (nope) TO STDOUT")
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_copy_of_a_table_keeps_max_sql_rows(start_server) -> None:
    server = start_server("--max-sql-rows", "2")
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for key in "abc":
            conn.execute(f"QUEUE ADD 'm:{key}' 'v'")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as e:
            conn.execute("COPY system.queue TO STDOUT")
        assert "--max-sql-rows" in str(e.value)
        with conn.cursor().copy("COPY system.queue_prefixes (prefix, pending) TO STDOUT") as copy:
            assert b"".join(bytes(chunk) for chunk in copy) == b"m\t3\n"
