"""Deduplication by (connection_id, message_id).

Cube's driver re-sends every unanswered message with the same ids on a new socket after
a disconnect; the server must never run a QUEUE ADD, ACK or CACHE INCR twice. The live
tests drop the socket the way a network failure does (no closing handshake), reconnect
with the same connection_id and resend. The table itself is tested with a fake clock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

from wsclient import WsClient, rows

from cubequeue.server.cubews.codec import encode_query
from cubequeue.server.cubews.dedup import JOINED, RUN, Cached, DedupTable


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def prefix() -> str:
    return f"d{uuid.uuid4().hex[:10]}"


async def send_and_drop(client: WsClient, message_id: int, sql: str, params: list[Any]) -> None:
    """Send, then lose the socket before reading anything: the answer can only be lost."""
    assert client.ws is not None
    await client.ws.send(encode_query(message_id, client.connection_id, sql, parameters=params))
    await client.drop()


def test_a_resent_incr_and_add_run_once(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        client = WsClient(ws_server.ws_url)
        await client.connect()
        await send_and_drop(client, 101, "CACHE INCR ?", [f"{p}:n"])
        await client.reconnect()
        first = await asyncio.wait_for(client.send("CACHE INCR ?", [f"{p}:n"], message_id=101), 10)
        assert rows(first) == [{"value": "1"}]
        second = await asyncio.wait_for(client.send("CACHE INCR ?", [f"{p}:n"], message_id=102), 10)
        assert rows(second) == [{"value": "2"}]  # 3 if the resend had run again

        await send_and_drop(client, 103, "QUEUE ADD PRIORITY 1 ? ?", [f"{p}:job", "payload"])
        await client.reconnect()
        added = await asyncio.wait_for(
            client.send("QUEUE ADD PRIORITY 1 ? ?", [f"{p}:job", "payload"], message_id=103), 10)
        assert rows(added)[0]["added"] == "true"  # the first run's answer, not a re-run's
        pending = await client.rows(f"QUEUE PENDING '{p}'")
        assert [r["id"] for r in pending] == ["job"]
        await client.close()

    run(main())


def test_a_resent_long_poll_joins_the_running_one(ws_server) -> None:
    """Arrival while still running: the new socket gets the answer when it is done."""
    p = prefix()

    async def main() -> None:
        client = WsClient(ws_server.ws_url)
        await client.connect()
        await client.rows(f"QUEUE ADD PRIORITY 1 '{p}:j' 'p'")
        await client.rows(f"QUEUE RETRIEVE '{p}:j'")
        await send_and_drop(client, 500, f"QUEUE RESULT_BLOCKING 20000 '{p}:j'", [])
        await client.reconnect()
        poll = client.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:j'", message_id=500)
        await asyncio.sleep(0.2)
        assert not poll.done()
        assert await client.rows("QUEUE ACK ? ?", [f"{p}:j", "done"]) == [{"success": "true"}]
        answer = await asyncio.wait_for(poll, 5)
        assert rows(answer)[0]["payload"] == "done"
        await client.close()

    run(main())


def test_two_sockets_with_one_connection_id_share_one_run(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        one = WsClient(ws_server.ws_url)
        two = WsClient(ws_server.ws_url, connection_id=one.connection_id)
        await one.connect()
        await two.connect()
        await one.rows(f"QUEUE ADD PRIORITY 1 '{p}:j' 'p'")
        await one.rows(f"QUEUE RETRIEVE '{p}:j'")
        first = one.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:j'", message_id=900)
        await asyncio.sleep(0.1)
        second = two.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:j'", message_id=900)
        await asyncio.sleep(0.1)
        await one.rows("QUEUE ACK ? ?", [f"{p}:j", "r"])
        a, b = await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert a == b and rows(a)[0]["payload"] == "r"
        await one.close()
        await two.close()

    run(main())


# ----------------------------------------------------------------- the table itself


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_table_run_join_cache_and_confirm() -> None:
    table: DedupTable[str] = DedupTable(120, Clock())
    key = ("conn", 1)
    assert table.begin(key, "a") is RUN
    assert table.begin(key, "b") is JOINED
    assert table.complete(key, b"answer") == ["a", "b"]
    assert table.begin(key, "c") == Cached(b"answer")
    assert table.begin(key, "d") == Cached(b"answer")  # until confirmed or expired
    table.confirmed(key)
    assert key not in table
    assert table.begin(key, "e") is RUN  # only a client that never read the answer resends


def test_table_confirm_does_not_drop_a_running_entry() -> None:
    table: DedupTable[str] = DedupTable(120, Clock())
    table.begin(("c", 1), "a")
    table.confirmed(("c", 1))
    assert table.begin(("c", 1), "b") is JOINED


def test_table_sweep_drops_only_old_answers() -> None:
    clock = Clock()
    table: DedupTable[str] = DedupTable(120, clock)
    table.begin(("c", 1), "a")
    table.complete(("c", 1), b"1")
    clock.now += 60
    table.begin(("c", 2), "a")
    table.complete(("c", 2), b"2")
    table.begin(("c", 3), "a")  # still running
    clock.now += 60
    assert table.sweep() == 1
    assert ("c", 1) not in table and ("c", 2) in table
    clock.now += 10_000
    assert table.sweep() == 1
    assert len(table) == 1 and ("c", 3) in table  # running entries never expire


def test_table_abandon_returns_waiters() -> None:
    table: DedupTable[str] = DedupTable(120, Clock())
    table.begin(("c", 1), "a")
    table.begin(("c", 1), "b")
    assert table.abandon(("c", 1)) == ["a", "b"]
    assert len(table) == 0
    assert table.complete(("c", 1), b"x") == []
