"""The WebSocket session without a socket: flatbuffer frames in, events and frames out.

The session runs statements through a real executor over a real in-memory store (no
server, no event loop unless a step waits); sockets are plain strings here."""

from __future__ import annotations

import asyncio

from websockets.frames import CloseCode

from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.cubews.codec import decode_message, encode, encode_query
from cubequeue.server.cubews.dedup import DedupTable
from cubequeue.server.cubews.messages import HttpError, HttpMessage, HttpResultSet
from cubequeue.server.cubews.session import Await, Close, Send, WsSession


def make(owner: str = "sock-1", *, dedup: DedupTable[str] | None = None,
         max_message_size: int = 1 << 20, ctx=None) -> WsSession[str]:  # fmt: skip
    ctx = ctx or build_context(Config(test_clock=True))
    return WsSession(
        ctx.executor, dedup if dedup is not None else DedupTable(60.0), owner,
        process_id="worker-1", user="cube", server_version=ctx.server_version,
        max_message_size=max_message_size,
    )  # fmt: skip


def answer(event: object) -> HttpMessage:
    assert isinstance(event, Send)
    return decode_message(event.frame)


def test_a_statement_is_answered_at_once_with_its_frame() -> None:
    session = make()
    (event,) = session.receive(encode_query(7, None, "QUEUE ADD PRIORITY 1 'p:a' '{}'"))
    assert isinstance(event, Send) and event.to == "sock-1" and event.key is None
    reply = decode_message(event.frame)
    assert reply.message_id == 7 and isinstance(reply.command, HttpResultSet)
    assert reply.command.columns == ("id", "added", "pending")
    assert reply.command.rows == (("1", "true", "1"),)


def test_typed_parameters_and_their_errors() -> None:
    session = make()
    session.receive(encode_query(1, None, "CACHE SET ? ?", parameters=["c:k", "v"]))
    (event,) = session.receive(encode_query(2, None, "CACHE GET ?", parameters=["c:k"]))
    assert answer(event).command == HttpResultSet(("value",), (("v",),))
    (event,) = session.receive(encode_query(3, None, "CACHE GET ?"))
    assert answer(event).command == HttpError("Empty parameters, please send parameters within query")


def test_errors_are_frames_and_plain_sql_and_preaggregations_route_apart() -> None:
    session = make()
    (event,) = session.receive(encode_query(1, None, "QUEUE NOPE"))
    assert isinstance(answer(event).command, HttpError)
    (event,) = session.receive(encode_query(2, None, "SELECT 1"))
    assert answer(event).command == HttpResultSet(("?column?",), (("1",),))
    (event,) = session.receive(encode_query(3, None, "CREATE TABLE t (a int)"))
    error = answer(event).command
    assert isinstance(error, HttpError) and "does not support pre-aggregation" in error.error
    # the dialect is never taken for a pre-aggregation statement, whatever its payload says
    (event,) = session.receive(encode_query(4, None, "QUEUE ADD 'p:i' 'information_schema'"))
    assert isinstance(answer(event).command, HttpResultSet)


def test_a_resend_is_answered_from_the_dedup_table_and_runs_once() -> None:
    dedup: DedupTable[str] = DedupTable(60.0)
    first, second = make("a", dedup=dedup), make("b", dedup=dedup)
    frame = encode_query(5, "conn-1", "CACHE INCR 'c:n'")
    (one,) = first.receive(frame)
    (two,) = second.receive(frame)  # a resend after a reconnect, on another socket
    assert isinstance(one, Send) and isinstance(two, Send)
    assert (one.to, one.key, two.to, two.key) == ("a", ("conn-1", 5), "b", ("conn-1", 5))
    assert one.frame == two.frame
    assert answer(one).command == HttpResultSet(("value",), (("1",),))


def test_a_blocking_wait_is_an_await_and_joined_sockets_share_its_answer() -> None:
    ctx = build_context(Config(test_clock=True))
    dedup: DedupTable[str] = DedupTable(60.0)
    first, second = make("a", dedup=dedup, ctx=ctx), make("b", dedup=dedup, ctx=ctx)
    frame = encode_query(9, "conn-2", "QUEUE RESULT_BLOCKING 1000 'w:a'")
    (event,) = first.receive(frame)
    assert isinstance(event, Await) and event.shared
    assert second.receive(frame) == []  # joined: it gets the same answer later

    async def wait_and_ack() -> object:
        task = asyncio.ensure_future(ctx.executor.complete(event.wait))
        await asyncio.sleep(0)
        first.receive(encode_query(10, None, "QUEUE ADD 'w:a' '{}'"))
        first.receive(encode_query(11, None, "QUEUE RETRIEVE 'w:a'"))
        first.receive(encode_query(12, None, "QUEUE ACK 'w:a' 'done'"))
        return await asyncio.wait_for(task, 10)

    result = asyncio.run(wait_and_ack())
    sends = first.settle(event.ticket, result)  # type: ignore[arg-type]
    assert [(s.to, s.key) for s in sends if isinstance(s, Send)] == [("a", ("conn-2", 9)), ("b", ("conn-2", 9))]
    assert answer(sends[0]).command.rows[0][0] == "done"  # type: ignore[union-attr]


def test_an_abandoned_wait_releases_its_dedup_entry() -> None:
    dedup: DedupTable[str] = DedupTable(60.0)
    session = make(dedup=dedup)
    (event,) = session.receive(encode_query(1, "conn-3", "QUEUE RESULT_BLOCKING 1000 'x:a'"))
    assert isinstance(event, Await) and ("conn-3", 1) in dedup
    session.abandon(event.ticket)
    assert ("conn-3", 1) not in dedup


def test_protocol_errors_as_cube_store_reacts() -> None:
    session = make(max_message_size=200)
    assert session.receive("text") == [Close(CloseCode.UNSUPPORTED_DATA, "binary messages only")]
    assert session.receive(b"\x00\x01 not a flatbuffer") == []
    (event,) = session.receive(encode_query(2, None, "CACHE GET '" + "k" * 300 + "'"))
    error = answer(event).command
    assert isinstance(error, HttpError) and "exceeds the maximum message size of 200 bytes" in error.error
    reply, close = session.receive(encode(HttpMessage(3, HttpResultSet(("a",), ()))))
    assert isinstance(answer(reply).command, HttpError)
    assert close == Close(CloseCode.POLICY_VIOLATION, "unexpected command")


def test_the_header_process_id_is_the_session_s() -> None:
    session = make()
    (event,) = session.receive(encode_query(1, None, "SHOW process_id"))
    assert answer(event).command == HttpResultSet(("process_id",), (("worker-1",),))
