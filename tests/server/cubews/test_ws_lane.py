"""The socket's inline frames (``server/cubews/inline_frames.py``): what reaches the
store through the inline path, what still goes through websockets' own connection, and
flow control.

Each test keeps to its own cache keys and queue prefix, since the server is shared.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode, Frame, Opcode

from cubequeue.server.cubews.codec import decode_message, encode_query
from cubequeue.server.cubews.messages import HttpError, HttpResultSet


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def key() -> str:
    return f"lane{uuid.uuid4().hex[:10]}"


async def _answers(ws: Any, count: int) -> dict[int, HttpResultSet | HttpError]:
    got: dict[int, HttpResultSet | HttpError] = {}
    while len(got) < count:
        data = await ws.recv()
        assert isinstance(data, bytes)
        message = decode_message(data)
        assert isinstance(message.command, HttpResultSet | HttpError)
        got[message.message_id] = message.command
    return got


def test_a_fragmented_message_is_answered_like_a_whole_one(ws_server) -> None:
    k = key()

    async def main() -> None:
        async with connect(ws_server.ws_url, compression=None) as ws:
            whole = encode_query(1, None, f"CACHE SET 'c:{k}' 'v1'")
            await ws.send([whole[:5], whole[5:17], whole[17:]])  # three frames, one message
            await ws.send(encode_query(2, None, f"CACHE GET 'c:{k}'"))
            got = await _answers(ws, 2)
            assert isinstance(got[1], HttpResultSet) and got[1].rows == (("true",),)
            assert isinstance(got[2], HttpResultSet) and got[2].rows == (("v1",),)

    run(main())


def test_many_messages_in_one_write_are_all_answered_in_order_of_effect(ws_server) -> None:
    """A burst of frames in one TCP segment arrives in one ``data_received``: each is
    run in turn (the INCRs count up) and every answer goes out."""
    k = key()
    n = 50

    async def main() -> None:
        async with connect(ws_server.ws_url, compression=None) as ws:
            for i in range(1, n + 1):  # queued in the client's protocol, written at once
                ws.protocol.send_binary(encode_query(i, "lane-burst", f"CACHE INCR 'c:{k}'"))
            ws.send_data()
            got = await _answers(ws, n)
            for i in range(1, n + 1):
                answer = got[i]
                assert isinstance(answer, HttpResultSet), answer
                assert answer.rows == ((str(i),),)

    run(main())


def test_a_client_that_stops_reading_gets_every_answer_once_it_reads_again(ws_server) -> None:
    """Answers beyond the transport's write buffer pause reading the socket (and resume
    it once the client reads): nothing is lost, nothing is stuck."""
    k = key()
    n = 200
    value = "x" * 65_536

    async def main() -> None:
        async with connect(ws_server.ws_url, compression=None, max_size=2**24,
                           max_queue=None) as ws:  # fmt: skip
            await ws.send(encode_query(1, None, f"CACHE SET 'c:{k}' '{value}'"))
            assert 1 in await _answers(ws, 1)
            reader = ws.transport
            reader.pause_reading()  # the client stops reading: ~13 MB of answers pile up
            for i in range(2, n + 2):
                await ws.send(encode_query(i, None, f"CACHE GET 'c:{k}'"))
            reader.resume_reading()
            got = await _answers(ws, n)
            assert sorted(got) == list(range(2, n + 2))
            for answer in got.values():
                assert isinstance(answer, HttpResultSet) and answer.rows == ((value,),)

    run(main())


def _frame(payload: bytes, *, opcode: Opcode = Opcode.BINARY, mask: bool = True) -> bytes:
    return Frame(opcode, payload).serialize(mask=mask)


def test_frames_split_anywhere_across_reads_are_reassembled(ws_server) -> None:
    """Frames of every header form (7-bit, 16-bit and 64-bit lengths), written a few
    bytes at a time and with a ping between them: each answered once, the ping ponged."""
    k = key()
    sizes = (10, 300, 70_000)  # 7-bit, 16-bit, 64-bit length forms

    async def main() -> None:
        async with connect(ws_server.ws_url, compression=None, max_size=2**24) as ws:
            stream = b""
            for i, size in enumerate(sizes, start=1):
                stream += _frame(encode_query(i, None, f"CACHE SET 'c:{k}{i}' '{'v' * size}'"))
                stream += _frame(b"lane-ping", opcode=Opcode.PING)
            pong = ws.ping(b"lane-ping")  # the client expects the pong of the raw ping
            waiter = await pong
            for start in range(0, len(stream), 7):
                ws.transport.write(stream[start : start + 7])
            got = await _answers(ws, len(sizes))
            assert all(isinstance(a, HttpResultSet) and a.rows == (("true",),)
                       for a in got.values()), got  # fmt: skip
            await asyncio.wait_for(waiter, 10)
            for i in range(1, len(sizes) + 1):
                await ws.send(encode_query(10 + i, None, f"CACHE GET 'c:{k}{i}'"))
            values = await _answers(ws, len(sizes))
            for i, size in enumerate(sizes, start=1):
                answer = values[10 + i]
                assert isinstance(answer, HttpResultSet) and answer.rows == (("v" * size,),)

    run(main())


def test_an_unmasked_client_frame_fails_the_connection_with_1002(ws_server) -> None:
    async def main() -> None:
        async with connect(ws_server.ws_url, compression=None) as ws:
            ws.transport.write(_frame(encode_query(1, None, "SELECT 1"), mask=False))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == CloseCode.PROTOCOL_ERROR

    run(main())
