"""Two cubequeue servers (``--store postgresql://…``) over one database, with real clients:
what one front end does the other sees; a RESULT_BLOCKING on one is woken by the ACK on
the other, over psycopg and over Cube Store's WebSocket; RETRIEVE races through both
never over-claim."""

from __future__ import annotations

import asyncio
import time
import urllib.request

import psycopg
from pgstore_servers import front_ends
from wsclient import WsClient, rows

from cubequeue.server.pytest_plugin import CubequeueServer

TIMEOUT_S = 30.0


def wait_blocked(server: CubequeueServer, n: int) -> None:
    """Until ``server``'s /metrics counts ``n`` blocked waiters (sampled once a second),
    so the ACK that follows must wake a registered waiter, not answer its first look."""
    deadline = time.monotonic() + TIMEOUT_S
    line = f"cubequeue_blocked_waiters {float(n)}"
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=5) as response:
            if line in response.read().decode().splitlines():
                return
        time.sleep(0.1)
    raise AssertionError(f"{line} never appeared in /metrics")


def test_psycopg_add_on_one_retrieve_on_the_other_blocking_woken_by_the_others_ack(
    fresh_dsn: str,
) -> None:
    with front_ends(fresh_dsn, 2) as (one, two):

        async def body() -> None:
            a = await psycopg.AsyncConnection.connect(one.dsn, autocommit=True)
            b = await psycopg.AsyncConnection.connect(two.dsn, autocommit=True)
            waiter = await psycopg.AsyncConnection.connect(one.dsn, autocommit=True)
            try:
                added = await (await a.execute("QUEUE ADD PRIORITY 1 'q:job' '{\"n\":1}'")).fetchall()
                assert added == [(1, True, 1)]
                got = await (await b.execute("QUEUE RETRIEVE CONCURRENCY 1 'q:job'")).fetchall()
                assert got[0][0] == '{"n":1}' and got[0][4] == 1
                blocked = asyncio.ensure_future(
                    waiter.execute("QUEUE RESULT_BLOCKING 20000 'q:job'"))
                await asyncio.to_thread(wait_blocked, one, 1)  # registered on `one` first
                acked = await (await b.execute("QUEUE ACK 1 '{\"r\":42}'")).fetchall()
                assert acked == [(True,)]
                cursor = await asyncio.wait_for(blocked, TIMEOUT_S)
                assert await cursor.fetchall() == [('{"r":42}', "success", 1, None)]
                # consumed by path on `one`: `two` reads nothing more
                assert await (await b.execute("QUEUE RESULT 'q:job'")).fetchall() == []
            finally:
                for conn in (a, b, waiter):
                    await conn.close()

        asyncio.run(asyncio.wait_for(body(), 120))


def test_websocket_blocking_on_one_woken_by_ack_on_the_other(fresh_dsn: str) -> None:
    with front_ends(fresh_dsn, 2) as (one, two):

        async def body() -> None:
            async with WsClient(one.ws_url) as a, WsClient(two.ws_url) as b:
                added = await a.rows("QUEUE ADD PRIORITY 1 'q:ws' '{}'")
                assert added == [{"id": "1", "added": "true", "pending": "1"}]
                claimed = await b.rows("QUEUE RETRIEVE CONCURRENCY 1 'q:ws'")
                assert claimed[0]["payload"] == "{}"
                by_id = a.send("QUEUE RESULT_BLOCKING 20000 1")
                await asyncio.to_thread(wait_blocked, one, 1)
                assert await b.rows("QUEUE ACK 'q:ws' '{\"ok\":true}'") == [{"success": "true"}]
                answer = await asyncio.wait_for(by_id, TIMEOUT_S)
                assert rows(answer) == [{"payload": '{"ok":true}', "type": "success",
                                         "id": "1", "external_id": None}]

        asyncio.run(asyncio.wait_for(body(), 120))


def test_retrieve_race_through_two_servers(fresh_dsn: str) -> None:
    """32 clients on two front ends claim 40 items of one prefix with CONCURRENCY 2: at
    no moment more than 2 active (checked in the database's own view), no item twice."""
    concurrency, items, clients = 2, 40, 32
    with front_ends(fresh_dsn, 2) as servers:

        async def body() -> None:
            conns = [await psycopg.AsyncConnection.connect(servers[i % 2].dsn, autocommit=True)
                     for i in range(clients)]
            try:
                for i in range(items):
                    await conns[i % clients].execute(f"QUEUE ADD PRIORITY 1 'hot:k{i}' '{i}'")
                claimed: list[int] = []
                peak = 0

                async def client(n: int) -> None:
                    nonlocal peak
                    conn = conns[n]
                    for attempt in range(items):
                        key = f"hot:k{(n * 7 + attempt) % items}"
                        rows = await (await conn.execute(
                            f"QUEUE RETRIEVE CONCURRENCY {concurrency} '{key}'")).fetchall()
                        if not rows or rows[0][0] is None:
                            continue
                        _, _, _, active, queue_id = rows[0][:5]
                        claimed.append(queue_id)
                        peak = max(peak, len(active.split(",")) if active else 0)
                        acked = await (await conn.execute(f"QUEUE ACK {queue_id} 'done'")).fetchall()
                        assert acked == [(True,)]

                await asyncio.gather(*(client(n) for n in range(clients)))
                assert claimed, "nothing was claimed"
                assert len(claimed) == len(set(claimed)), "an item was claimed twice"
                assert sorted(claimed) == list(range(1, items + 1)), "every item once"
                assert peak <= concurrency
            finally:
                for conn in conns:
                    await conn.close()

        asyncio.run(asyncio.wait_for(body(), 180))
