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
* **metrics and logs for every statement**, dialect or plain SQL, on both wires: each
  is counted once in ``cubequeue_commands_total`` (the dialect's command tag, or plain
  SQL's first word upper-cased; outcome "ok" or the SQLSTATE) and logged once with
  :func:`~cubequeue.server.logs.log_statement` (DEBUG with its duration, WARNING with its
  SQLSTATE when refused or failed), naming the connection (:class:`Origin`); a dialect
  command over ``--slow-command-ms`` is also logged as slow;
* **waiting**: a step the store cannot answer at once (``QUEUE RESULT_BLOCKING``, an
  awaitable from a store that waits for a disk or a database, a :class:`RowStream`) comes
  back as a :class:`WaitFor`; the wire's asyncio shell awaits :meth:`Executor.complete`
  and feeds the result back to its session. The in-memory store answers with a
  ``ResultSet`` at once, and that path creates no coroutine. Plain SQL that reads a system
  table such a store answers later comes back as a :class:`PlainWait` (the same await);
  it completes with a :class:`PlainAnswer`, the statement's whole outcome.

``RESULT_BLOCKING`` never blocks the event loop: the store answers at once or registers
a plain callback that resolves a future when the matching ACK commits. The wait is
bounded by ``--max-blocking-timeout`` on real time (the test clock does not move it).
Cancelling the awaiting task (CancelRequest, client timeout, disconnect) withdraws the
waiter from the store.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cubequeue.grammar import Prepared, bind, first_word, is_dialect, prepare
from cubequeue.grammar.commands import Command, Param, QueueResultBlocking
from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import EMPTY, ResultSet, Row
from cubequeue.server.errors import QueryCanceled
from cubequeue.server.logs import log_statement, statement_log
from cubequeue.server.row_sink import RowSink, close_stream, stream_rows
from cubequeue.server.sql import PlainOutcome, PlainSession, describe_plain, run_plain
from cubequeue.server.sql.errors import UndefinedParameter
from cubequeue.server.sql.limits import MAX_SQL_STATEMENT_BYTES, too_many_rows
from cubequeue.server.sql.statements import TX_END_WORDS, in_failed_transaction
from cubequeue.server.stores import StoreSlot
from cubequeue.storage.capabilities import Capabilities
from cubequeue.storage.interface import RowStream

if TYPE_CHECKING:
    from cubequeue.server.sql.outcome import PlainDescription
    from cubequeue.storage.capabilities import DefersWork
    from cubequeue.storage.interface import Cancellable, StoreBackend

__all__ = [
    "TX_END_WORDS",
    "Binder",
    "BlockingWait",
    "Executor",
    "Observe",
    "Origin",
    "PlainAnswer",
    "PlainWait",
    "Prepared",
    "Step",
    "WaitFor",
    "ends_block",
]

_log = logging.getLogger("cubequeue.command")
_internal_log = logging.getLogger("cubequeue.server")

#: the command name metrics and logs use for statements that did not parse
_PARSE = "(parse)"
#: statement texts up to this length keep their route (Executor._route), at most
#: _ROUTES_MAX of them (the map is cleared when full: a client sending ever new short
#: texts costs one first-word read each, as before)
_ROUTE_TEXT_MAX = 256
_ROUTES_MAX = 4096
#: how Cube's dialect texts begin: the first word is then the dialect's, whatever follows
_DIALECT_HEADS = ("QUEUE ", "CACHE ", "SYS ")
#: constant plain texts kept (Executor._constants): spellings of three statements
_MAX_CONSTANTS = 64

#: ``observe(command_name, outcome, seconds)``; outcome is "ok" or the SQLSTATE.
Observe = Callable[[str, str, float], None]
#: a wire's own reading of its parameters: the grammar's placeholders → positional values
Binder = Callable[[tuple[Param, ...]], Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Origin:
    """Who sent a statement, for its log line: the wire, the connection and its user."""

    protocol: str
    conn_id: int | None = None
    peer: str | None = None
    user: str | None = None


def _outcome_of(exc: BaseException) -> str:
    return exc.sqlstate if isinstance(exc, QueueError) else InternalError.sqlstate


def _plain_command(sql: str) -> str:
    """Plain SQL's metric and log name: its first word upper-cased (the metrics cap the
    distinct names, so a client inventing words cannot grow the exposition)."""
    return first_word(sql).upper() or "(empty)"


def ends_block(sql: str) -> bool:
    """True for COMMIT / END / ROLLBACK / ABORT: what a failed block still accepts."""
    return first_word(sql) in TX_END_WORDS


@dataclass(frozen=True, slots=True)
class WaitFor:
    """A step that has to wait: the wire's shell awaits ``executor.complete(wait)``.

    ``pending`` is what the store handed back (an awaitable or a row stream), or None
    for a ``QUEUE RESULT_BLOCKING`` that has not reached the store yet. ``command`` is
    None only for plain SQL (:class:`PlainWait`)."""

    command: Command | None
    process_id: str | None
    pending: Awaitable[ResultSet | RowStream] | RowStream | None = None
    started: float = 0.0
    #: the statement's text and sender, for its log line once the wait ends
    text: str = ""
    origin: Origin | None = None

    @property
    def blocking(self) -> bool:
        """A ``QUEUE RESULT_BLOCKING`` (held for as long as it waits), not a store's wait."""
        return self.pending is None and self.command is not None


#: what running a dialect command gives: its rows now, or a wait
Step = ResultSet | WaitFor

#: one system table as the store handed it back for a plain statement
_Pending = Awaitable[ResultSet | RowStream]


@dataclass(frozen=True, slots=True)
class PlainWait(WaitFor):
    """Plain SQL that read a system table the store answers later (a durable read that
    saw an unwritten record, every read of the PostgreSQL store).

    ``tables`` are those awaitables by table name; :meth:`Executor.complete` awaits all
    of them together, then evaluates the statement synchronously over the frames, exactly
    as it would have run, and completes with a :class:`PlainAnswer`."""

    tables: tuple[tuple[str, _Pending], ...] = ()
    #: the statement's plain session and its parameters as text, to evaluate it later
    session: PlainSession | None = field(default=None, kw_only=True)
    params: tuple[str | None, ...] = field(default=(), kw_only=True)


@dataclass(frozen=True, slots=True)
class PlainAnswer(ResultSet):
    """What a :class:`PlainWait` completes with: a ``ResultSet`` like every wait's result
    (its rows, so a wire that only sends rows needs nothing else: the WebSocket), carrying
    the whole :class:`PlainOutcome` for the wire that sends tags and types (PostgreSQL)."""

    outcome: PlainOutcome | None = None


def plain_outcome(result: ResultSet) -> PlainOutcome:
    """The outcome a completed :class:`PlainWait` carries (a wire's resume path)."""
    assert isinstance(result, PlainAnswer) and result.outcome is not None, "a PlainWait's result"
    return result.outcome


class _TablesPending(Exception):  # a signal, not an error: never reaches a client
    """Raised out of plain SQL's synchronous evaluation when the store answers a system
    table with an awaitable: the executor turns it into a :class:`PlainWait`. Plain SQL
    catches no exception of this kind (only its own parse errors), so it unwinds cleanly;
    evaluation has no side effects, so it is simply run again over the fetched frames."""

    def __init__(self, name: str, table: _Pending) -> None:
        super().__init__(name)
        self.tables = ((name, table),)


#: default of ``--max-sql-rows``, the rows a plain SELECT may read from one system table: plain SQL is
#: evaluated in one go on the event loop (sorting, grouping), so a table larger than this
#: is refused with 54000 before any row is built; Cube's driver never reads system tables
MAX_SQL_ROWS = 100_000


class _PlainTables:
    """The store as plain SQL reads it: a system table is a whole frame, the clock a call."""

    __slots__ = ("_store", "clock", "max_sql_rows", "max_sql_statement_bytes")

    def __init__(self, store: StoreBackend, max_sql_statement_bytes: int,
                 max_sql_rows: int = MAX_SQL_ROWS) -> None:
        self._store = store
        #: ``--max-sql-statement-bytes``, read by plain SQL before sqlglot parses
        self.max_sql_statement_bytes = max_sql_statement_bytes
        self.max_sql_rows = max_sql_rows
        self.clock: Callable[[], int] = store.now_ms

    def system_table(self, name: str) -> ResultSet:
        table = self._store.system_table(name)
        if isinstance(table, ResultSet):
            self._check_rows(name, len(table.rows))
            return table
        if isinstance(table, RowStream):
            if table.length is not None:  # refused before a row is built
                self._check_rows(name, table.length)
            rows: list[Row] = []
            for part in table.slices:
                rows.extend(part)
                self._check_rows(name, len(rows))
            return ResultSet(table.columns, rows)
        raise _TablesPending(name, table)

    async def fetch(self, name: str, table: _Pending) -> ResultSet:
        """A table the store answered later, as a frame: the same row bound, a stream's
        slices read one per event-loop turn."""
        answer = await table
        if isinstance(answer, ResultSet):
            self._check_rows(name, len(answer.rows))
            return answer
        if answer.length is not None:
            self._check_rows(name, answer.length)
        rows: list[Row] = []
        for part in answer.slices:
            rows.extend(part)
            self._check_rows(name, len(rows))
            await asyncio.sleep(0)
        return ResultSet(answer.columns, rows)

    def _check_rows(self, name: str, rows: int) -> None:
        if rows > self.max_sql_rows:
            raise too_many_rows(name, self.max_sql_rows)


class _FetchedTables(_PlainTables):
    """The store as a :class:`PlainWait` re-evaluates over it: the frames fetched so far
    first (a subclass, so the synchronous path pays nothing for it)."""

    __slots__ = ("frames",)

    def __init__(self, tables: _PlainTables, frames: dict[str, ResultSet]) -> None:
        super().__init__(tables._store, tables.max_sql_statement_bytes, tables.max_sql_rows)
        self.frames = frames

    def system_table(self, name: str) -> ResultSet:
        frame = self.frames.get(name)
        return frame if frame is not None else super().system_table(name)


class Executor:
    """Routing, transaction checks, metrics and logs for both wires (module docstring)."""

    def __init__(
        self,
        store: StoreBackend,
        *,
        max_blocking_timeout_ms: int = 600_000,
        slow_command_ms: int = 1000,
        max_sql_statement_bytes: int = MAX_SQL_STATEMENT_BYTES,
        max_sql_rows: int = MAX_SQL_ROWS,
        observe: Observe | None = None,
        on_stream: Callable[[], None] | None = None,
    ) -> None:
        self.max_blocking_timeout_ms = max_blocking_timeout_ms
        #: called when a step hands back a stream (a large listing), whose order copy the
        #: server's heap policy keeps out of the young generations (server/heap.py)
        self._on_stream = on_stream
        self._slow_s = slow_command_ms / 1000
        self._observe = observe
        self._max_sql_statement_bytes = max_sql_statement_bytes
        self._max_sql_rows = max_sql_rows
        #: a slice of the store's deferred bulk work is scheduled on the loop
        self._draining = False
        #: short statement texts → their route (:meth:`_route`)
        self._routes: dict[str, str] = {}
        #: texts whose plain outcome is constant (``SELECT 1``) → it: answered without
        #: plain SQL, outside a failed block (there plain SQL refuses it with 25P02)
        self._constants: dict[str, PlainOutcome] = {}
        #: the store statements run on (the server's slot's, once attached) and what it
        #: can do, set by :meth:`_use`
        self.store: StoreBackend
        self._deferred: DefersWork | None
        self._tables: _PlainTables
        if isinstance(store, StoreSlot):
            store.watch(self._use)  # the attached store itself, not the slot
        else:
            self._use(store, Capabilities.of(store))

    def _use(self, store: StoreBackend, capabilities: Capabilities) -> None:
        """Run statements on ``store`` (the server's slot attached it, or it was given)."""
        self.store = store
        self._deferred = capabilities.defers_work
        self._tables = _PlainTables(store, self._max_sql_statement_bytes, self._max_sql_rows)

    # --- statement text ----------------------------------------------------------------

    def statement(
        self,
        sql: str,
        session: PlainSession,
        process_id: str | None,
        binder: Binder | None = None,
        params: Sequence[str | None] = (),
        *,
        origin: Origin | None = None,
    ) -> tuple[Command, Step] | PlainOutcome | PlainWait:
        """Run one statement of text: a dialect command's ``(command, step)``, or plain
        SQL's outcome (or its wait). ``binder`` supplies the dialect's placeholder values
        (none: 42P02), ``params`` plain SQL's, as text."""
        plain_name = self._route(sql)
        if plain_name:
            return self._plain(sql, session, params, origin, plain_name)
        prepared = None
        try:
            if session.tx_status == "E":
                raise in_failed_transaction()
            prepared = self.prepare(sql, origin)
            command = prepared.command
            if prepared.params:
                if binder is None:
                    raise UndefinedParameter(f"there is no parameter ${prepared.params[0].index}")
                command = bind(command, binder(prepared.params))
        except QueueError as exc:
            if prepared is not None or exc.sqlstate == "25P02":  # prepare logs its own
                name = prepared.command.tag if prepared is not None else _plain_command(sql)
                self._account(name, sql, exc.sqlstate, 0.0, origin)
            raise
        return command, self.run(command, process_id, text=sql, origin=origin)

    def check_open(
        self, session: PlainSession, statement_ends_block: bool, *, text: str = "",
        origin: Origin | None = None,
    ) -> None:
        """25P02 in a failed block, unless the statement ends the block (counted and
        logged under the statement's first word when ``text`` is given)."""
        if session.tx_status == "E" and not statement_ends_block:
            if text:
                self._account(_plain_command(text), text, "25P02", 0.0, origin)
            raise in_failed_transaction()

    def plain(
        self, sql: str, session: PlainSession, params: Sequence[str | None] = (), *,
        origin: Origin | None = None,
    ) -> PlainOutcome | PlainWait:
        """A prepared plain statement with its parameters as text (the tx check included)."""
        return self._plain(sql, session, params, origin)

    def describe(
        self, sql: str, session: PlainSession, *, origin: Origin | None = None
    ) -> Prepared | PlainDescription:
        """A statement parsed for the extended protocol, without running it: the dialect's
        :class:`Prepared`, or plain SQL's parameters and columns. A statement refused
        here (0A000 at Parse) is counted and logged, since it never reaches Execute."""
        if is_dialect(sql):
            return self.prepare(sql, origin)
        try:
            return describe_plain(sql, session, self._tables)
        except Exception as exc:
            self._account(_plain_command(sql), sql, _outcome_of(exc), 0.0, origin)
            raise

    def _route(self, sql: str) -> str:
        """"" for a dialect statement, else plain SQL's metric and log name. Short texts
        (``SELECT 1``, ``BEGIN``, a prepared statement's text) recur on every round
        trip, so their route is kept (per executor, bounded): reading the first word
        costs more than the rest of a ``SELECT 1``'s routing."""
        if sql.startswith(_DIALECT_HEADS):  # Cube's texts: no map (their keys are unique)
            return ""
        route = self._routes.get(sql)
        if route is None:
            route = "" if is_dialect(sql) else _plain_command(sql)
            if len(sql) <= _ROUTE_TEXT_MAX:
                if len(self._routes) >= _ROUTES_MAX:
                    self._routes.clear()
                self._routes[sql] = route
        return route

    def _plain(
        self, sql: str, session: PlainSession, params: Sequence[str | None],
        origin: Origin | None, name: str = "",
    ) -> PlainOutcome | PlainWait:
        name = name or self._route(sql) or _plain_command(sql)
        started = time.perf_counter()
        constant = self._constants.get(sql)
        if constant is not None and not params and session.tx_status != "E":
            self._account(name, sql, "ok", time.perf_counter() - started, origin)
            return constant
        try:
            outcome = run_plain(sql, session, self._tables, params)
        except _TablesPending as pending:  # counted and logged once the wait ends
            return PlainWait(None, session.process_id, started=started, text=sql,
                             origin=origin, tables=pending.tables, session=session,
                             params=tuple(params))
        except Exception as exc:
            self._account(name, sql, _outcome_of(exc), time.perf_counter() - started, origin)
            raise
        self._account(name, sql, "ok", time.perf_counter() - started, origin)
        if outcome.constant and not params and len(sql) <= _ROUTE_TEXT_MAX:
            if len(self._constants) >= _MAX_CONSTANTS:
                self._constants.clear()
            self._constants[sql] = outcome
        return outcome

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

    def prepare(self, sql: str, origin: Origin | None = None) -> Prepared:
        """Parse ``sql`` through the grammar's statement cache; a statement that does not
        parse (42601, …) is metered and logged as ``(parse)`` before it is raised."""
        try:
            return prepare(sql)
        except QueueError as exc:
            self._account(_PARSE, sql, exc.sqlstate, 0.0, origin)
            raise

    def run(
        self, cmd: Command, process_id: str | None = None, *, text: str = "",
        origin: Origin | None = None,
    ) -> Step:
        """Execute one bound command as one atomic store step: its rows, or a wait.
        ``text`` and ``origin`` are for its log line (the text defaults to the tag)."""
        text = text or cmd.tag
        if isinstance(cmd, QueueResultBlocking):
            return WaitFor(cmd, process_id, text=text, origin=origin)
        started = time.perf_counter()
        try:
            result = self.store.execute(cmd, process_id)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, text, origin)
            raise
        except Exception as exc:
            raise self._internal(cmd, started, exc, text, origin) from exc
        deferred = self._deferred
        if deferred is not None and not self._draining and deferred.has_deferred:
            self._drain_soon()
        if isinstance(result, ResultSet):
            self._finish(cmd, "ok", started, text, origin)
            return result
        if self._on_stream is not None and isinstance(result, RowStream):
            self._on_stream()
        return WaitFor(cmd, process_id, result, started, text, origin)

    def begin_blocking(
        self, wait: WaitFor, on_done: Callable[[BlockingWait], None], timeout_ms: int = 0
    ) -> BlockingWait:
        """Start a ``QUEUE RESULT_BLOCKING`` (``wait.blocking``) on callbacks: the
        :class:`BlockingWait` is done at once when the store answered at once (its rows,
        or the error), else ``on_done`` gets it once it is woken, timed out or
        cancelled. The same answers, counts and log lines as :meth:`complete`, without
        its task; ``timeout_ms`` bounds only a store's registration step, as there."""
        cmd = wait.command
        assert isinstance(cmd, QueueResultBlocking) and wait.pending is None
        blocking = BlockingWait(self, cmd, wait.text or cmd.tag, wait.origin, on_done)
        blocking.start(wait.process_id, timeout_ms)
        return blocking

    def _drain_soon(self) -> None:
        """Run the bulk work a step left (a PURGE's or TRUNCATE's release, a sweep
        backlog) one budget per event-loop turn, so it finishes while no statement comes
        and other connections' I/O runs between slices."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the loop (tests): the next steps do it
            return
        self._draining = True
        loop.call_soon(self._drain_step, loop)

    def _drain_step(self, loop: asyncio.AbstractEventLoop) -> None:
        deferred = self._deferred
        try:
            more = deferred is not None and deferred.run_deferred()
        except Exception:
            _internal_log.exception("deferred bulk work failed")
            more = False
        if more:
            loop.call_soon(self._drain_step, loop)
        else:
            self._draining = False

    async def complete(
        self, wait: WaitFor, timeout_ms: int = 0, sink: RowSink | None = None
    ) -> ResultSet:
        """The result of a :class:`WaitFor` (run by the wire's asyncio shell). A store
        step still waiting after ``timeout_ms`` (the session's ``statement_timeout``;
        0: none) is canceled with 57014, so a store that stopped answering cannot wedge
        a connection; RESULT_BLOCKING keeps its own cap, ``--max-blocking-timeout``, and
        the deadline bounds only its registration with the store.

        A :class:`RowStream` goes to ``sink`` slice by slice when the wire gives one
        (the answer is then a :class:`StreamedRows` carrying the count), else it is
        gathered into one frame; the deadline, the metrics and the slow log cover the
        writing too, and the stream is closed however it ends."""
        if isinstance(wait, PlainWait):
            return await self._complete_plain(wait, timeout_ms)
        cmd = wait.command
        assert cmd is not None, "only a PlainWait has no command"
        text, origin = wait.text or cmd.tag, wait.origin
        if wait.pending is None:
            assert isinstance(cmd, QueueResultBlocking)
            return await self._blocking(cmd, wait.process_id, text, origin, timeout_ms)
        started = wait.started
        deadline = asyncio.timeout(timeout_ms / 1000 if timeout_ms > 0 else None)
        try:
            async with deadline:
                pending = wait.pending
                result = pending if isinstance(pending, RowStream) else await pending
                if isinstance(result, RowStream):
                    result = await (_gather(result) if sink is None
                                    else stream_rows(result, sink))
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, text, origin)
            raise
        except asyncio.CancelledError:
            self._observe_only(cmd, "57014", started, text, origin)
            raise
        except TimeoutError as exc:
            if not deadline.expired():  # the store's own timeout: its bug or its outage
                raise self._internal(cmd, started, exc, text, origin) from exc
            self._finish(cmd, QueryCanceled.sqlstate, started, text, origin)
            raise QueryCanceled("canceling statement due to statement timeout") from None
        except Exception as exc:
            raise self._internal(cmd, started, exc, text, origin) from exc
        self._finish(cmd, "ok", started, text, origin)
        return result

    async def _complete_plain(self, wait: PlainWait, timeout_ms: int) -> PlainAnswer:
        """Fetch every table the statement waits for, concurrently, then evaluate it over
        the frames; the same ``statement_timeout`` as a store step, one count and log line."""
        sql, origin, session = wait.text, wait.origin, wait.session
        assert session is not None, "a PlainWait carries its session"
        name = _plain_command(sql)
        deadline = asyncio.timeout(timeout_ms / 1000 if timeout_ms > 0 else None)
        frames: dict[str, ResultSet] = {}
        tables = self._tables
        try:
            async with deadline:
                pending = wait.tables
                while True:  # a pass that finds another late table fetches it too
                    if len(pending) == 1:  # one table (every plan today): no task
                        fetched = [await tables.fetch(*pending[0])]
                    else:
                        fetched = await asyncio.gather(
                            *(tables.fetch(table, answer) for table, answer in pending))
                    frames.update(zip((table for table, _ in pending), fetched, strict=True))
                    try:
                        outcome = run_plain(sql, session, _FetchedTables(tables, frames),
                                            wait.params)
                        break
                    except _TablesPending as more:
                        pending = more.tables
        except QueueError as exc:
            self._account(name, sql, exc.sqlstate, time.perf_counter() - wait.started, origin)
            raise
        except asyncio.CancelledError:
            self._account(name, sql, "57014", time.perf_counter() - wait.started, origin)
            raise
        except TimeoutError as exc:
            if deadline.expired():
                self._account(name, sql, QueryCanceled.sqlstate,
                              time.perf_counter() - wait.started, origin)
                raise QueryCanceled("canceling statement due to statement timeout") from None
            raise self._plain_internal(name, wait, exc) from exc
        except Exception as exc:
            raise self._plain_internal(name, wait, exc) from exc
        self._account(name, sql, "ok", time.perf_counter() - wait.started, origin)
        result = outcome.result if outcome.result is not None else EMPTY
        return PlainAnswer(result.columns, result.rows, outcome)

    def _plain_internal(self, name: str, wait: PlainWait, exc: Exception) -> InternalError:
        _log.error("internal error running %s", name, exc_info=exc, extra={"command": name})
        self._account(name, wait.text, InternalError.sqlstate,
                      time.perf_counter() - wait.started, wait.origin)
        return InternalError(f"internal error: {exc}")

    async def _blocking(
        self, cmd: QueueResultBlocking, process_id: str | None, text: str,
        origin: Origin | None, timeout_ms: int = 0,
    ) -> ResultSet:
        """``QUEUE RESULT_BLOCKING``: the row at once, the ACK's row, or zero rows. A
        store that must wait before it answers or registers (the PostgreSQL store's
        session and lookup) gets ``timeout_ms`` (``statement_timeout``) for that step
        only: 57014 after it, so a store that stopped answering cannot wedge the
        connection; the wait itself is capped by ``--max-blocking-timeout``."""
        assert isinstance(cmd.timeout, int), "bind parameters before running"
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ResultSet] = loop.create_future()

        def deliver(result: ResultSet) -> None:
            if not future.done():
                future.set_result(result)

        try:
            outcome = self.store.result_blocking(cmd, deliver, process_id)
            if not isinstance(outcome, ResultSet) and inspect.isawaitable(outcome):
                # a store that must wait before answering
                outcome = await self._registered(outcome, timeout_ms)
        except QueueError as exc:
            self._finish(cmd, exc.sqlstate, started, text, origin)
            raise
        except asyncio.CancelledError:
            self._observe_only(cmd, "57014", started, text, origin)
            raise
        if isinstance(outcome, ResultSet):
            self._finish(cmd, "ok", started, text, origin)
            return outcome
        timeout_s = min(cmd.timeout, self.max_blocking_timeout_ms) / 1000
        try:
            result = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            result = ResultSet(cmd.result_columns(), [])
        except asyncio.CancelledError:
            self._observe_only(cmd, "57014", started, text, origin)
            raise
        finally:
            outcome.cancel()
        self._observe_only(cmd, "ok", started, text, origin)
        return result

    @staticmethod
    async def _registered(
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

    # --- metrics and logs ----------------------------------------------------------------

    def _account(
        self, name: str, text: str, outcome: str, seconds: float, origin: Origin | None
    ) -> None:
        """The one count and the one log line of a statement (the line's arguments are
        built only when its level is on: DEBUG, for a statement that succeeded, is
        usually off)."""
        if self._observe is not None:
            self._observe(name, outcome, seconds)
        if outcome == "ok":
            if not statement_log.isEnabledFor(logging.DEBUG):
                return
            sqlstate = None
        else:
            sqlstate = outcome
        if origin is None:
            log_statement(name, text, sqlstate, seconds * 1000)
            return
        log_statement(name, text, sqlstate, seconds * 1000, protocol=origin.protocol,
                      conn_id=origin.conn_id, peer=origin.peer, user=origin.user)

    def _internal(
        self, cmd: Command, started: float, exc: Exception, text: str, origin: Origin | None
    ) -> InternalError:
        _log.error(
            "internal error running %s", cmd.tag, exc_info=exc, extra={"command": cmd.tag}
        )
        self._finish(cmd, InternalError.sqlstate, started, text, origin)
        return InternalError(f"internal error: {exc}")

    def _finish(
        self, cmd: Command, outcome: str, started: float, text: str, origin: Origin | None
    ) -> None:
        elapsed = time.perf_counter() - started
        self._account(cmd.tag, text, outcome, elapsed, origin)
        if elapsed >= self._slow_s:
            _log.warning(
                "slow command %s: %.1f ms", cmd.tag, elapsed * 1000,
                extra={"command": cmd.tag, "ms": round(elapsed * 1000, 3)},
            )

    def _observe_only(
        self, cmd: Command, outcome: str, started: float, text: str, origin: Origin | None
    ) -> None:
        """Blocking waits are metered and logged but never "slow": waiting is their job."""
        self._account(cmd.tag, text, outcome, time.perf_counter() - started, origin)


class BlockingWait:
    """A ``QUEUE RESULT_BLOCKING`` held on plain callbacks (:meth:`Executor.begin_blocking`).

    The store's waiter and one timer resolve it, so a wait costs no task, coroutine or
    ``wait_for`` and its wake-up one event-loop callback: the wait was about a fifth of
    the QueryQueue cycle's server CPU. It answers, counts and logs exactly as
    :meth:`Executor.complete` does, and offers the part of ``asyncio.Task`` the wire's
    shell reads (``cancel``, ``cancelled``, ``exception``, ``result``). A store that
    must wait before it registers (an awaitable) gets its registration awaited in a task
    under ``statement_timeout``, as in :meth:`Executor._blocking`."""

    __slots__ = ("_cmd", "_error", "_executor", "_loop", "_on_done", "_origin", "_result",
                 "_started", "_state", "_task", "_text", "_timer", "_waiter")  # fmt: skip

    def __init__(self, executor: Executor, cmd: QueueResultBlocking, text: str,
                 origin: Origin | None, on_done: Callable[[BlockingWait], None]) -> None:  # fmt: skip
        self._executor = executor
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
        self._executor._observe_only(self._cmd, "57014", self._started, self._text, self._origin)
        self._loop.call_soon(self._on_done, self)
        return True

    # --- the steps -----------------------------------------------------------------

    def start(self, process_id: str | None, timeout_ms: int) -> None:
        executor = self._executor
        try:
            outcome = executor.store.result_blocking(self._cmd, self._deliver, process_id)
        except QueueError as exc:
            executor._finish(self._cmd, exc.sqlstate, self._started, self._text, self._origin)
            self._fail(exc)
            return
        except Exception as exc:  # as the task path: not counted, answered XX000
            self._fail(exc)
            return
        if not isinstance(outcome, ResultSet) and inspect.isawaitable(outcome):
            # a store that must wait before answering
            task = self._loop.create_task(executor._registered(outcome, timeout_ms))
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
            self._executor._finish(self._cmd, exc.sqlstate, self._started, self._text,
                                   self._origin)  # fmt: skip
        self._fail(exc)
        self._on_done(self)

    def _answer(self, outcome: ResultSet | Cancellable) -> None:
        if isinstance(outcome, ResultSet):  # answered at once
            self._executor._finish(self._cmd, "ok", self._started, self._text, self._origin)
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
        timeout_s = min(cmd.timeout, self._executor.max_blocking_timeout_ms) / 1000
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
        self._executor._observe_only(self._cmd, "ok", self._started, self._text, self._origin)
        self._on_done(self)

    def _release(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.cancel()


async def _gather(stream: RowStream) -> ResultSet:
    """A stream's rows, yielding to the event loop between slices so that other
    connections keep going while a large result is read; closed however it ends."""
    rows = []
    try:
        for part in stream.slices:
            rows.extend(part)
            await asyncio.sleep(0)
    finally:
        close_stream(stream)
    return ResultSet(stream.columns, rows)
