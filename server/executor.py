"""The one path from a dialect statement to the store, shared by both wires.

Both the PostgreSQL wire and Cube Store's WebSocket protocol prepare statement text
here (parsed once per distinct text, through the grammar's cache), bind parameters with
the grammar's binder, and run the bound command through :meth:`Executor.run` or, for
``QUEUE RESULT_BLOCKING``, :meth:`Executor.run_blocking`. That keeps metrics, the
slow-command log, the error log and the blocking-wait rules in one place.

``RESULT_BLOCKING`` never blocks the event loop: the store answers at once or registers
a plain callback (dialect doc §8 rule 13) that resolves this coroutine's future when the
matching ACK commits. The wait is bounded by ``--max-blocking-timeout`` on real time
(the test clock does not move it). Cancelling the awaiting task (CancelRequest, client
timeout, disconnect) withdraws the waiter from the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cubequeue.grammar import param_slots, parse_cached
from cubequeue.grammar.commands import Command, Param, QueueResultBlocking
from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import Column, ResultSet

if TYPE_CHECKING:
    from cubequeue.storage.store import Store

__all__ = ["Executor", "Observe", "Prepared"]

_log = logging.getLogger("cubequeue.command")

#: distinct statement texts kept prepared (oldest dropped first)
_PREPARE_CACHE_SIZE = 4096
#: the command name metrics and logs use for statements that did not parse
_PARSE = "(parse)"


def _log_failure(command: str, error: QueueError) -> None:
    _log.info(
        "%s failed: %s (SQLSTATE %s)", command, error.message, error.sqlstate,
        extra={"command": command, "sqlstate": error.sqlstate},
    )

#: ``observe(command_name, outcome, seconds)``; outcome is "ok" or the SQLSTATE.
Observe = Callable[[str, str, float], None]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A parsed statement: its command template, placeholders and result schema."""

    sql: str
    command: Command
    params: tuple[Param, ...]
    columns: tuple[Column, ...]


class Executor:
    def __init__(
        self,
        store: Store,
        *,
        max_blocking_timeout_ms: int = 600_000,
        slow_command_ms: int = 1000,
        observe: Observe | None = None,
    ) -> None:
        self.store = store
        self.max_blocking_timeout_ms = max_blocking_timeout_ms
        self._slow_s = slow_command_ms / 1000
        self._observe = observe
        self._prepared: dict[str, Prepared] = {}

    def prepare(self, sql: str) -> Prepared:
        """Parse ``sql`` (cached by text); raises :class:`QueueError` (42601, …)."""
        prepared = self._prepared.get(sql)
        if prepared is None:
            try:
                command = parse_cached(sql)
            except QueueError as exc:
                if self._observe is not None:
                    self._observe(_PARSE, exc.sqlstate, 0.0)
                _log_failure(_PARSE, exc)
                raise
            prepared = Prepared(sql, command, tuple(param_slots(command)), command.result_columns())
            if len(self._prepared) >= _PREPARE_CACHE_SIZE:
                self._prepared.pop(next(iter(self._prepared)))
            self._prepared[sql] = prepared
        return prepared

    def run(self, cmd: Command, process_id: str | None = None) -> ResultSet:
        """Execute one bound command as one atomic store step."""
        started = time.perf_counter()
        try:
            result = self.store.execute(cmd, process_id)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, exc)
            raise
        except Exception as exc:
            _log.exception("internal error running %s", cmd.tag, extra={"command": cmd.tag})
            self._finish(cmd, InternalError.sqlstate, started, None)
            raise InternalError(f"internal error: {exc}") from exc
        self._finish(cmd, "ok", started, None)
        return result

    async def run_blocking(
        self, cmd: QueueResultBlocking, process_id: str | None = None
    ) -> ResultSet:
        """``QUEUE RESULT_BLOCKING``: the row at once, the ACK's row, or zero rows."""
        assert isinstance(cmd.timeout, int), "bind parameters before running"
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ResultSet] = loop.create_future()

        def deliver(result: ResultSet) -> None:
            if not future.done():
                future.set_result(result)

        try:
            outcome = self.store.result_blocking(cmd, deliver, process_id)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, exc)
            raise
        if isinstance(outcome, ResultSet):
            self._finish(cmd, "ok", started, None)
            return outcome
        timeout_s = min(cmd.timeout, self.max_blocking_timeout_ms) / 1000
        try:
            result = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            result = ResultSet(cmd.result_columns(), [])
        except asyncio.CancelledError:
            self._observe_only(cmd, "57014", started)
            raise
        finally:
            outcome.cancel()
        self._observe_only(cmd, "ok", started)
        return result

    def _finish(
        self, cmd: Command, outcome: str, started: float, error: QueueError | None
    ) -> None:
        elapsed = time.perf_counter() - started
        if self._observe is not None:
            self._observe(cmd.tag, outcome, elapsed)
        if error is not None:
            _log_failure(cmd.tag, error)
        if elapsed >= self._slow_s:
            _log.warning(
                "slow command %s: %.1f ms", cmd.tag, elapsed * 1000,
                extra={"command": cmd.tag, "ms": round(elapsed * 1000, 3)},
            )

    def _observe_only(self, cmd: Command, outcome: str, started: float) -> None:
        """Blocking waits are metered but never "slow": waiting is their job."""
        if self._observe is not None:
            self._observe(cmd.tag, outcome, time.perf_counter() - started)
