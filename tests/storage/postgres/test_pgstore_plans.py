"""What the store's SQL functions cost per call, read from the catalog of a migrated database.

A SQL-language function called from PL/pgSQL is not inlined: its query is parsed and
planned again at every call (cq_now ran ~12 times per Cube cycle that way and cost more
database CPU than the queue's own work, bench/RESULTS-notes.md). A PL/pgSQL function
keeps its plans for the session, so every cq_* function is PL/pgSQL.
"""

from __future__ import annotations

import asyncio

import asyncpg
from pgcluster import Cluster

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
