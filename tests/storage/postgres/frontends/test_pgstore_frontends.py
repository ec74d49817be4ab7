"""Several front ends (PostgresStore instances) over one database: what one does, the
others see at once; a RESULT_BLOCKING on one is woken by the ACK on another; RETRIEVE
races never over-claim; one leader housekeeps; many front ends migrate once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import asyncpg

from cubequeue.grammar.commands import (
    CacheGet,
    CacheSet,
    QueueAck,
    QueueAdd,
    QueueResult,
    QueueResultBlocking,
    QueueRetrieve,
    SysClock,
)
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres import PostgresStore
from cubequeue.storage.postgres.migrate import migrations
from cubequeue.storage.postgres.waiters import Waiter

TIMEOUT = 30.0


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 120))


async def front_ends(dsn: str, n: int, limits: Limits | None = None, **kw: object) -> list[PostgresStore]:
    stores = [PostgresStore(dsn, limits or Limits(clock_control=True), **kw) for _ in range(n)]  # type: ignore[arg-type]
    await asyncio.gather(*(s.start() for s in stores))
    return stores


async def close(stores: list[PostgresStore]) -> None:
    await asyncio.gather(*(s.close() for s in stores))


async def wait_blocking(store: PostgresStore, key: int | str) -> tuple[Waiter | ResultSet, asyncio.Future[ResultSet]]:
    fut: asyncio.Future[ResultSet] = asyncio.get_running_loop().create_future()

    def deliver(rs: ResultSet) -> None:
        if not fut.done():
            fut.set_result(rs)

    outcome = await store.result_blocking(QueueResultBlocking(key=key, timeout=30_000), deliver)
    return outcome, fut


def test_add_on_one_retrieve_on_another_blocking_woken_by_ack_on_the_second(fresh_dsn: str) -> None:
    async def body() -> None:
        one, two = await front_ends(fresh_dsn, 2)
        try:
            assert (await one.execute(QueueAdd(path="q:job", payload="{}"))).rows == [("1", True, 1)]
            claimed = await two.execute(QueueRetrieve(path="q:job", concurrency=1, extended=True))
            assert claimed.rows == [("{}", None, 0, "job", "1")]
            by_path, path_fut = await wait_blocking(one, "q:job")
            by_id, id_fut = await wait_blocking(one, 1)
            assert isinstance(by_path, Waiter) and isinstance(by_id, Waiter)
            assert (await two.execute(QueueAck(key=1, result='{"r":1}'))).rows == [(True,)]
            got = await asyncio.wait_for(asyncio.gather(path_fut, id_fut), TIMEOUT)
            assert [g.rows for g in got] == [[('{"r":1}', "success", "1", None)]] * 2
            # the path waiter consumed it: nobody reads it again
            assert (await two.execute(QueueResult(key="q:job"))).rows == []
            assert one.waiters.count == 0
            # the cache and the test clock are shared as well
            await one.execute(CacheSet(key="c:k", value="v"))
            assert (await two.execute(CacheGet(key="c:k"))).rows == [("v",)]
            moved = await one.execute(SysClock(action="advance", ms=60_000))
            shown = await two.execute(SysClock(action="show"))
            assert shown.rows[0][1] == moved.rows[0][1] == 60_000
        finally:
            await close([one, two])

    run(body)


def test_ack_null_wakes_with_a_null_payload_and_cancel_withdraws(fresh_dsn: str) -> None:
    async def body() -> None:
        one, two = await front_ends(fresh_dsn, 2)
        try:
            await one.execute(QueueAdd(path="q:a", payload="p"))
            _, fut = await wait_blocking(two, "q:a")
            other, other_fut = await wait_blocking(two, "q:a")
            assert isinstance(other, Waiter)
            other.cancel()
            await one.execute(QueueAck(key="q:a", result=None))
            got = await asyncio.wait_for(fut, TIMEOUT)
            assert got.rows == [(None, "success", "1", None)]
            assert not other_fut.done()
        finally:
            await close([one, two])

    run(body)


def test_polling_mode_delivers_from_ack_markers(fresh_dsn: str) -> None:
    """Without LISTEN (what the self-probe falls back to behind a transaction pooler) the
    committed ack markers answer the waiter."""

    async def body() -> None:
        (one,) = await front_ends(fresh_dsn, 1)
        (two,) = await front_ends(fresh_dsn, 1, listen=False)
        try:
            assert two.session.polling and not one.session.polling
            await one.execute(QueueAdd(path="q:a", payload="p"))
            _, fut = await wait_blocking(two, 1)
            await one.execute(QueueAck(key=1, result="R"))
            got = await asyncio.wait_for(fut, TIMEOUT)
            assert got.rows == [("R", "success", "1", None)]
        finally:
            await close([one, two])

    run(body)


def test_concurrent_retrieve_never_exceeds_concurrency_nor_claims_twice(fresh_dsn: str) -> None:
    concurrency, items, clients = 3, 60, 24

    async def body() -> None:
        stores = await front_ends(fresh_dsn, 3, pool_size=8)
        try:
            for i in range(items):
                await stores[i % 3].execute(QueueAdd(path=f"hot:k{i}", payload=str(i)))
            claimed: list[str] = []
            active: set[str] = set()
            peak = 0
            rng = random.Random(17)

            async def client(n: int) -> None:
                nonlocal peak
                store = stores[n % 3]
                for _ in range(40):
                    key = f"hot:k{rng.randrange(items)}"
                    rs = await store.execute(QueueRetrieve(path=key, concurrency=concurrency))
                    if rs.rows:
                        claimed.append(key)
                        active.add(key)
                        peak = max(peak, len(active))
                        assert len(active) <= concurrency
                        await asyncio.sleep(0)
                        active.discard(key)
                        ack = await stores[(n + 1) % 3].execute(QueueAck(key=key, result="ok"))
                        assert ack.rows == [(True,)]

            await asyncio.gather(*(client(n) for n in range(clients)))
            assert len(claimed) == len(set(claimed)), "an item was claimed twice"
            assert claimed, "nothing was claimed"
            assert peak <= concurrency
        finally:
            await close(stores)

    run(body)


def test_many_front_ends_migrate_once_and_one_leads(fresh_dsn: str) -> None:
    async def body() -> None:
        stores = await front_ends(fresh_dsn, 4, housekeeping_s=0.05)
        try:
            conn = await asyncpg.connect(fresh_dsn)
            try:
                versions = await conn.fetch("select version from cq_schema_version order by 1")
                assert [r[0] for r in versions] == [m.version for m in migrations()]
            finally:
                await conn.close()
            for _ in range(400):
                if sum(s.session.leader for s in stores) == 1:
                    break
                await asyncio.sleep(0.01)
            assert sum(s.session.leader for s in stores) == 1
            leader = next(s for s in stores if s.session.leader)
            # the leader's sweep removes expired rows and logs them
            follower = next(s for s in stores if not s.session.leader)
            await follower.execute(QueueAdd(path="q:old", payload="p"))
            await follower.execute(SysClock(action="advance", ms=5 * 3_600_000))
            for _ in range(400):
                log = await follower.system_table("queue_log")
                if log.rows:
                    break
                await asyncio.sleep(0.01)
            assert [r[2] for r in log.rows] == ["expired"]
            # its death hands the lock over
            await leader.close()
            stores.remove(leader)
            for _ in range(400):
                if sum(s.session.leader for s in stores) == 1:
                    break
                await asyncio.sleep(0.01)
            assert sum(s.session.leader for s in stores) == 1
        finally:
            await close(stores)

    run(body)
