"""The one path from statement text to an answer, shared by both wires.

Both the PostgreSQL session and the WebSocket session hand statements here, so that
these rules exist once:

* **routing**: a statement whose first word is QUEUE, CACHE or SYS is the dialect
  (prepared through the grammar's one statement cache, keyed by the statement's shape,
  and bound with the grammar's binder); everything else is plain SQL (:mod:`cubequeue.server.sql`: session statements
  and SELECT over the system tables);
* **transaction status**: in a failed block ('E') every statement but COMMIT / END /
  ROLLBACK / ABORT is refused with 25P02, and any failure turns an open block into a
  failed one (:meth:`Executor.failed`), as PostgreSQL does;
* **metrics, the error log and the slow-command log** for every dialect command;
* **waiting**: a step the store cannot answer at once (``QUEUE RESULT_BLOCKING``, an
  awaitable from a store that waits for a disk or a database, a :class:`RowStream`) comes
  back as a :class:`WaitFor`; the wire's asyncio shell awaits :meth:`Executor.complete`
  and feeds the result back to its session. The in-memory store answers with a
  ``ResultSet`` at once, and that path creates no coroutine.

``RESULT_BLOCKING`` never blocks the event loop: the store answers at once or registers
a plain callback that resolves a future when the matching ACK commits. The wait is
bounded by ``--max-blocking-timeout`` on real time (the test clock does not move it).
Cancelling the awaiting task (CancelRequest, client timeout, disconnect) withdraws the
waiter from the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from cubequeue.grammar import Prepared, bind, first_word, is_dialect, prepare
from cubequeue.grammar.commands import Command, Param, QueueResultBlocking
from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.sql import PlainOutcome, PlainSession, describe_plain, run_plain
from cubequeue.server.sql.errors import UndefinedParameter
from cubequeue.server.sql.statements import TX_END_WORDS, in_failed_transaction
from cubequeue.storage.interface import RowStream

if TYPE_CHECKING:
    from cubequeue.server.sql.outcome import PlainDescription
    from cubequeue.storage.interface import Cancellable, StoreBackend

__all__ = [
    "TX_END_WORDS",
    "Binder",
    "Executor",
    "Observe",
    "Prepared",
    "Step",
    "WaitFor",
    "ends_block",
]

_log = logging.getLogger("cubequeue.command")
_internal_log = logging.getLogger("cubequeue.server")

#: the command name metrics and logs use for statements that did not parse
_PARSE = "(parse)"

#: ``observe(command_name, outcome, seconds)``; outcome is "ok" or the SQLSTATE.
Observe = Callable[[str, str, float], None]
#: a wire's own reading of its parameters: the grammar's placeholders → positional values
Binder = Callable[[tuple[Param, ...]], Sequence[Any]]


def _log_failure(command: str, error: QueueError) -> None:
    _log.info(
        "%s failed: %s (SQLSTATE %s)", command, error.message, error.sqlstate,
        extra={"command": command, "sqlstate": error.sqlstate},
    )


def ends_block(sql: str) -> bool:
    """True for COMMIT / END / ROLLBACK / ABORT: what a failed block still accepts."""
    return first_word(sql) in TX_END_WORDS


@dataclass(frozen=True, slots=True)
class WaitFor:
    """A step that has to wait: the wire's shell awaits ``executor.complete(wait)``.

    ``pending`` is what the store handed back (an awaitable or a row stream), or None
    for a ``QUEUE RESULT_BLOCKING`` that has not reached the store yet."""

    command: Command
    process_id: str | None
    pending: Awaitable[ResultSet | RowStream] | RowStream | None = None
    started: float = 0.0


#: what running a dialect command gives: its rows now, or a wait
Step = ResultSet | WaitFor


class _PlainTables:
    """The store as plain SQL reads it: a system table is a whole frame, the clock a call."""

    __slots__ = ("_store", "clock")

    def __init__(self, store: StoreBackend) -> None:
        self._store = store
        # until every store has the seam's now_ms, the in-memory one's clock is the same
        clock = getattr(store, "now_ms", None) or getattr(store, "clock")  # noqa: B009
        self.clock: Callable[[], int] = clock

    def system_table(self, name: str) -> ResultSet:
        table = self._store.system_table(name)
        if isinstance(table, ResultSet):
            return table
        if isinstance(table, RowStream):
            return table.collect()
        close = getattr(table, "close", None)
        if close is not None:  # a coroutine never awaited: say so quietly, not at GC
            close()
        raise InternalError(
            f"system.{name} of the {getattr(self._store, 'kind', '?')} store "
            "can only be read asynchronously"
        )


class Executor:
    """Routing, transaction checks, metrics and logs for both wires (module docstring)."""

    def __init__(
        self,
        store: StoreBackend,
        *,
        max_blocking_timeout_ms: int = 600_000,
        slow_command_ms: int = 1000,
        observe: Observe | None = None,
    ) -> None:
        self.store = store
        self.max_blocking_timeout_ms = max_blocking_timeout_ms
        self._slow_s = slow_command_ms / 1000
        self._observe = observe
        self._tables = _PlainTables(store)

    # --- statement text ----------------------------------------------------------------

    def statement(
        self,
        sql: str,
        session: PlainSession,
        process_id: str | None,
        binder: Binder | None = None,
        refuse: Callable[[str], None] | None = None,
    ) -> tuple[Command, Step] | PlainOutcome:
        """Run one statement of text: a dialect command's ``(command, step)``, or plain
        SQL's outcome. ``binder`` supplies placeholder values (none: 42P02); ``refuse``
        may reject plain SQL the wire does not serve before it runs."""
        if is_dialect(sql):
            if session.tx_status == "E":
                raise in_failed_transaction()
            prepared = self.prepare(sql)
            command = prepared.command
            if prepared.params:
                if binder is None:
                    raise UndefinedParameter(f"there is no parameter ${prepared.params[0].index}")
                command = bind(command, binder(prepared.params))
            return command, self.run(command, process_id)
        if refuse is not None:
            refuse(sql)
        return run_plain(sql, session, self._tables)

    def check_open(self, session: PlainSession, statement_ends_block: bool) -> None:
        """25P02 in a failed block, unless the statement ends the block."""
        if session.tx_status == "E" and not statement_ends_block:
            raise in_failed_transaction()

    def plain(
        self, sql: str, session: PlainSession, params: Sequence[str | None] = ()
    ) -> PlainOutcome:
        """A prepared plain statement with its parameters as text (the tx check included)."""
        return run_plain(sql, session, self._tables, params)

    def describe(self, sql: str, session: PlainSession) -> Prepared | PlainDescription:
        """A statement parsed for the extended protocol, without running it: the dialect's
        :class:`Prepared`, or plain SQL's parameters and columns."""
        if is_dialect(sql):
            return self.prepare(sql)
        return describe_plain(sql, session, self._tables)

    def failed(self, session: PlainSession | None, exc: BaseException) -> QueueError:
        """A statement failed: the error to answer (our bugs become a logged XX000), and
        an open transaction block becomes a failed one."""
        if not isinstance(exc, QueueError):
            _internal_log.error("internal error running a statement", exc_info=exc)
            exc = InternalError(f"internal error: {exc}")
        if session is not None:
            session.fail_transaction()
        return exc

    # --- dialect commands --------------------------------------------------------------

    def prepare(self, sql: str) -> Prepared:
        """Parse ``sql`` through the grammar's statement cache; a statement that does not
        parse (42601, …) is metered and logged as ``(parse)`` before it is raised."""
        try:
            return prepare(sql)
        except QueueError as exc:
            if self._observe is not None:
                self._observe(_PARSE, exc.sqlstate, 0.0)
            _log_failure(_PARSE, exc)
            raise

    def run(self, cmd: Command, process_id: str | None = None) -> Step:
        """Execute one bound command as one atomic store step: its rows, or a wait."""
        if isinstance(cmd, QueueResultBlocking):
            return WaitFor(cmd, process_id)
        started = time.perf_counter()
        try:
            result = self.store.execute(cmd, process_id)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, exc)
            raise
        except Exception as exc:
            raise self._internal(cmd, started, exc) from exc
        if isinstance(result, ResultSet):
            self._finish(cmd, "ok", started, None)
            return result
        return WaitFor(cmd, process_id, result, started)

    async def complete(self, wait: WaitFor) -> ResultSet:
        """The result of a :class:`WaitFor` (run by the wire's asyncio shell)."""
        cmd = wait.command
        if wait.pending is None:
            assert isinstance(cmd, QueueResultBlocking)
            return await self._blocking(cmd, wait.process_id)
        started = wait.started
        try:
            pending = wait.pending
            result = pending if isinstance(pending, RowStream) else await pending
            if isinstance(result, RowStream):
                result = await _gather(result)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, exc)
            raise
        except asyncio.CancelledError:
            self._observe_only(cmd, "57014", started)
            raise
        except Exception as exc:
            raise self._internal(cmd, started, exc) from exc
        self._finish(cmd, "ok", started, None)
        return result

    async def _blocking(self, cmd: QueueResultBlocking, process_id: str | None) -> ResultSet:
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
            if hasattr(outcome, "__await__"):  # a store that must wait before answering
                outcome = await cast("Awaitable[ResultSet | Cancellable]", outcome)
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

    # --- metrics and logs ----------------------------------------------------------------

    def _internal(self, cmd: Command, started: float, exc: Exception) -> InternalError:
        _log.error(
            "internal error running %s", cmd.tag, exc_info=exc, extra={"command": cmd.tag}
        )
        self._finish(cmd, InternalError.sqlstate, started, None)
        return InternalError(f"internal error: {exc}")

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


async def _gather(stream: RowStream) -> ResultSet:
    """A stream's rows, yielding to the event loop between slices so that other
    connections keep going while a large result is read."""
    rows = []
    for part in stream.slices:
        rows.extend(part)
        await asyncio.sleep(0)
    return ResultSet(stream.columns, rows)
