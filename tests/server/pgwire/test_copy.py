"""COPY (SELECT …) TO STDOUT over the real server: psql's \\copy and psycopg's copy()."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import uuid

import psycopg
import pytest

needs_psql = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def psql(server, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-d", "cube",
           *args]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def prefix(server) -> str:
    p = "c" + uuid.uuid4().hex[:10]
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"QUEUE ADD PRIORITY 3 '{p}:a' $$" + '{"x":"a,b"}$$')
        conn.execute(f"QUEUE ADD '{p}:b' E'line1\\nline2\\ttab\\\\'")
    return p


def test_psql_backslash_copy_text(server, prefix):
    out = psql(server, "-c", rf"\copy (SELECT id, priority, value, exclusive, external_id "
                             rf"FROM system.queue WHERE prefix = '{prefix}' ORDER BY queue_id) "
                             "TO STDOUT")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ('a\t3\t{"x":"a,b"}\tf\t\\N\n'
                          "b\t0\tline1\\nline2\\ttab\\\\\tf\t\\N\n")


def test_psql_copy_csv_header_to_file(server, prefix, tmp_path):
    target = tmp_path / "queue.csv"
    out = psql(server, "-c", rf"\copy (SELECT id, value FROM system.queue WHERE prefix = "
                             rf"'{prefix}' ORDER BY 1) TO '{target}' WITH (FORMAT csv, HEADER)")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "COPY 2\n"
    rows = list(csv.reader(io.StringIO(target.read_text())))
    assert rows == [["id", "value"], ["a", '{"x":"a,b"}'], ["b", "line1\nline2\ttab\\"]]


@needs_psql
def test_copy_command_csv_via_psql(server, prefix):
    out = psql(server, "-c", f"COPY (SELECT id, priority FROM system.queue WHERE prefix = "
                             f"'{prefix}' ORDER BY 1) TO STDOUT (FORMAT csv, HEADER)")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "id,priority\na,3\nb,0\n"


def test_psycopg_copy_rows_and_rowcount(server, prefix):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        cur = conn.cursor()
        sql = (f"COPY (SELECT id, priority, exclusive FROM system.queue WHERE prefix = "
               f"'{prefix}' ORDER BY 1) TO STDOUT WITH (FORMAT csv)")
        with cur.copy(sql) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        assert data == b"a,3,f\nb,0,f\n"
        assert cur.rowcount == 2
        with cur.copy(f"COPY (SELECT id, value FROM system.queue WHERE prefix = '{prefix}' "
                      "ORDER BY 1) TO STDOUT") as copy:
            assert list(copy.rows()) == [("a", '{"x":"a,b"}'), ("b", "line1\nline2\ttab\\")]
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_copy_of_the_catalog(server):
    with psycopg.connect(server.dsn, autocommit=True) as conn, conn.cursor().copy(
        "COPY (SELECT relname FROM pg_catalog.pg_class ORDER BY 1) TO STDOUT"
    ) as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    assert data == b"cache\nqueue\nqueue_log\nqueue_prefixes\nqueue_results\n"


@pytest.mark.parametrize(("sql", "words"), [
    ("COPY t FROM STDIN", "COPY t FROM"),
    ("COPY (SELECT 1) TO '/tmp/x'", "server file"),
    ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", "binary"),
])
def test_other_copy_forms_are_0a000_with_a_hint(server, sql, words):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute(sql)
        assert words in str(info.value)
        assert "COPY (SELECT" in (info.value.diag.message_hint or "")
        assert conn.execute("SELECT 1").fetchone() == (1,)
