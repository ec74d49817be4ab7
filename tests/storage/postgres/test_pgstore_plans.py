"""What the store's steps cost: its SQL functions' language, read from the catalog of a
migrated database, and the database calls a statement makes.

A SQL-language function called from PL/pgSQL is not inlined: its query is parsed and
planned again at every call (cq_now ran ~12 times per Cube cycle that way and cost more
database CPU than the queue's own work, bench/RESULTS-notes.md). A PL/pgSQL function
keeps its plans for the session, so every cq_* function is PL/pgSQL.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from pgcluster import Cluster
from pgstore_backend import Backend

from cubequeue.grammar.commands import QueueAdd, QueueGet, QueueMergeExtra
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.migrate import migrate


async def _languages(dsn: str) -> dict[str, str]:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        rows = await conn.fetch(
            "select p.proname, l.lanname from pg_proc p join pg_language l on l.oid = p.prolang "
            "join pg_namespace n on n.oid = p.pronamespace "
            "where n.nspname = 'public' and p.proname like 'cq\\_%'")
        return {r["proname"]: r["lanname"] for r in rows}
    finally:
        await conn.close()


def test_every_store_function_is_plpgsql(pg_cluster: Cluster) -> None:
    languages = asyncio.run(_languages(pg_cluster.create_database("plans")))
    assert {"cq_now", "cq_lock", "cq_add", "cq_retrieve", "cq_ack", "cq_result"} <= set(languages)
    assert {name: lang for name, lang in languages.items() if lang != "plpgsql"} == {}


@pytest.fixture
def pg_backend(pg_dsn: str) -> Any:
    backend = Backend("postgresql", Limits(clock_control=True), pg_dsn)
    yield backend
    backend.close()


def _calls(backend: Backend) -> list[str]:
    """The SQL of every database call the store makes from now on."""
    db = backend.store.db
    seen: list[str] = []
    fetch = db.fetch

    async def counting(command: str, sql: str, *args: object) -> Any:
        seen.append(sql)
        return await fetch(command, sql, *args)

    db.fetch = counting
    return seen


def test_a_first_merge_extra_is_one_database_call(pg_backend: Backend) -> None:
    b = pg_backend
    b.run(QueueAdd(path="q:a", payload="p", priority=0))
    b.run(QueueAdd(path="q:b", payload="p", priority=0))
    calls = _calls(b)
    b.run(QueueMergeExtra(key="q:a", json='{"a": 1}'))
    assert len(calls) == 1  # stored verbatim with the read (was read, then swap)
    b.run(QueueMergeExtra(key=1, json='{"b":2}'))
    assert len(calls) == 3  # a merge: read, merge in the front end, swap
    assert b.run(QueueGet(key=1)) == [("p", '{"a":1,"b":2}')]
    # an invalid argument is refused on an item without extra too, and stores nothing
    assert b.outcome(QueueMergeExtra(key="q:b", json="nope"))[:3] == (
        "error", "InvalidTextRepresentation", "22P02")
    assert b.outcome(QueueMergeExtra(key="q:b", json="[" * 200))[:3] == (
        "error", "LimitExceeded", "54000")
    assert b.run(QueueGet(key="q:b")) == [("p", None)]
    assert b.outcome(QueueMergeExtra(key="q:zz", json="nope"))[0] == "rows"  # no item: ignored
