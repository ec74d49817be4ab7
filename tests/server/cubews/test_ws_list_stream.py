"""A QUEUE LIST above the store's work budget over the WebSocket: the store streams it,
the socket encodes it a slice per event-loop turn (``server/cubews/frame_sink.py``), and
the one answer frame is the frame a small listing's rows would give.

* in-process: a :class:`WsSession` over an executor and a store with a work budget of 4
  rows, other steps run between the slices; the frame is byte for byte the encoding of
  the rows listed at the step, and no slice was larger than the budget;
* the real server: 2,600 items (above the default budget, 1,024) listed over a socket
  in the documented order with their statuses and payloads.
"""

from __future__ import annotations

import asyncio
import uuid

from wsclient import WsClient

from cubequeue.grammar.commands import QueueAck, QueueAdd, QueueList, QueueRetrieve
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.server.cubews.codec import decode_message, encode_query, encode_result_set
from cubequeue.server.cubews.dedup import DedupTable
from cubequeue.server.cubews.frame_sink import FrameParts, FrameSink
from cubequeue.server.cubews.messages import HttpResultSet
from cubequeue.server.cubews.session import Await, Send, WsSession
from cubequeue.server.executor import Executor
from cubequeue.server.row_sink import StreamedRows
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

BUDGET = 4
TIMEOUT_S = 60.0


class _Between(FrameSink):
    """A FrameSink that runs other clients' steps at each drain and records slice sizes."""

    __slots__ = ("between", "sizes")

    def __init__(self, store: MemoryStore) -> None:
        super().__init__()
        acked = iter(range(100))
        self.sizes: list[int] = []

        def between() -> None:  # changes nothing the listing shows at its step
            store.execute(QueueAck(key=f"q:{next(acked)}", result="r"))
            store.execute(QueueAdd(path=f"q:new{next(acked)}", payload="x", priority=9))

        self.between = between

    def write(self, rows: list[Row]) -> None:
        self.sizes.append(len(rows))
        super().write(rows)

    async def drain(self) -> None:
        self.between()
        await super().drain()


def test_a_streamed_listing_is_the_frame_of_the_rows_at_its_step() -> None:
    store = MemoryStore(FakeClock(1_700_000_000_000), Limits(work_budget=BUDGET))
    for i in range(30):
        store.execute(QueueAdd(path=f"q:{i}", payload=f"p{i}", priority=i % 3))
    store.execute(QueueRetrieve(path="q:4", concurrency=10), "w")
    want = store._commands.list_rows("q", None, True, None)
    columns = QueueList(prefix="q", with_payload=True).result_columns()
    executor = Executor(store)
    session: WsSession[str] = WsSession(executor, DedupTable(60.0), "sock", process_id=None,
                                        user=None, server_version="1.7.25",
                                        max_message_size=1 << 20)  # fmt: skip
    (event,) = session.receive(encode_query(9, "conn-1", "QUEUE LIST WITH_PAYLOAD 'q'"))
    assert isinstance(event, Await)  # above one budget: the store streams it
    sink = _Between(store)
    result = asyncio.run(executor.complete(event.wait, 0, sink))
    assert isinstance(result, StreamedRows) and result.count == len(want) == 30
    assert len(sink.sizes) > 1 and all(0 < n <= BUDGET for n in sink.sizes)
    (sent,) = session.settle(event.ticket, result, sink=sink)
    assert isinstance(sent, Send) and sent.to == "sock"
    assert sent.frame == encode_result_set(9, "conn-1", ResultSet(columns, want))
    assert store._queue.snapshots == []


