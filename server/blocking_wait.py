"""``QUEUE RESULT_BLOCKING``, held on plain callbacks, for both wires.

The store answers at once or registers a plain callback that it calls when the matching
ACK commits; :class:`BlockingWait` holds that waiter and one timer (the wait is bounded
by ``--max-blocking-timeout`` on real time: the test clock does not move it), so a wait
costs no task, coroutine or ``wait_for``, and its wake-up one event-loop callback. Both
wires' shells hold it directly (``Executor.begin_blocking``); ``Executor.complete``
awaits the same for a caller that wants a coroutine. Cancelling it (CancelRequest, a
client's timeout, a disconnect, shutdown) withdraws the waiter from the store.

A store that must wait before it answers or registers (the PostgreSQL store's session
and lookup: an awaitable) gets that step awaited in a task under ``statement_timeout``
(:func:`register_under_deadline`), so a store that stopped answering cannot wedge the
connection. Every wait is counted and logged once through the
:class:`~.statement_meter.StatementMeter`, never as slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.errors import QueryCanceled

if TYPE_CHECKING:
    from cubequeue.grammar.commands import QueueResultBlocking
    from cubequeue.server.statement_meter import Origin, StatementMeter
    from cubequeue.storage.interface import Cancellable, StoreBackend

__all__ = ["BlockingWait", "register_under_deadline"]


async def register_under_deadline(
    registration: Awaitable[ResultSet | Cancellable], timeout_ms: int
) -> ResultSet | Cancellable:
    """RESULT_BLOCKING's registration step under ``statement_timeout`` (57014). The
    timeout cancels the store's awaitable, and a store withdraws whatever it had
    registered when cancelled (the PostgreSQL store's ``_result_blocking`` does)."""
    if timeout_ms <= 0:
        return await registration
    deadline = asyncio.timeout(timeout_ms / 1000)
    try:
        async with deadline:
            return await registration
    except TimeoutError:
        if not deadline.expired():  # the store's own timeout: not the deadline's
            raise
        raise QueryCanceled("canceling statement due to statement timeout") from None


class BlockingWait:
    """One ``QUEUE RESULT_BLOCKING`` (the module docstring).

    It offers the part of ``asyncio.Task`` the wire's shell reads (``done``,
    ``cancel``, ``cancelled``, ``exception``, ``result``); ``on_done`` gets it once it is
    woken, timed out, cancelled or failed after :meth:`start` returned (a wait answered
    within :meth:`start` is done at once and ``on_done`` is not called)."""

    __slots__ = ("_cmd", "_error", "_loop", "_max_timeout_ms", "_meter", "_on_done",
                 "_origin", "_result", "_started", "_state", "_store", "_task", "_text",
                 "_timer", "_waiter")  # fmt: skip

    def __init__(self, store: StoreBackend, meter: StatementMeter, max_timeout_ms: int,
                 cmd: QueueResultBlocking, text: str, origin: Origin | None,
                 on_done: Callable[[BlockingWait], None]) -> None:  # fmt: skip
        self._store = store
        self._meter = meter
        self._max_timeout_ms = max_timeout_ms
        self._cmd = cmd
        self._text = text
        self._origin = origin
        self._on_done = on_done
        self._loop = asyncio.get_running_loop()
        self._started = time.perf_counter()
        #: "pending", "woken" (the ACK's rows came; on_done is scheduled), "done", "canceled"
        self._state = "pending"
        self._result: ResultSet | None = None
        self._error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiter: Cancellable | None = None
        self._task: asyncio.Task[ResultSet | Cancellable] | None = None

    # --- what the wire's shell reads (the asyncio.Task subset) -----------------------

    def done(self) -> bool:
        return self._state == "done" or self._state == "canceled"

    def cancelled(self) -> bool:
        return self._state == "canceled"

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> ResultSet:
        assert self._result is not None, "result() of a wait without one"
        return self._result

    def cancel(self) -> bool:
        """Withdraw the waiter (CancelRequest, disconnect, shutdown): 57014 is counted,
        and ``on_done`` runs on the next loop turn, as a cancelled task's callback does."""
        if self._state != "pending" and self._state != "woken":  # woken: as a task whose
            return False  # future is resolved but that has not run yet, it still cancels
        self._state = "canceled"
        self._release()
        if self._task is not None:
            self._task.cancel()
        self._meter.observe_only(self._cmd, "57014", self._started, self._text, self._origin)
        self._loop.call_soon(self._on_done, self)
        return True

    # --- the steps -----------------------------------------------------------------

    def start(self, process_id: str | None, timeout_ms: int) -> None:
        """Ask the store; ``timeout_ms`` (``statement_timeout``) bounds only a store's
        registration step, the wait itself is capped by ``--max-blocking-timeout``."""
        try:
            outcome = self._store.result_blocking(self._cmd, self._deliver, process_id)
        except QueueError as exc:
            self._meter.finish(self._cmd, exc.sqlstate, self._started, self._text, self._origin)
            self._fail(exc)
            return
        except Exception as exc:  # our bug or the store's: not counted, answered XX000
            self._fail(exc)
            return
        if not isinstance(outcome, ResultSet) and isinstance(outcome, Awaitable):
            # a store that must wait before answering (the ABC's check, cached per type:
            # inspect.isawaitable would add three isinstance calls to every wait)
            task = self._loop.create_task(register_under_deadline(outcome, timeout_ms))
            task.add_done_callback(self._registered)
            self._task = task
            return
        self._answer(outcome)

    def _registered(self, task: asyncio.Task[ResultSet | Cancellable]) -> None:
        self._task = None
        if self._state != "pending" or task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            self._answer(task.result())
            if self.done():
                self._on_done(self)
            return
        if isinstance(exc, QueueError):
            self._meter.finish(self._cmd, exc.sqlstate, self._started, self._text, self._origin)
        self._fail(exc)
        self._on_done(self)

    def _answer(self, outcome: ResultSet | Cancellable) -> None:
        if isinstance(outcome, ResultSet):  # answered at once
            self._meter.finish(self._cmd, "ok", self._started, self._text, self._origin)
            self._result = outcome
            self._state = "done"
            return
        self._waiter = outcome
        if self._result is not None:  # woken during the registration itself
            self._state = "woken"
            self._loop.call_soon(self._woken)
            return
        cmd = self._cmd
        assert isinstance(cmd.timeout, int), "bind parameters before running"
        timeout_s = min(cmd.timeout, self._max_timeout_ms) / 1000
        self._timer = self._loop.call_later(timeout_s, self._timed_out)

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._state = "done"

    def _deliver(self, result: ResultSet) -> None:
        """The store's callback, inside the step that woke it (the ACK): the answer goes
        out on the next loop turn, after that step has been answered and counted."""
        if self._state != "pending" or self._result is not None:
            return
        self._result = result
        if self._waiter is None and self._task is None:  # still inside result_blocking
            return
        self._state = "woken"
        self._loop.call_soon(self._woken)

    def _woken(self) -> None:
        if self._state != "woken":
            return
        self._finish_wait()

    def _timed_out(self) -> None:
        self._timer = None
        if self._state != "pending":
            return
        self._result = ResultSet(self._cmd.result_columns(), [])
        self._finish_wait()

    def _finish_wait(self) -> None:
        self._state = "done"
        self._release()
        self._meter.observe_only(self._cmd, "ok", self._started, self._text, self._origin)
        self._on_done(self)

    def _release(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.cancel()
