"""Honest failures: the database goes away and comes back under a running front end."""

from __future__ import annotations

import asyncio

import pytest
from pgcluster import find_bin, start_cluster

from cubequeue.grammar.commands import QueueAdd, QueueGet
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres import PostgresStore, StoreUnavailable


@pytest.mark.skipif(find_bin() is None, reason="PostgreSQL is not installed")
def test_database_down_is_57p03_and_the_front_end_reconnects_by_itself() -> None:
    cluster = start_cluster()
    try:
        dsn = cluster.create_database("failures")

        async def body() -> None:
            store = PostgresStore(dsn, Limits())
            await store.start()
            try:
                await store.execute(QueueAdd(path="q:a", payload="before"))
                cluster.kill()
                with pytest.raises(StoreUnavailable) as err:
                    await store.execute(QueueAdd(path="q:b", payload="during"))
                # written to a pooled connection whose server had just died: its outcome is
                # unknown (08007) unless asyncpg saw the close first (57P03, never sent)
                assert err.value.sqlstate in ("57P03", "08007")
                with pytest.raises(StoreUnavailable) as err:
                    await store.execute(QueueAdd(path="q:b", payload="during"))
                assert err.value.sqlstate == "57P03"  # never sent: nothing to connect to
                assert not store.available
                cluster._start()  # same data directory and port: a restart
                for _ in range(600):
                    try:
                        rows = (await store.execute(QueueGet(key="q:a"))).rows
                        break
                    except StoreUnavailable:
                        await asyncio.sleep(0.05)
                assert rows == [("before", None)]
                for _ in range(600):
                    if store.available:
                        break
                    await asyncio.sleep(0.05)
                assert store.available, (store.db.available, store.session.listening, store.session._task)  # the session reconnected too (/readyz)
            finally:
                await store.close()

        asyncio.run(asyncio.wait_for(body(), 120))
    finally:
        cluster.stop()


def test_unreachable_at_start_is_57p03() -> None:
    async def body() -> None:
        store = PostgresStore("postgresql://cq@127.0.0.1:9/none", Limits())
        with pytest.raises(StoreUnavailable) as err:
            await store.start()
        assert err.value.sqlstate == "57P03"

    asyncio.run(asyncio.wait_for(body(), 60))
