"""One write per round trip: a statement whose store step waits sends its ParseComplete
and BindComplete with its rows, as PostgreSQL sends a batch's replies when the batch ends
(at ReadyForQuery), not before the step. The PostgreSQL store waits on every statement,
where the early write cost a send per statement (bench/RESULTS-notes.md). Driven in
process with a fake transport over the memory store, its steps made to wait a turn.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from fake_transport import FakeTransport
from wire_messages import SYNC, bind, message, parse, startup

from cubequeue.server.pgwire import connection

EXECUTE = message(b"E", b"\0" + struct.pack("!i", 0))


def _protocol() -> tuple[Any, FakeTransport]:
    from cubequeue.server.app import build_context
    from cubequeue.server.options import load_config

    ctx = build_context(load_config([], {}))
    store = ctx.store.store  # the slot's memory store
    answer = store.execute

    async def later(result: object) -> object:
        await asyncio.sleep(0)
        return result

    store.execute = lambda cmd, process_id=None: later(answer(cmd, process_id))
    proto = connection.PgProtocol(ctx, None)
    transport = FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    proto.data_received(startup())
    transport.written.clear()
    return proto, transport


def _round_trip(sql: str) -> bytes:
    return parse("", sql) + bind("", "") + EXECUTE + SYNC


def _kinds(data: bytes) -> list[bytes]:
    kinds, at = [], 0
    while at < len(data):
        kinds.append(data[at : at + 1])
        at += 1 + struct.unpack("!i", data[at + 1 : at + 5])[0]
    return kinds


async def _settled(transport: FakeTransport, writes: int) -> None:
    for _ in range(100):
        if len(transport.written) >= writes:
            return
        await asyncio.sleep(0)


def test_a_waiting_store_step_is_answered_in_one_write() -> None:
    async def main() -> None:
        proto, transport = _protocol()
        proto.data_received(_round_trip("QUEUE ADD PRIORITY 1 'q:a' 'p'"))
        await _settled(transport, 1)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(transport.written) == 1  # was two: ParseComplete+BindComplete, then the rest
        assert _kinds(transport.written[0]) == [b"1", b"2", b"D", b"C", b"Z"]
        proto.connection_lost(None)

    asyncio.run(main())


def test_a_finished_round_trip_before_the_wait_is_not_held_back() -> None:
    async def main() -> None:
        proto, transport = _protocol()
        proto.data_received(_round_trip("SELECT 1") + _round_trip("QUEUE ADD PRIORITY 1 'q:b' 'p'"))
        await _settled(transport, 1)
        first = transport.written[0]
        # the first batch whole at once (the second's ParseComplete and BindComplete may
        # ride along in that write), the second's answer after its step
        assert _kinds(first)[:5] == [b"1", b"2", b"D", b"C", b"Z"]
        assert set(_kinds(first)[5:]) <= {b"1", b"2"}
        await _settled(transport, 2)
        assert _kinds(b"".join(transport.written))[-3:] == [b"D", b"C", b"Z"]
        proto.connection_lost(None)

    asyncio.run(main())