def test_a_listing_above_the_default_budget_over_a_real_socket(ws_server) -> None:
    p = f"t{uuid.uuid4().hex[:10]}"
    n = 2600

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            adds = [c.send(f"QUEUE ADD PRIORITY {i % 3} '{p}:k{i}' 'payload {i}'")
                    for i in range(n)]  # fmt: skip
            ids = []
            for future in adds:
                answer = await asyncio.wait_for(future, TIMEOUT_S)
                assert isinstance(answer, HttpResultSet)
                ids.append(int(answer.rows[0][0] or "0"))
            claimed = await c.rows(f"QUEUE RETRIEVE CONCURRENCY 5 '{p}:k2'")
            assert claimed and claimed[0]["payload"] == "payload 2"
            answer = await asyncio.wait_for(c.query(f"QUEUE LIST WITH_PAYLOAD '{p}'"), TIMEOUT_S)
            assert isinstance(answer, HttpResultSet)
            assert answer.columns == ("id", "queue_id", "status", "extra", "payload")
            # priority descending, then creation (these were added in id order)
            order = sorted(range(n), key=lambda i: (-(i % 3), ids[i]))
            assert list(answer.rows) == [
                (f"k{i}", str(ids[i]), "active" if i == 2 else "pending", None, f"payload {i}")
                for i in order
            ]
            small = await c.query(f"QUEUE LIST WITH_PAYLOAD '{p}x'")
            assert isinstance(small, HttpResultSet) and small.rows == ()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_the_answer_frame_decodes_to_the_rows_whatever_the_rows_per_turn() -> None:
    columns = QueueList(prefix="q").result_columns()
    rows: list[Row] = [(f"k{i}", i, "pending", None if i % 2 else '{"x":1}') for i in range(10)]
    want = encode_result_set(3, None, ResultSet(columns, rows))
    encoded: list[int] = []

    class Counting(FrameSink):
        __slots__ = ()

        def _encode(self, part: list[Row]) -> None:
            encoded.append(len(part))
            super()._encode(part)

    async def stream(sink: FrameSink) -> bytes:
        sink.begin(columns)
        sink.write(rows[:7])
        await sink.drain()
        sink.write(rows[7:])
        await sink.drain()
        return sink.finish(3, None)

    for per_turn in (1, 3, 256):
        encoded.clear()
        assert asyncio.run(stream(Counting(per_turn))) == want
        assert sum(encoded) == 10 and max(encoded) <= per_turn
    undrained = FrameSink()  # finish encodes what was written and not drained
    undrained.begin(columns)
    undrained.write(rows)
    assert undrained.finish(3, None) == want
    assert decode_message(want).command == HttpResultSet(
        tuple(c.name for c in columns),
        tuple((f"k{i}", str(i), "pending", None if i % 2 else '{"x":1}') for i in range(10)),
    )


def test_a_sealed_huge_listing_is_the_frame_in_parts_with_its_vector_sliced() -> None:
    columns = QueueList(prefix="q").result_columns()
    rows: list[Row] = [(f"k{i}", i, "pending", None if i % 3 else '{"x":1}') for i in range(50)]
    want = encode_result_set(9, "conn-1", ResultSet(columns, rows))
    turns: list[int] = []

    async def seal(sink: FrameSink, message_id: int, connection_id: str | None) -> object:
        sink.begin(columns)
        sink.write(rows)
        task = asyncio.ensure_future(sink.seal(message_id, connection_id))
        while not task.done():  # count the loop turns the seal takes
            turns.append(1)
            await asyncio.sleep(0)
        return task.result()

    frame = asyncio.run(seal(FrameSink(8, join_rows=10, vector_per_turn=7), 9, "conn-1"))
    assert isinstance(frame, FrameParts)
    assert b"".join(frame.parts) == want and frame.size == len(want) == len(frame)
    assert len(turns) >= 50 // 8 + 50 // 7  # rows and vector slices each took a turn
    # a small listing, or one without a connection id, is joined as before
    small = asyncio.run(seal(FrameSink(8, join_rows=50), 9, "conn-1"))
    assert small == want
    plain = asyncio.run(seal(FrameSink(8, join_rows=10), 9, None))
    assert plain == encode_result_set(9, None, ResultSet(columns, rows))
