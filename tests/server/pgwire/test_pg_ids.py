"""Ids are int8 on the PostgreSQL wire and pass back as ids (docs/dialect.md §8 rules 5, 6).

psycopg reads ``id`` as a Python ``int`` and binds it typed, so the id it just read is an
id in the next statement; node-postgres sends every value untyped (OID 0), and all-digit
text there is an id too. A declared ``text`` parameter stays a path.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.types.string import StrDumper

from cubequeue.grammar.commands import Param, Slot
from cubequeue.server.pgwire.statements import PreparedStatement, dialect_param_oids

NODE_DIR = Path(__file__).resolve().parent / "clients" / "node"
INT8 = 20


def prefix() -> str:
    return "i" + uuid.uuid4().hex[:10]


def kw(server) -> dict:
    return {"host": server.host, "port": server.port, "user": "cube", "dbname": "cube"}


def test_psycopg_passes_the_returned_id_back(server):
    path = f"{prefix()}:k"
    with psycopg.connect(**kw(server), autocommit=True) as c:
        cur = c.execute("QUEUE ADD %s %s", (path, "payload"))
        assert cur.description[0].type_code == INT8
        (qid, added, _pending) = cur.fetchone()
        assert isinstance(qid, int) and added is True
        assert c.execute("QUEUE GET %s", (qid,)).fetchall() == [("payload", None)]
        cur = c.execute("QUEUE RETRIEVE %s", (path,))
        assert cur.description[4].type_code == INT8
        assert cur.fetchone()[4] == qid
        assert c.execute("QUEUE ACK %s %s", (qid, "r")).fetchone() == (True,)
        cur = c.execute("QUEUE RESULT %s", (qid,))
        assert cur.description[2].type_code == INT8
        assert cur.fetchall() == [("r", "success", qid, None)]


def test_psycopg_queue_id_columns_are_int8(server):
    p = prefix()
    with psycopg.connect(**kw(server), autocommit=True) as c:
        (qid, _added, _pending) = c.execute("QUEUE ADD %s %s", (f"{p}:a", "x")).fetchone()
        for stmt in ("QUEUE LIST %s", "QUEUE PENDING %s", "QUEUE ACTIVE %s"):
            cur = c.execute(stmt, (p,))
            assert [d.name for d in cur.description][:2] == ["id", "queue_id"]
            assert cur.description[1].type_code == INT8
        assert c.execute("QUEUE PENDING %s", (p,)).fetchall() == [("a", qid, "pending", None)]
        cur = c.execute("QUEUE ORPHANED 0 %s", (p,))
        assert cur.description[1].type_code == INT8
        row = c.execute("QUEUE ADD_AND_RETRIEVE %s %s %s", (f"{p}:b", "y", 5)).fetchone()
        assert isinstance(row[0], int) and row[0] > qid
        # binary results carry the id as an 8-byte integer
        assert c.cursor(binary=True).execute("QUEUE GET %s", (qid,)).fetchone() == ("x", None)
        bcur = c.cursor(binary=True)
        assert bcur.execute("QUEUE LIST %s", (p,)).fetchall()[0][1] == qid


def test_declared_text_stays_a_path(server):
    p = prefix()
    with psycopg.connect(**kw(server), autocommit=True) as c:
        (qid, _added, _pending) = c.execute("QUEUE ADD %s %s", (f"{p}:1", "x")).fetchone()
        # the id cast to text is a path ("<id>" has no prefix): nothing found
        assert c.execute("QUEUE GET %s::text", (str(qid),)).fetchall() == []
        # untyped (psycopg sends str as unknown, OID 0) and all digits: an id
        assert c.execute("QUEUE GET %s", (str(qid),)).fetchall() == [("x", None)]
        # a quoted literal stays a path
        assert c.execute(f"QUEUE GET '{qid}'").fetchall() == []
        # not all digits: a path
        assert c.execute("QUEUE GET %s", (f"{p}:1",)).fetchall() == [("x", None)]
    with psycopg.connect(**kw(server), autocommit=True) as c:
        c.adapters.register_dumper(str, StrDumper)  # str declared as text (OID 25) in Parse
        assert c.execute("QUEUE GET %s", (str(qid),)).fetchall() == []
        assert c.execute("QUEUE GET %s", (f"{p}:1",)).fetchall() == [("x", None)]


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node/npm missing"
)
def test_node_postgres_number_is_an_id(server):
    if not (NODE_DIR / "node_modules" / "pg").is_dir():
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=300
        )
    out = subprocess.run(
        ["node", "ids.js", server.host, str(server.port), prefix()],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "OK"


def test_result_by_path_is_read_once_by_id_many_times(server):
    path = f"{prefix()}:r"
    with psycopg.connect(**kw(server), autocommit=True) as c:
        (qid, _added, _pending) = c.execute("QUEUE ADD %s %s", (path, "x")).fetchone()
        c.execute("QUEUE RETRIEVE %s", (path,))
        assert c.execute("QUEUE ACK %s %s", (qid, "done")).fetchone() == (True,)
        table = "SELECT deleted FROM system.queue_results WHERE id = %s"
        assert c.execute(table, (qid,)).fetchall() == [(False,)]
        row = ("done", "success", qid, None)
        assert c.execute("QUEUE RESULT %s", (path,)).fetchall() == [row]
        assert c.execute("QUEUE RESULT %s", (path,)).fetchall() == []  # consumed by path
        assert c.execute(table, (qid,)).fetchall() == [(True,)]
        for _ in range(3):  # by id: the same row every time
            assert c.execute("QUEUE RESULT %s", (qid,)).fetchall() == [row]


def _load(declared: tuple[int, ...], cast: str | None, raw: bytes):
    oids = dialect_param_oids([Param(1, Slot.KEY, cast)], declared)
    return PreparedStatement("", "QUEUE GET $1", "dialect", oids, None).loader(())((raw,))[0]


@settings(deadline=None)
@given(st.text())
def test_only_untyped_all_digit_key_text_becomes_an_id(text):
    raw = text.encode()
    untyped = _load((), None, raw)
    if text.isascii() and text.isdigit():
        assert untyped == int(text)
    else:
        assert untyped == text
    assert _load((25,), None, raw) == text  # declared text: a path, whatever its text
    assert _load((), "text", raw) == text  # cast to text: a path
