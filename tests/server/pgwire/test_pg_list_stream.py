"""A large QUEUE LIST goes to the wire a slice per event-loop turn, and RESULT_BLOCKING's
registration with a store that waits meets ``statement_timeout``.

* executor level: :meth:`Executor.complete` with a recording sink over the in-memory
  store with an injected ``Limits.work_budget``: rows are the listing at its step though
  other steps run between slices; the count, the close on cancel and on timeout;
* a StoreBackend double whose ``result_blocking`` never completes: 57014;
* over the wire with real clients (psycopg's extended protocol, psql's simple Query):
  rows, order and the CommandComplete count of a listing above one budget.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from cubequeue.grammar.commands import (
    Command,
    QueueAck,
    QueueAdd,
    QueueList,
    QueueResultBlocking,
    QueueRetrieve,
)
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.server.errors import QueryCanceled
from cubequeue.server.executor import Executor, WaitFor
from cubequeue.server.row_sink import StreamedRows
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.interface import BlockingOutcome, StoreBackend, Table
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

TIMEOUT_S = 60.0
BUDGET = 4


class RecordingSink:
    """A RowSink that keeps what it is given and runs ``between`` at each drain."""

    def __init__(self, between: Callable[[], None] = lambda: None, hang_at: int = -1) -> None:
        self.columns: tuple[Column, ...] | None = None
        self.slices: list[list[Row]] = []
        self.between = between
        self.hang_at = hang_at
        self.drains = 0
        self.hanging = asyncio.Event()

    def begin(self, columns: tuple[Column, ...]) -> None:
        self.columns = columns

    def write(self, rows: list[Row]) -> None:
        self.slices.append(rows)

    async def drain(self) -> None:
        self.drains += 1
        self.between()
        if self.drains == self.hang_at:  # a client that stopped reading
            self.hanging.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0)


def _store(items: int = 30) -> MemoryStore:
    store = MemoryStore(FakeClock(1_700_000_000_000), Limits(work_budget=BUDGET))
    for i in range(items):
        store.execute(QueueAdd(path=f"q:{i}", payload=f"p{i}", priority=i % 3))
    store.execute(QueueRetrieve(path="q:4", concurrency=10), "w")
    return store


def _list_wait(executor: Executor) -> WaitFor:
    step = executor.run(QueueList(prefix="q", with_payload=True))
    assert isinstance(step, WaitFor)  # above one budget: a stream to wait on
    return step


def test_complete_streams_the_listing_of_its_step_through_the_sink() -> None:
    store = _store()
    want = store._commands.list_rows("q", None, True, None)
    executor = Executor(store)
    acked = iter(range(30))

    def between() -> None:  # other clients' steps between slices change nothing shown
        store.execute(QueueAck(key=f"q:{next(acked)}", result="r"))
        store.execute(QueueAdd(path=f"q:new{next(acked)}", payload="x", priority=9))

    sink = RecordingSink(between)
    result = asyncio.run(executor.complete(_list_wait(executor), 0, sink))
    assert isinstance(result, StreamedRows)
    assert result.rows == [] and result.count == len(want)
    assert sink.columns == QueueList(prefix="q", with_payload=True).result_columns()
    assert all(0 < len(part) <= BUDGET for part in sink.slices)
    assert [row for part in sink.slices for row in part] == want
    assert store._queue.snapshots == []


def test_complete_without_a_sink_gathers_one_frame() -> None:
    store = _store()
    executor = Executor(store)
    result = asyncio.run(executor.complete(_list_wait(executor)))
    assert type(result) is ResultSet
    assert result.rows == store._commands.list_rows("q", None, True, None)
    assert store._queue.snapshots == []


def test_a_cancelled_or_timed_out_stream_is_closed() -> None:
    store = _store()
    executor = Executor(store)

    async def cancelled() -> None:
        sink = RecordingSink(hang_at=2)
        task = asyncio.ensure_future(executor.complete(_list_wait(executor), 0, sink))
        await sink.hanging.wait()  # a client that stopped reading, mid-stream
        assert len(store._queue.snapshots) == 1
        task.cancel()  # a CancelRequest or a disconnect
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancelled(), TIMEOUT_S))
    assert store._queue.snapshots == []
    with pytest.raises(QueryCanceled, match="statement timeout"):
        asyncio.run(executor.complete(_list_wait(executor), 50, RecordingSink(hang_at=2)))
    assert store._queue.snapshots == []


class RegistersNever:
    """A store whose RESULT_BLOCKING registration never completes (a PostgreSQL store
    whose session stopped answering), everything else the in-memory store's."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.kind = "postgresql"
        self.cancelled = 0

    def execute(self, cmd: Command, process_id: str | None = None) -> Any:
        return self.inner.execute(cmd, process_id)

    def result_blocking(self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
                        process_id: str | None = None) -> BlockingOutcome:
        return self._register()

    async def _register(self) -> ResultSet:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("never registers")

    def system_table(self, name: str) -> Table:
        return self.inner.system_table(name)

    def stats(self) -> Any:
        return self.inner.stats()

    def now_ms(self) -> int:
        return self.inner.now_ms()


