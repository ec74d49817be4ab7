"""Python drivers against the real server: psycopg 3, asyncpg and pg8000.

Every driver runs Cube's two QueryQueue flows: the normal path (RESULT, ADD, LIST,
RETRIEVE EXTENDED CONCURRENCY, MERGE_EXTRA, HEARTBEAT, ACK, with RESULT_BLOCKING woken
from a second connection) and the fast track (ADD_AND_RETRIEVE, ACK, RESULT_BLOCKING).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import asyncpg
import pg8000.native
import psycopg
import pytest
from psycopg import pq

TIMEOUT_MS = 60_000


def prefix() -> str:
    return "d" + uuid.uuid4().hex[:10]


def kw(server) -> dict:
    return {"host": server.host, "port": server.port, "user": "cube", "dbname": "cube"}


class Blocked(threading.Thread):
    """RESULT_BLOCKING on its own connection, in a thread."""

    def __init__(self, fn) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc

    def get(self):
        self.join(60)
        assert not self.is_alive(), "RESULT_BLOCKING never returned"
        if self.error:
            raise self.error
        return self.result


# --- psycopg 3 -------------------------------------------------------------------------


def test_psycopg_normal_path(server):
    p = prefix()
    path = f"{p}:q1"
    with psycopg.connect(**kw(server), autocommit=True) as c:
        assert c.execute("QUEUE RESULT %s", (path,)).fetchall() == []
        row = c.execute("QUEUE ADD PRIORITY %s %s %s", (1, path, '{"q":1}')).fetchone()
        qid, added, pending = row
        assert added is True and pending == 1 and int(qid) > 0
        assert c.execute("QUEUE LIST %s", (p,)).fetchall() == [("q1", qid, "pending", None)]

        def wait():
            with psycopg.connect(**kw(server), autocommit=True) as w:
                return w.execute("QUEUE RESULT_BLOCKING %s %s", (TIMEOUT_MS, path)).fetchall()

        blocked = Blocked(wait)
        blocked.start()
        payload, extra, pending, active, rid = c.execute(
            "QUEUE RETRIEVE EXTENDED CONCURRENCY %s %s", (2, path)
        ).fetchone()
        assert (payload, extra, pending, active, rid) == ('{"q":1}', None, 0, "q1", qid)
        # the key as an id: psycopg binds a Python int as int2 → an id (§8 rule 5)
        c.execute("QUEUE MERGE_EXTRA %s %s", (int(qid), '{"stage":"running"}'))
        assert c.execute("QUEUE GET %s", (int(qid),)).fetchone()[1] == '{"stage":"running"}'
        c.execute("QUEUE HEARTBEAT %s", (path,))
        assert c.execute("QUEUE ACK %s %s", (path, "the result")).fetchone() == (True,)
        assert blocked.get() == [("the result", "success", qid, None)]


def test_psycopg_fast_track(server):
    path = f"{prefix()}:fast"
    with psycopg.connect(**kw(server), autocommit=True) as c:
        qid, added, pending, active, payload, extra = c.execute(
            "QUEUE ADD_AND_RETRIEVE PRIORITY %s %s %s %s", (0, path, "payload", 1)
        ).fetchone()
        assert added is True and payload == "payload" and active == "fast"
        assert pending == 0 and extra is None
        assert c.execute("QUEUE ACK %s %s", (path, "done")).fetchone() == (True,)
        rows = c.execute("QUEUE RESULT_BLOCKING %s %s", (TIMEOUT_MS, path)).fetchall()
        assert rows == [("done", "success", qid, None)]


def test_psycopg_binary_results_and_prepared(server):
    p = prefix()
    with psycopg.connect(**kw(server), autocommit=True) as c:
        cur = c.cursor(binary=True)
        row = cur.execute("QUEUE ADD PRIORITY %s %s %s", (5, f"{p}:b", "x")).fetchone()
        assert row[1] is True and row[2] == 1
        assert cur.pgresult.fformat(0) == pq.Format.BINARY
        for _ in range(8):  # past prepare_threshold (5): a named statement is used
            assert c.execute("QUEUE GET %s", (f"{p}:b",)).fetchone() == ("x", None)
        assert c._prepared._names  # psycopg holds the server-side name
        row = c.execute("SELECT * FROM system.queue WHERE prefix = %s", (p,), binary=True)
        assert row.fetchone()[0] == "b"


def test_psycopg_pipeline_of_1000_adds(server):
    p = prefix()
    with psycopg.connect(**kw(server), autocommit=True) as c:
        with c.pipeline():
            cursors = [
                c.execute("QUEUE ADD PRIORITY %s %s %s", (i % 3, f"{p}:{i}", "x"))
                for i in range(1000)
            ]
        added = [cur.fetchone()[1] for cur in cursors]
        assert added == [True] * 1000
        assert len(c.execute("QUEUE PENDING %s", (p,)).fetchall()) == 1000


def test_psycopg_default_transactions(server):
    p = prefix()
    with psycopg.connect(**kw(server)) as c:  # autocommit=False: BEGIN / COMMIT
        c.execute("QUEUE ADD %s %s", (f"{p}:t", "x"))
        assert c.info.transaction_status == pq.TransactionStatus.INTRANS
        c.commit()
        assert c.info.transaction_status == pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.SyntaxError):
            c.execute("QUEUE NOPE")
        assert c.info.transaction_status == pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("QUEUE LIST %s", (p,))
        c.rollback()
        # the queue is not transactional: the ADD stayed
        assert len(c.execute("QUEUE LIST %s", (p,)).fetchall()) == 1
        c.rollback()


def test_psycopg_cancel_of_result_blocking(server):
    with psycopg.connect(**kw(server), autocommit=True) as c:
        timer = threading.Timer(0.5, c.cancel_safe)
        timer.start()
        with pytest.raises(psycopg.errors.QueryCanceled, match="canceling statement"):
            c.execute("QUEUE RESULT_BLOCKING %s %s", (TIMEOUT_MS, f"{prefix()}:never"))
        timer.join()
        assert c.execute("SELECT 1").fetchone() == (1,)


# --- asyncpg ---------------------------------------------------------------------------


def dsn(server) -> str:
    return f"postgresql://cube@{server.host}:{server.port}/cube"


async def _asyncpg_normal_path(server):
    p = prefix()
    path = f"{p}:q"
    c = await asyncpg.connect(dsn(server))
    w = await asyncpg.connect(dsn(server))
    try:
        assert await c.fetch("QUEUE RESULT $1", path) == []
        row = await c.fetchrow("QUEUE ADD PRIORITY $1 $2 $3", 1, path, '{"a":1}')
        assert row["added"] is True and row["pending"] == 1
        qid = row["id"]
        rows = await c.fetch("QUEUE LIST $1", p)
        assert [tuple(r) for r in rows] == [("q", qid, "pending", None)]
        blocked = asyncio.ensure_future(w.fetch("QUEUE RESULT_BLOCKING $1 $2", TIMEOUT_MS, path))
        got = await c.fetchrow("QUEUE RETRIEVE EXTENDED CONCURRENCY $1 $2", 2, path)
        assert got["payload"] == '{"a":1}' and got["id"] == qid and got["active"] == "q"
        await c.execute("QUEUE MERGE_EXTRA 'x' '{}'")  # a missing key: simple Query, no rows
        await c.fetch("QUEUE MERGE_EXTRA $1::int8 $2", int(qid), '{"n":2}')
        assert await c.fetchval("QUEUE GET $1", path) is not None
        await c.fetch("QUEUE HEARTBEAT $1", path)
        assert await c.fetchval("QUEUE ACK $1 $2", path, "res") is True
        rows = await asyncio.wait_for(blocked, 60)
        assert [tuple(r) for r in rows] == [("res", "success", qid, None)]
        # fast track
        fast = f"{p}:fast"
        row = await c.fetchrow("QUEUE ADD_AND_RETRIEVE $1 $2 $3", fast, "pl", 5)
        assert row["payload"] == "pl" and row["added"] is True
        assert await c.fetchval("QUEUE ACK $1 $2", fast, "ok") is True
        row = await c.fetchrow("QUEUE RESULT_BLOCKING $1 $2", TIMEOUT_MS, fast)
        assert row["payload"] == "ok" and row["type"] == "success"
        # executemany with $n
        await c.executemany(
            "QUEUE ADD PRIORITY $1 $2 $3", [(i, f"{p}:m{i}", "x") for i in range(20)]
        )
        assert len(await c.fetch("QUEUE PENDING $1", p)) == 20
        # system table with typed columns
        created = await c.fetchval("SELECT created FROM system.queue WHERE id = $1", "m0")
        assert created.tzinfo is not None
    finally:
        await c.close()
        await w.close()


def test_asyncpg_flows(server):
    asyncio.run(_asyncpg_normal_path(server))


async def _asyncpg_pool_and_timeout(server):
    pool = await asyncpg.create_pool(dsn(server), min_size=1, max_size=1)
    try:
        for i in range(3):  # the one connection is released (reset query) and reused
            async with pool.acquire() as c:
                assert await c.fetchval("QUEUE ADD $1 $2", f"{prefix()}:{i}", "x") is not None
        async with pool.acquire() as c:
            with pytest.raises(asyncio.TimeoutError):
                await c.fetch("QUEUE RESULT_BLOCKING $1 $2", TIMEOUT_MS, "never:x", timeout=0.5)
            assert await c.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


def test_asyncpg_pool_release_and_timeout(server):
    asyncio.run(_asyncpg_pool_and_timeout(server))


# --- pg8000 ----------------------------------------------------------------------------


def test_pg8000_flows(server):
    p = prefix()
    path = f"{p}:q"
    c = pg8000.native.Connection("cube", host=server.host, port=server.port, database="cube")
    try:
        assert c.run("QUEUE RESULT :k", k=path) == []
        (row,) = c.run("QUEUE ADD PRIORITY :p :k :v", p=1, k=path, v="{}")
        qid = row[0]
        assert row[1] is True
        assert c.run("QUEUE LIST :p", p=p) == [["q", qid, "pending", None]]

        def wait():
            w = pg8000.native.Connection("cube", host=server.host, port=server.port)
            try:
                return w.run("QUEUE RESULT_BLOCKING :t :k", t=TIMEOUT_MS, k=path)
            finally:
                w.close()

        blocked = Blocked(wait)
        blocked.start()
        (got,) = c.run("QUEUE RETRIEVE EXTENDED CONCURRENCY :c :k", c=2, k=path)
        assert got[0] == "{}" and got[4] == qid
        c.run("QUEUE MERGE_EXTRA :k :j", k=path, j='{"x":1}')
        c.run("QUEUE HEARTBEAT :k", k=path)
        assert c.run("QUEUE ACK :k :r", k=path, r="R") == [[True]]
        assert blocked.get() == [["R", "success", qid, None]]
        fast = f"{p}:fast"
        (row,) = c.run("QUEUE ADD_AND_RETRIEVE :k :v :c", k=fast, v="pl", c=1)
        assert row[4] == "pl"
        c.run("QUEUE ACK :k :r", k=fast, r="ok")
        assert c.run("QUEUE RESULT_BLOCKING :t :k", t=TIMEOUT_MS, k=fast)[0][0] == "ok"
    finally:
        c.close()
