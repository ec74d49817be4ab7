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
  is counted and logged once (:mod:`.statement_meter`), naming the connection
  (:class:`Origin`);
* **waiting**: a step the store cannot answer at once (``QUEUE RESULT_BLOCKING``, an
  awaitable from a store that waits for a disk or a database, a :class:`RowStream`) comes
  back as a :class:`WaitFor`; the wire's asyncio shell awaits :meth:`Executor.complete`
  and feeds the result back to its session. The in-memory store answers with a
  ``ResultSet`` at once, and that path creates no coroutine. Plain SQL that reads a system
  table such a store answers later (:mod:`.plain_tables`) comes back as a
  :class:`PlainWait` (the same await); it completes with a :class:`PlainAnswer`, the
  statement's whole outcome.

``RESULT_BLOCKING`` never blocks the event loop: both wires hold it as one
:class:`~.blocking_wait.BlockingWait`, a store's callback and one timer
(:meth:`Executor.begin_blocking`; :meth:`Executor.complete` awaits the same).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cubequeue.grammar import Prepared, bind, first_word, is_dialect, prepare
from cubequeue.grammar.commands import Command, Param, QueueResultBlocking
from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.server.blocking_wait import BlockingWait
from cubequeue.server.errors import QueryCanceled
from cubequeue.server.plain_tables import (
    MAX_SQL_ROWS,
    FetchedTables,
    PendingTable,
    PlainTables,
    TablesPending,
)
from cubequeue.server.row_sink import RowSink, close_stream, stream_rows
from cubequeue.server.sql import PlainOutcome, PlainSession, describe_plain, run_plain
from cubequeue.server.sql.errors import UndefinedParameter
from cubequeue.server.sql.limits import MAX_SQL_STATEMENT_BYTES
from cubequeue.server.sql.statements import TX_END_WORDS, in_failed_transaction
from cubequeue.server.statement_meter import Observe, Origin, StatementMeter
from cubequeue.server.stores import StoreSlot
from cubequeue.storage.capabilities import Capabilities
from cubequeue.storage.interface import RowStream

if TYPE_CHECKING:
    from cubequeue.server.sql.outcome import PlainDescription
    from cubequeue.storage.capabilities import DefersWork
    from cubequeue.storage.interface import StoreBackend

__all__ = [
    "MAX_SQL_ROWS",
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

#: a wire's own reading of its parameters: the grammar's placeholders → positional values
Binder = Callable[[tuple[Param, ...]], Sequence[Any]]


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

@dataclass(frozen=True, slots=True)
class PlainWait(WaitFor):
    """Plain SQL that read a system table the store answers later (a durable read that
    saw an unwritten record, every read of the PostgreSQL store).

    ``tables`` are those awaitables by table name; :meth:`Executor.complete` awaits all
    of them together, then evaluates the statement synchronously over the frames, exactly
    as it would have run, and completes with a :class:`PlainAnswer`."""

    tables: tuple[tuple[str, PendingTable], ...] = ()
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
        self._meter = meter = StatementMeter(observe, slow_command_ms)
        # the meter's methods, bound once: every statement calls one
        self._account = meter.account
        self._finish = meter.finish
        self._observe_only = meter.observe_only
        self._internal = meter.internal
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
        self._tables: PlainTables
        if isinstance(store, StoreSlot):
            store.watch(self._use)  # the attached store itself, not the slot
        else:
            self._use(store, Capabilities.of(store))

    def _use(self, store: StoreBackend, capabilities: Capabilities) -> None:
        """Run statements on ``store`` (the server's slot attached it, or it was given)."""
        self.store = store
        self._deferred = capabilities.defers_work
        self._tables = PlainTables(store, self._max_sql_rows)

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
            return describe_plain(sql, session, self._tables,
                                  max_bytes=self._max_sql_statement_bytes)
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
            outcome = run_plain(sql, session, self._tables, params,
                                max_bytes=self._max_sql_statement_bytes)
        except TablesPending as pending:  # counted and logged once the wait ends
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
        cancelled (both wires' shells hold it so; :meth:`complete` awaits the same);
        ``timeout_ms`` bounds only a store's registration step."""
        cmd = wait.command
        assert isinstance(cmd, QueueResultBlocking) and wait.pending is None
        blocking = BlockingWait(self.store, self._meter, self.max_blocking_timeout_ms, cmd,
                                wait.text or cmd.tag, wait.origin, on_done)
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
            return await self._blocking(wait, timeout_ms)
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
                        outcome = run_plain(sql, session, FetchedTables(tables, frames),
                                            wait.params,
                                            max_bytes=self._max_sql_statement_bytes)
                        break
                    except TablesPending as more:
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

    async def _blocking(self, wait: WaitFor, timeout_ms: int) -> ResultSet:
        """``QUEUE RESULT_BLOCKING`` awaited: the same :class:`BlockingWait` the wires
        hold on callbacks, its end resolving a future."""
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_done(_blocking: BlockingWait) -> None:
            if not ended.done():
                ended.set_result(None)

        blocking = self.begin_blocking(wait, on_done, timeout_ms)
        if not blocking.done():
            try:
                await ended
            except asyncio.CancelledError:
                blocking.cancel()  # withdraws the waiter, counts 57014
                raise
        error = blocking.exception()
        if error is not None:
            raise error
        return blocking.result()


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