def test_result_blocking_registration_meets_statement_timeout() -> None:
    store = RegistersNever(_store(0))
    assert isinstance(store, StoreBackend)
    seen: list[tuple[str, str]] = []
    executor = Executor(store, observe=lambda name, outcome, _s: seen.append((name, outcome)))
    cmd = QueueResultBlocking(key="q:k", timeout=600_000)
    step = executor.run(cmd)
    assert isinstance(step, WaitFor) and step.blocking

    async def main() -> None:
        with pytest.raises(QueryCanceled, match="statement timeout") as caught:
            await executor.complete(step, 100)
        assert isinstance(caught.value, QueueError) and caught.value.sqlstate == "57014"

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
    assert store.cancelled == 1  # the registration was withdrawn
    assert seen == [("QUEUE RESULT_BLOCKING", "57014")]


# --- over the wire ---------------------------------------------------------------------

_N = 3000  # above the default work budget (1024): streamed in three slices


def _fill(conn: psycopg.Connection[Any], prefix: str, n: int) -> None:
    sql = ";".join(f"QUEUE ADD PRIORITY {i % 4} '{prefix}:k{i}' '{{\"i\":{i}}}'" for i in range(n))
    conn.execute(sql.encode())


def _expected(n: int) -> list[str]:
    """LIST order: priority descending, then created, then id (all created in one step
    per batch, so id order breaks the ties)."""
    return [f"k{i}" for i in sorted(range(n), key=lambda i: (-(i % 4), i))]


def test_a_large_listing_over_the_extended_protocol(cubequeue_server: Any) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        _fill(conn, "big", _N)
        conn.execute("QUEUE RETRIEVE CONCURRENCY 5 'big:k3'")
        cur = conn.execute("QUEUE LIST WITH_PAYLOAD 'big'")
        rows = cur.fetchall()
        assert cur.rowcount == _N
        assert len(rows) == _N
        active = [r for r in rows if r[2] == "active"]
        assert [r[0] for r in active] == ["k3"]
        assert sorted(r[0] for r in rows) == sorted(_expected(_N))
        pending = conn.execute("QUEUE PENDING 'big'").fetchall()
        assert [r[0] for r in pending] == [k for k in _expected(_N) if k != "k3"]
        assert conn.execute("SELECT 7").fetchone() == (7,)  # the session goes on


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_a_large_listing_over_a_simple_query_with_psql(cubequeue_server: Any) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        _fill(conn, "big", _N)
    out = subprocess.run(
        ["psql", cubequeue_server.dsn, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
         "-c", "QUEUE PENDING 'big'", "-c", "SELECT 7"],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
    ).stdout.splitlines()
    assert [line.split("|")[0] for line in out[:-1]] == _expected(_N)
    assert out[-1] == "7"


def test_a_step_that_streams_calls_the_executors_stream_hook_and_a_frame_does_not() -> None:
    calls: list[str] = []
    store = _store()
    executor = Executor(store, on_stream=lambda: calls.append("stream"))
    executor.run(QueueList(prefix="none"))  # empty: one frame
    assert calls == []
    wait = _list_wait(executor)  # above one budget: the heap policy's freeze runs here
    assert calls == ["stream"]
    asyncio.run(executor.complete(wait))
