"""What a statement costs in calls, counted rather than timed (function calls are exact):
the connection's per-read bookkeeping (a partial message's deadline, the reading pause)
and a RESULT_BLOCKING's registration add no Python-level call to the round trip, as
before the server's restructuring (bench/RESULTS-notes.md, "per-statement calls")."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from fake_transport import FakeTransport

from cubequeue.grammar import parse
from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.executor import Executor, WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import BackendDecoder, encode_frontend
from cubequeue.server.pgwire.connection import PgProtocol
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore


@contextmanager
def python_calls() -> Iterator[list[str]]:
    """The names of the Python functions called inside the block, in order."""
    names: list[str] = []

    def record(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        yield names
    finally:
        sys.setprofile(None)


def _enc(*msgs: m.FrontendMessage) -> bytes:
    return b"".join(encode_frontend(x) for x in msgs)


def test_a_prepared_round_trip_calls_no_reading_bookkeeping() -> None:
    """A read that completes its messages and leaves nothing queued needs neither the
    decoder's ``buffered`` (a property) nor the queue's ``full`` (another) to know that
    no deadline and no pause apply."""

    async def main() -> list[str]:
        proto = PgProtocol(build_context(Config(test_clock=True)), None)
        sink = FakeTransport()
        proto.connection_made(sink)  # type: ignore[arg-type]  # a stand-in transport
        proto.data_received(_enc(m.StartupMessage(196608, (("user", "cube"),))))
        proto.data_received(_enc(m.Parse("s1", "SELECT 1", ()), m.Sync()))
        tx = _enc(m.Bind("", "s1", (), (), ()), m.Describe("P", ""), m.Execute("", 0), m.Sync())
        proto.data_received(tx)  # caches warm
        with python_calls() as names:
            proto.data_received(tx)
        answer = BackendDecoder().feed(sink.written[-1])
        assert [type(x) for x in answer] == [m.BindComplete, m.RowDescription, m.DataRow,
                                             m.CommandComplete, m.ReadyForQuery]  # fmt: skip
        proto.connection_lost(None)
        return names

    names = asyncio.run(main())
    assert "data_received" in names  # the profile saw the round trip
    assert "buffered" not in names and "full" not in names, names


def test_a_registered_result_blocking_calls_no_awaitable_probe() -> None:
    """The in-memory store registers a waiter at once; telling it from an awaitable
    registration is one isinstance, not ``inspect.isawaitable``'s three."""
    store = MemoryStore(FakeClock())
    executor = Executor(store)
    added = executor.run(parse("QUEUE ADD PRIORITY 1 'q:a' '{}'"))
    qid = added.rows[0][0]  # type: ignore[union-attr]  # a ResultSet

    async def main() -> list[str]:
        step = executor.run(parse(f"QUEUE RESULT_BLOCKING 60000 {qid}"))
        assert isinstance(step, WaitFor)
        done: Callable[[object], None] = lambda _w: None  # noqa: E731
        with python_calls() as names:
            wait = executor.begin_blocking(step, done)
        assert not wait.done()
        wait.cancel()
        return names

    names = asyncio.run(main())
    assert "start" in names and "isawaitable" not in names, names
