"""A resent QUEUE ACK runs once; ``--max-connections-per-user`` on the WebSocket side.

Dedup: Cube's driver resends an unanswered message with
the same (connection_id, message_id) on a new socket after a disconnect. An ACK that ran
twice would answer ``false`` the second time (the item is gone), so a resend that gets
``true`` after the first run provably committed is the cached answer, not a re-run.

The dropping socket sends nothing else, so nothing the server writes to it can race the
drop; a separate observer socket sets up the item and checks the state.

Connection cap: with ``--ws-auth basic`` the socket has a user, and the cap is
the registry's, shared with the PostgreSQL wire (server/context.py). The server accepts
the upgrade, then closes the over-cap socket with 1013 (try again later) and the 53300
message naming the option (found by experiment: the refusal comes after the 101).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from wsclient import WsClient, rows

from cubequeue.server.cubews.codec import encode_query
from cubequeue.server.pgclient import connect as pg_connect


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def prefix() -> str:
    return f"da{uuid.uuid4().hex[:10]}"


async def eventually(check: Callable[[], Coroutine[Any, Any, bool]], what: str) -> None:
    deadline = time.monotonic() + 20
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_resent_ack_runs_once(ws_server: Any) -> None:
    p = prefix()
    job = f"{p}:job"

    async def main() -> None:
        observer = WsClient(ws_server.ws_url)
        await observer.connect()
        added = await observer.rows("QUEUE ADD PRIORITY 1 ? ?", [job, "payload"])
        assert added[0]["added"] == "true"
        item_id = added[0]["id"]
        assert item_id is not None
        retrieved = await observer.rows(f"QUEUE RETRIEVE CONCURRENCY 1 '{job}'")
        assert retrieved[0]["payload"] == "payload"

        # the worker's socket: one ACK, then the network fails before any answer is read
        worker = WsClient(ws_server.ws_url)
        await worker.connect()
        assert worker.ws is not None
        await worker.ws.send(
            encode_query(301, worker.connection_id, "QUEUE ACK ? ?", parameters=[job, "done"])
        )
        await worker.drop()

        # the first ACK committed: the item is gone and its result is stored
        async def acked() -> bool:
            return await observer.rows(f"QUEUE GET '{job}'") == []

        await eventually(acked, "the first ACK to commit")

        # the resend on a new socket gets the first run's answer; a re-run would say false
        await worker.reconnect()
        resent = await asyncio.wait_for(
            worker.send("QUEUE ACK ? ?", [job, "done"], message_id=301), 10
        )
        assert rows(resent) == [{"success": "true"}]

        # exactly one ACK happened: a fresh message id finds nothing to ACK
        fresh = await asyncio.wait_for(
            worker.send("QUEUE ACK ? ?", [job, "other"], message_id=302), 10
        )
        assert rows(fresh) == [{"success": "false"}]

        # the one result is the first ACK's; by id it is read-many, by path consume-once
        by_id = await observer.rows(f"QUEUE RESULT {item_id}")
        assert [(r["payload"], r["type"], r["id"]) for r in by_id] == [("done", "success", item_id)]
        by_path = await observer.rows(f"QUEUE RESULT '{job}'")
        assert [(r["payload"], r["id"]) for r in by_path] == [("done", item_id)]
        assert await observer.rows(f"QUEUE RESULT '{job}'") == []
        assert await observer.rows(f"QUEUE PENDING '{p}'") == []
        assert await observer.rows(f"QUEUE ACTIVE '{p}'") == []
        await worker.close()
        await observer.close()

    run(main())


def test_a_resent_ack_null_runs_once_and_a_re_add_is_not_acked(ws_server: Any) -> None:
    """After the ACK, the same path is ADDed again: a re-run of the resend would ACK it."""
    p = prefix()
    job = f"{p}:job"

    async def main() -> None:
        observer = WsClient(ws_server.ws_url)
        await observer.connect()
        await observer.rows("QUEUE ADD PRIORITY 1 ? ?", [job, "first"])
        worker = WsClient(ws_server.ws_url)
        await worker.connect()
        assert worker.ws is not None
        await worker.ws.send(encode_query(7, worker.connection_id, f"QUEUE ACK '{job}' NULL"))
        await worker.drop()

        async def acked() -> bool:
            return await observer.rows(f"QUEUE GET '{job}'") == []

        await eventually(acked, "the first ACK to commit")
        again = await observer.rows("QUEUE ADD PRIORITY 1 ? ?", [job, "second"])
        assert again[0]["added"] == "true"

        await worker.reconnect()
        resent = await asyncio.wait_for(worker.send(f"QUEUE ACK '{job}' NULL", message_id=7), 10)
        assert rows(resent) == [{"success": "true"}]
        # the second item is untouched: the resend did not run
        assert await observer.rows(f"QUEUE GET '{job}'") == [{"payload": "second", "extra": None}]
        assert [r["id"] for r in await observer.rows(f"QUEUE PENDING '{p}'")] == ["job"]
        await observer.rows(f"QUEUE CANCEL '{job}'")
        await worker.close()
        await observer.close()

    run(main())


# ------------------------------------------------------- --max-connections-per-user


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def refusal(url: str, headers: dict[str, str]) -> tuple[int, str]:
    """Open a socket the server will refuse; its close code and reason."""
    ws = await connect(url, additional_headers=headers, open_timeout=10)
    try:
        await asyncio.wait_for(ws.recv(), 10)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None, "closed without a close frame"
        return closed.rcvd.code, closed.rcvd.reason
    finally:
        await ws.close()
    raise AssertionError("the over-cap socket received a message instead of a close")


def test_max_connections_per_user_on_the_ws_side(ws_start: Any) -> None:
    srv = ws_start("--ws-auth", "basic", "--password", "secret", "--max-connections-per-user", "2")
    cube = basic("cube", "secret")

    async def main() -> None:
        a = WsClient(srv.ws_url, headers=cube)
        b = WsClient(srv.ws_url, headers=cube)
        await a.connect()
        await b.connect()
        assert len(await a.rows("SELECT 1")) == 1
        assert len(await b.rows("SELECT 1")) == 1

        code, reason = await refusal(srv.ws_url, cube)
        assert code == 1013
        assert "--max-connections-per-user" in reason
        assert "2" in reason

        # another user is not counted against cube's cap
        alice = WsClient(srv.ws_url, headers=basic("alice", "secret"))
        await alice.connect()
        assert len(await alice.rows("SELECT 1")) == 1

        # the two admitted sockets are still served
        assert len(await a.rows("SELECT 1")) == 1
        assert len(await b.rows("SELECT 1")) == 1

        # closing one frees its slot (the server notices asynchronously)
        await a.close()
        fresh: list[WsClient] = []

        async def admitted() -> bool:
            client = WsClient(srv.ws_url, headers=cube)
            await client.connect()
            try:
                await client.rows("SELECT 1", timeout=5)
            except Exception:
                await client.close()
                return False
            fresh.append(client)
            return True

        await eventually(admitted, "a slot to free up after a close")
        assert len(await fresh[0].rows("SELECT 1")) == 1
        code, _ = await refusal(srv.ws_url, cube)
        assert code == 1013
        for client in (fresh[0], b, alice):
            await client.close()

    run(main())


def test_the_per_user_cap_counts_both_wires(ws_start: Any) -> None:
    srv = ws_start("--ws-auth", "basic", "--password", "secret", "--max-connections-per-user", "2")
    if not hasattr(srv, "port"):
        pytest.skip("CUBEQUEUE_WS_INPROC=1 serves no PostgreSQL listener")
    cube = basic("cube", "secret")

    async def main() -> None:
        with pg_connect(srv.host, srv.port, user="cube", password="secret", timeout=30) as conn:
            assert conn.query("SELECT 1")[-1].rows == [("1",)]
            one = WsClient(srv.ws_url, headers=cube)
            await one.connect()
            assert len(await one.rows("SELECT 1")) == 1
            code, reason = await refusal(srv.ws_url, cube)
            assert code == 1013
            assert "--max-connections-per-user" in reason
            await one.close()

    run(main())
