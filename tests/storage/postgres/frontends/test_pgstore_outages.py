"""Outages against a real PostgreSQL: a URL that can never work stops the start with its
fix; a hung first host does not starve the second; a frozen server costs a statement its
``silence_timeout``, not the call timeout; RESULT_BLOCKING answers within its own
deadline while the database is down; an outage is one WARNING and one INFO line.

The timeouts below are "did not hang" guards, far above what is asserted on."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator

import pytest
from pgcluster import Cluster, find_bin, start_cluster

from cubequeue.grammar.commands import CacheGet, CacheSet, QueueResultBlocking
from cubequeue.server.pytest_plugin import start_cubequeue
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres import (
    PostgresStore,
    StatementInDoubt,
    StoreRefused,
    StoreUnavailable,
)

pytestmark = pytest.mark.skipif(find_bin() is None, reason="PostgreSQL is not installed")
_GUARD_S = 60.0


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of this test's own (it is frozen, killed and restarted)."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_database_that_does_not_exist_stops_the_start_with_its_fix(pg_cluster: Cluster) -> None:
    async def body() -> None:
        store = PostgresStore(pg_cluster.dsn("nosuchdb"), Limits())
        with pytest.raises(StoreRefused) as err:
            await store.start()
        assert "3D000" in str(err.value) and "createdb" in str(err.value)
        assert f"-p {pg_cluster.port}" in str(err.value)
        role = pg_cluster.dsn("postgres").replace("cq@", "nosuchrole@")
        with pytest.raises(StoreRefused) as err:
            await PostgresStore(role, Limits()).start()
        assert "28000" in str(err.value) and "createuser" in str(err.value)

    asyncio.run(asyncio.wait_for(body(), _GUARD_S))


def test_a_hung_first_host_does_not_starve_the_second(pg_cluster: Cluster) -> None:
    """The first host accepts TCP (its kernel does) and never answers: with its own
    ``connect_timeout`` the second host serves. asyncpg alone spends its one overall
    timeout (60 s by default) on the first host."""
    dsn = pg_cluster.create_database("hungfirst")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        port = hung.getsockname()[1]
        url = dsn.replace(f"127.0.0.1:{pg_cluster.port}",
                          f"127.0.0.1:{port},127.0.0.1:{pg_cluster.port}") + "?connect_timeout=1"

        async def body() -> None:
            store = PostgresStore(url, Limits())
            await store.start()
            try:
                await store.execute(CacheSet(key="k", value="v"))
                assert (await store.execute(CacheGet(key="k"))).rows == [("v",)]
            finally:
                await store.close()

        asyncio.run(asyncio.wait_for(body(), _GUARD_S))


async def _served(store: PostgresStore) -> None:
    """Until a statement succeeds (the store reconnects by itself)."""
    while True:
        try:
            await store.execute(CacheGet(key="k"))
            return
        except StoreUnavailable:
            await asyncio.sleep(0.05)


def test_freeze_kill_restart(own_cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    dsn = own_cluster.create_database("outages") + "?silence_timeout=1&connect_timeout=1"

    async def body() -> None:
        store = PostgresStore(dsn, Limits(), housekeeping=False)
        await store.start()
        try:
            await store.execute(CacheSet(key="k", value="v"))
            # frozen under a statement already sent: it is abandoned after about silence
            # + connect timeout and reported of unknown effect, not held for the 30 s
            # call timeout
            sent = asyncio.ensure_future(store.db.fetch("test", "select pg_sleep(1)"))
            await asyncio.sleep(0.2)  # sent: the server is sleeping in it
            await asyncio.to_thread(own_cluster.freeze)
            with pytest.raises(StatementInDoubt) as err:
                await asyncio.wait_for(sent, 20)
            assert err.value.sqlstate == "08007"
            assert "did not answer" in err.value.message
            assert store.pool_health().errors.get("timeout", 0) >= 1
            # one after it is never sent (57P03: no connection) or abandoned likewise
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(store.execute(CacheSet(key="k", value="w")), 20)
            await asyncio.to_thread(own_cluster.thaw)
            await asyncio.wait_for(_served(store), _GUARD_S)
            # killed: RESULT_BLOCKING answers 57P03 within its own 500 ms deadline (the
            # session's fixed 10 s connect wait used to hold it)
            await asyncio.to_thread(own_cluster.kill)
            with pytest.raises(StoreUnavailable):
                await store.execute(CacheGet(key="k"))
            with pytest.raises(StoreUnavailable) as err:
                await asyncio.wait_for(store.result_blocking(
                    QueueResultBlocking(key="q:none", timeout=500), lambda _: None), 5)
            assert err.value.sqlstate == "57P03"
            await asyncio.to_thread(own_cluster._start)
            await asyncio.wait_for(_served(store), _GUARD_S)
            while not store.available:
                await asyncio.sleep(0.05)
        finally:
            await store.close()

    with caplog.at_level(logging.INFO):
        asyncio.run(asyncio.wait_for(body(), 120))
    ours = [r for r in caplog.records if r.name.startswith(("cubequeue.store", "asyncpg"))]
    assert all(r.exc_info is None for r in ours), "no traceback for an expected outage"
    warnings = [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    back = [r.getMessage() for r in ours if "reachable again" in r.getMessage()]
    # two outages (frozen, killed): one WARNING and one INFO line each
    assert len(warnings) == 2, warnings
    assert len(back) == 2, back


def test_the_server_stops_at_once_with_the_fix_for_a_missing_database(pg_cluster: Cluster) -> None:
    """``cubequeue --store …/nosuchdb`` used to log "not reachable yet, retrying" for ever
    while clients got 57P03; it exits 2 with one line naming ``createdb``."""
    with pytest.raises(RuntimeError) as err:
        server = start_cubequeue("--store", pg_cluster.dsn("nosuchdb"))
        server.stop()  # not reached when the start is refused
    text = str(err.value)
    assert "exited with code 2" in text, text
    assert "createdb" in text and "nosuchdb" in text
    assert "retrying" not in text and "Traceback" not in text
