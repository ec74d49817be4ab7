"""RESULT_BLOCKING on callbacks (``Executor.begin_blocking``) against the real in-memory
store: the answers, counts and withdrawals must be those of ``Executor.complete``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cubequeue.grammar import parse
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.grammar.results import ResultSet
from cubequeue.server.executor import BlockingWait, Executor, WaitFor
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

#: a real wait is resolved by its event, this only bounds a broken test
GENEROUS_S = 30.0


def make() -> tuple[Executor, MemoryStore, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    store = MemoryStore(FakeClock())
    executor = Executor(store, observe=lambda cmd, outcome, _s: seen.append((cmd, outcome)))
    return executor, store, seen


def added(executor: Executor, path: str) -> int:
    result = executor.run(parse(f"QUEUE ADD PRIORITY 1 '{path}' '{{}}'"))
    assert isinstance(result, ResultSet)
    return int(result.rows[0][0])  # type: ignore[arg-type]  # the id column


def blocking_step(executor: Executor, sql: str) -> WaitFor:
    step = executor.run(parse(sql))
    assert isinstance(step, WaitFor) and step.blocking
    return step


def waiters(store: MemoryStore) -> int:
    return int(store._queue.waiters.count)


async def settled(done: asyncio.Future[BlockingWait]) -> BlockingWait:
    return await asyncio.wait_for(done, GENEROUS_S)


def on_done_future() -> tuple[asyncio.Future[BlockingWait], Any]:
    done: asyncio.Future[BlockingWait] = asyncio.get_running_loop().create_future()

    def on_done(wait: BlockingWait) -> None:
        assert not done.done(), "on_done ran twice"
        done.set_result(wait)

    return done, on_done


def test_a_result_already_there_is_answered_at_once_without_on_done() -> None:
    executor, _store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        executor.run(parse("QUEUE RETRIEVE 'q:a'"))
        executor.run(parse(f"QUEUE ACK {qid} '\"r\"'"))
        done, on_done = on_done_future()
        wait = executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 5000 {qid}"),
                                       on_done)  # fmt: skip
        assert wait.done() and not wait.cancelled() and wait.exception() is None
        assert wait.result().rows[0][0] == '"r"'
        await asyncio.sleep(0)
        assert not done.done()  # the caller carries on inline

    asyncio.run(main())
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "ok")


def test_an_ack_wakes_the_wait_after_its_own_step_and_the_waiter_is_gone() -> None:
    executor, store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        done, on_done = on_done_future()
        wait = executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 60000 {qid}"),
                                       on_done)  # fmt: skip
        assert not wait.done() and waiters(store) == 1
        executor.run(parse("QUEUE RETRIEVE 'q:a'"))
        executor.run(parse(f"QUEUE ACK {qid} '\"woken\"'"))
        assert not done.done()  # the answer goes out on the next loop turn
        assert seen[-1] == ("QUEUE ACK", "ok")
        got = await settled(done)
        assert got is wait and not got.cancelled() and got.result().rows[0][0] == '"woken"'
        assert waiters(store) == 0
        assert not wait.cancel()  # done: nothing to cancel

    asyncio.run(main())
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "ok")


def test_a_timeout_answers_zero_rows_and_withdraws_the_waiter() -> None:
    executor, store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        done, on_done = on_done_future()
        wait = executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 1 {qid}"),
                                       on_done)  # fmt: skip
        got = await settled(done)
        assert got.result().rows == [] and [c.name for c in got.result().columns] == [
            c.name for c in wait.result().columns]
        assert waiters(store) == 0

    asyncio.run(main())
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "ok")


def test_the_timeout_is_capped_by_max_blocking_timeout() -> None:
    executor, store, _seen = make()
    executor.max_blocking_timeout_ms = 1

    async def main() -> None:
        qid = added(executor, "q:a")
        done, on_done = on_done_future()
        executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 600000 {qid}"),
                                on_done)  # fmt: skip
        assert (await settled(done)).result().rows == []
        assert waiters(store) == 0

    asyncio.run(main())


@pytest.mark.parametrize("woken_first", [False, True])
def test_cancel_withdraws_the_waiter_counts_57014_and_calls_on_done_later(
    woken_first: bool,
) -> None:
    """As a task: cancelled while waiting, or woken but not yet run (then it still
    cancels, so a shutdown or a CancelRequest at that moment is honoured)."""
    executor, store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        done, on_done = on_done_future()
        wait = executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 60000 {qid}"),
                                       on_done)  # fmt: skip
        if woken_first:
            executor.run(parse("QUEUE RETRIEVE 'q:a'"))
            executor.run(parse(f"QUEUE ACK {qid} '\"r\"'"))
        assert wait.cancel()
        assert not wait.cancel()
        assert not done.done()
        got = await settled(done)
        assert got.cancelled() and waiters(store) == 0
        await asyncio.sleep(0)  # a woken answer scheduled before the cancel stays unsent

    asyncio.run(main())
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "57014")
    assert seen.count(("QUEUE RESULT_BLOCKING", "ok")) == 0


def test_a_store_error_is_counted_and_carried() -> None:
    executor, store, seen = make()

    def refuse(*_args: object) -> ResultSet:
        raise LimitExceeded("too many waiters (a test's refusal)")

    store.result_blocking = refuse  # type: ignore[method-assign, assignment]  # a refusing store

    async def main() -> None:
        _done, on_done = on_done_future()
        step = blocking_step(executor, "QUEUE RESULT_BLOCKING 5000 'q:a'")
        wait = executor.begin_blocking(step, on_done)
        assert wait.done() and not wait.cancelled()
        exc = wait.exception()
        assert isinstance(exc, LimitExceeded) and exc.sqlstate == "54000"

    asyncio.run(main())
    assert seen == [("QUEUE RESULT_BLOCKING", "54000")]


def test_a_store_that_registers_later_is_awaited_then_woken() -> None:
    """An awaitable registration (the PostgreSQL store's) runs in a task; the wake-up
    and the counts are the same."""
    executor, store, seen = make()
    real = store.result_blocking

    def later(*args: Any) -> Any:
        async def registered() -> Any:
            await asyncio.sleep(0)
            return real(*args)

        return registered()

    store.result_blocking = later  # type: ignore[method-assign, assignment]  # a store that waits first

    async def main() -> None:
        qid = added(executor, "q:a")
        done, on_done = on_done_future()
        wait = executor.begin_blocking(blocking_step(executor, f"QUEUE RESULT_BLOCKING 60000 {qid}"),
                                       on_done)  # fmt: skip
        assert not wait.done()
        while waiters(store) == 0:
            await asyncio.sleep(0)
        executor.run(parse("QUEUE RETRIEVE 'q:a'"))
        executor.run(parse(f"QUEUE ACK {qid} '\"late\"'"))
        got = await settled(done)
        assert got.result().rows[0][0] == '"late"' and waiters(store) == 0

    asyncio.run(main())
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "ok")


# --- the awaited form (the WebSocket's shell): the same BlockingWait ---------------------


def test_complete_holds_the_same_blocking_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """One RESULT_BLOCKING for both wires: ``complete`` (the WebSocket's shell) runs the
    BlockingWait the PostgreSQL wire holds (before, it had its own future and wait_for)."""
    import cubequeue.server.executor as executor_module

    made: list[BlockingWait] = []

    class Counted(BlockingWait):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(executor_module, "BlockingWait", Counted)
    executor, store, seen = make()

    async def main() -> ResultSet:
        qid = added(executor, "q:a")
        task = asyncio.get_running_loop().create_task(executor.complete(
            blocking_step(executor, f"QUEUE RESULT_BLOCKING 60000 {qid}")))
        while waiters(store) == 0:
            await asyncio.sleep(0)
        executor.run(parse("QUEUE RETRIEVE 'q:a'"))
        executor.run(parse(f"QUEUE ACK {qid} '\"woken\"'"))
        return await asyncio.wait_for(task, GENEROUS_S)

    result = asyncio.run(main())
    assert result.rows[0][0] == '"woken"' and len(made) == 1 and waiters(store) == 0
    assert seen[-1] == ("QUEUE RESULT_BLOCKING", "ok")


def test_complete_answers_at_once_times_out_and_carries_errors() -> None:
    executor, store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        executor.run(parse("QUEUE RETRIEVE 'q:a'"))
        executor.run(parse(f"QUEUE ACK {qid} '\"r\"'"))
        at_once = await executor.complete(
            blocking_step(executor, f"QUEUE RESULT_BLOCKING 5000 {qid}"))
        assert at_once.rows[0][0] == '"r"'
        timed_out = await executor.complete(
            blocking_step(executor, "QUEUE RESULT_BLOCKING 1 'q:none'"))
        assert timed_out.rows == [] and waiters(store) == 0

        def refuse(*_args: object) -> ResultSet:
            raise LimitExceeded("too many waiters (a test's refusal)")

        store.result_blocking = refuse  # type: ignore[method-assign, assignment]
        with pytest.raises(LimitExceeded):
            await executor.complete(blocking_step(executor, "QUEUE RESULT_BLOCKING 5000 'q:b'"))

    asyncio.run(main())
    assert [s for s in seen if s[0] == "QUEUE RESULT_BLOCKING"] == [
        ("QUEUE RESULT_BLOCKING", "ok"), ("QUEUE RESULT_BLOCKING", "ok"),
        ("QUEUE RESULT_BLOCKING", "54000")]


def test_cancelling_the_awaiting_task_withdraws_the_waiter_and_counts_57014_once() -> None:
    executor, store, seen = make()

    async def main() -> None:
        qid = added(executor, "q:a")
        task = asyncio.get_running_loop().create_task(executor.complete(
            blocking_step(executor, f"QUEUE RESULT_BLOCKING 60000 {qid}")))
        while waiters(store) == 0:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):
            await asyncio.sleep(0)
        assert waiters(store) == 0

    asyncio.run(main())
    assert [s for s in seen if s[0] == "QUEUE RESULT_BLOCKING"] == [
        ("QUEUE RESULT_BLOCKING", "57014")]
