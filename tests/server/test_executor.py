"""The executor over stores that answer in each of the seam's shapes: a frame at once, an
awaitable, a row stream; and the routing and transaction rules both wires share."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cubequeue.grammar import parse
from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.executor import Executor, WaitFor
from cubequeue.server.sql import PlainOutcome, PlainSession
from cubequeue.storage.interface import RowStream

_COLS = (Column("value", ColumnType.STRING),)


@dataclass
class FakeStore:
    """A StoreBackend whose step answers in the shape ``mode`` says."""

    mode: str = "frame"
    kind: str = "fake"
    calls: list[str] = field(default_factory=list)
    waiters: list[Callable[[ResultSet], None]] = field(default_factory=list)

    def execute(self, cmd: Command, process_id: str | None = None) -> Any:
        self.calls.append(cmd.tag)
        frame = ResultSet(_COLS, [("a",), ("b",)])
        if self.mode == "frame":
            return frame
        if self.mode == "stream":
            return RowStream(_COLS, iter([[("a",)], [("b",)]]))
        if self.mode == "fail":
            raise RuntimeError("disk on fire")

        async def later() -> ResultSet:
            await asyncio.sleep(0)
            return frame

        return later()

    def result_blocking(self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
                        process_id: str | None = None) -> Any:  # fmt: skip
        self.waiters.append(callback)
        outer = self

        class Waiter:
            cancelled = False

            def cancel(self) -> None:
                Waiter.cancelled = True
                outer.waiters.clear()

        return Waiter()

    def system_table(self, name: str) -> ResultSet:
        return ResultSet(_COLS, [])

    def stats(self) -> Any:
        return None

    def now_ms(self) -> int:
        return 1_700_000_000_000


def make(mode: str = "frame") -> tuple[Executor, FakeStore, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    store = FakeStore(mode)
    executor = Executor(store, observe=lambda cmd, outcome, s: seen.append((cmd, outcome)))  # type: ignore[arg-type]
    return executor, store, seen


def test_a_frame_at_once_is_returned_as_it_is_and_metered_once() -> None:
    executor, _store, seen = make("frame")
    result = executor.run(parse("QUEUE LIST 'q'"))
    assert isinstance(result, ResultSet) and result.rows == [("a",), ("b",)]
    assert seen == [("QUEUE LIST", "ok")]


@pytest.mark.parametrize("mode", ["awaitable", "stream"])
def test_an_awaitable_or_a_stream_is_a_wait_that_completes_to_the_frame(mode: str) -> None:
    executor, _store, seen = make(mode)
    step = executor.run(parse("QUEUE LIST 'q'"))
    assert isinstance(step, WaitFor) and step.pending is not None
    assert seen == []  # metered when it completes
    result = asyncio.run(executor.complete(step))
    assert result.rows == [("a",), ("b",)]
    assert seen == [("QUEUE LIST", "ok")]


def test_a_store_bug_is_xx000_and_metered() -> None:
    executor, _store, seen = make("fail")
    with pytest.raises(QueueError) as caught:
        executor.run(parse("QUEUE LIST 'q'"))
    assert caught.value.sqlstate == "XX000" and caught.value.message == "internal error: disk on fire"
    assert seen == [("QUEUE LIST", "XX000")]


def test_result_blocking_never_reaches_the_store_until_completed_and_times_out_empty() -> None:
    executor, store, seen = make()
    step = executor.run(parse("QUEUE RESULT_BLOCKING 10 'q:a'"))
    assert isinstance(step, WaitFor) and step.pending is None and store.waiters == []
    result = asyncio.run(executor.complete(step))
    assert result.rows == [] and store.waiters == []  # the waiter was withdrawn
    assert seen == [("QUEUE RESULT_BLOCKING", "ok")]


def test_result_blocking_is_woken_by_the_store_callback() -> None:
    executor, store, _seen = make()
    step = executor.run(parse("QUEUE RESULT_BLOCKING 60000 'q:a'"))
    assert isinstance(step, WaitFor)

    async def main() -> ResultSet:
        task = asyncio.ensure_future(executor.complete(step))
        while not store.waiters:
            await asyncio.sleep(0)
        store.waiters[0](ResultSet(_COLS, [("woken",)]))
        return await task

    assert asyncio.run(main()).rows == [("woken",)]


def session() -> PlainSession:
    return PlainSession(server_version="15.18", user="cube")


def test_routing_dialect_and_plain() -> None:
    executor, store, _ = make()
    command, step = executor.statement("/* c */ QUEUE LIST 'q'", session(), None)  # type: ignore[misc]
    assert command.tag == "QUEUE LIST" and isinstance(step, ResultSet)
    outcome = executor.statement("SELECT 1", session(), None)
    assert isinstance(outcome, PlainOutcome) and outcome.result is not None
    assert store.calls == ["QUEUE LIST"]


def test_placeholders_need_a_binder() -> None:
    executor, _store, _ = make()
    with pytest.raises(QueueError) as caught:
        executor.statement("QUEUE GET $1", session(), None)
    assert caught.value.sqlstate == "42P02"
    command, _step = executor.statement("QUEUE GET $1", session(), None, lambda params: ["q:a"])  # type: ignore[misc]
    assert command.key == "q:a"  # type: ignore[attr-defined]


def test_a_failed_block_refuses_all_but_its_end_on_both_routes() -> None:
    executor, store, _ = make()
    s = session()
    s.begin()
    assert executor.failed(s, RuntimeError("bug")).sqlstate == "XX000"
    assert s.tx_status == "E"
    for sql in ("QUEUE LIST 'q'", "SELECT 1", "SHOW TimeZone"):
        with pytest.raises(QueueError) as caught:
            executor.statement(sql, s, None)
        assert caught.value.sqlstate == "25P02"
    assert store.calls == []
    outcome = executor.statement("ROLLBACK", s, None)
    assert isinstance(outcome, PlainOutcome) and s.tx_status == "I"


def test_the_in_memory_path_makes_no_coroutine() -> None:
    executor, _store, _ = make("frame")
    assert not inspect.isawaitable(executor.run(parse("QUEUE LIST 'q'")))


@dataclass
class DeferredStore(FakeStore):
    """A store that leaves bulk work after each step, ``left`` slices of it."""

    left: int = 0

    @property
    def has_deferred(self) -> bool:
        return self.left > 0

    def run_deferred(self, budget: int | None = None) -> bool:
        self.left -= 1
        return self.left > 0


def test_deferred_work_is_drained_through_a_slot_attached_after_the_executor() -> None:
    """``has_deferred`` is read from the store the server's slot attaches, also when the
    executor was built before the attach (as the server builds it)."""
    from cubequeue.server.stores import StoreSlot

    async def main() -> tuple[int, int]:
        slot = StoreSlot("fake")
        executor = Executor(slot)
        store = DeferredStore()
        slot.attach(store)
        store.left = 3
        executor.run(parse("QUEUE GET 'q:1'"))
        before = store.left
        for _ in range(5):
            await asyncio.sleep(0)
        return before, store.left

    assert asyncio.run(main()) == (3, 0)
