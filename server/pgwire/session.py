"""The per-connection PostgreSQL protocol, without any I/O.

:meth:`PgSession.handle` takes one decoded frontend message and appends the encoded
backend messages to :attr:`PgSession.wire` (replies go straight to bytes: the constant
ones are prebuilt, RowDescriptions and DataRow encoders are cached per prepared statement
and result formats; :meth:`PgSession.take` decodes them back for tests). What a message
may do in each state, and the state it leaves behind, is the table in :mod:`.states`;
this module holds the actions. Statements go to the executor (routing, transaction
checks, metrics: :mod:`cubequeue.server.executor`); prepared statements and portals live
in :class:`~.statements.Names`.

``handle`` returns None when the message is fully answered, or a :class:`WaitFor` when a
step has to wait (``QUEUE RESULT_BLOCKING``, a store that answers later, plain SQL over a
system table such a store answers later: a ``PlainWait``, whose result carries the
statement's outcome; Describe never waits, it needs only the plan): the caller
(the asyncio listener) awaits ``executor.complete(wait)`` and then calls
:meth:`PgSession.resume` with the result or the exception (``QueryCanceled`` for a
CancelRequest), and the session carries on exactly where it stopped, even in the middle
of a multi-statement Query. Messages that arrive meanwhile are the caller's to queue.
Only a step that waits goes through a generator; every other one is answered by plain
calls.

A simple Query runs its statements in order as an implicit transaction; the first error
ends it; a blank Query gets EmptyQueryResponse; one ReadyForQuery at the end. Queue
commands inside a block run at once, since the store is not transactional.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Container, Generator, Sequence
from datetime import UTC, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from cubequeue.grammar import bind, first_word, split_statements
from cubequeue.grammar.binding import param_text
from cubequeue.grammar.commands import Command
from cubequeue.grammar.errors import (
    FeatureNotSupported,
    InternalError,
    QueueError,
    SyntaxError,
)
from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.server.context import PG_SERVER_VERSION
from cubequeue.server.errors import AdminShutdown, ConfigurationLimitExceeded, bind_count_error
from cubequeue.server.executor import (
    Binder,
    Origin,
    PlainWait,
    Prepared,
    Step,
    WaitFor,
    ends_block,
    plain_outcome,
)
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.auth import AUTH_METHODS, Exchange, make_exchange
from cubequeue.server.pgwire.client import BackendDecoder
from cubequeue.server.pgwire.codec import (
    BIND_COMPLETE,
    CLOSE_COMPLETE,
    COPY_DONE,
    EMPTY_QUERY,
    PARSE_COMPLETE,
    PORTAL_SUSPENDED,
    READY,
    encode,
    encode_command_complete,
    encode_copy_data,
    encode_copy_out_response,
)
from cubequeue.server.pgwire.errors import (
    InvalidAuthorizationSpecification,
    error_response,
    notice_response,
)
from cubequeue.server.pgwire.row_writer import ShapeFor, WireRows
from cubequeue.server.pgwire.statements import (
    Names,
    Portal,
    PreparedStatement,
    ResultShape,
    columns_of,
    dialect_param_oids,
    result_shape,
    zoned,
)
from cubequeue.server.pgwire.states import (
    TRANSITIONS,
    Action,
    IllegalTransition,
    Rule,
    SessionState,
)
from cubequeue.server.row_sink import StreamedRows
from cubequeue.server.sql import PlainOutcome, PlainSession
from cubequeue.server.sql.copy import parse_copy, run_copy

if TYPE_CHECKING:
    from cubequeue.server.config import Config
    from cubequeue.server.sql.outcome import PlainDescription

__all__ = [
    "PG_SERVER_VERSION",
    "PgSession",
    "SessionContext",
    "SessionExecutor",
    "SessionHooks",
    "SessionState",
    "WaitFor",
]

_log = logging.getLogger("cubequeue.pg")

#: texts up to this length keep their split_statements outcome (see _split)
_SPLIT_CACHE_MAX_LEN = 256
#: a statement without these letters is not COPY: a C-speed scan spares most statements
#: the first-word read (comments may come first, so only first_word decides)
_COPY = re.compile("copy", re.IGNORECASE)
#: result schemas a connection keeps the text shape of (:meth:`PgSession._text_shape`;
#: the dialect has a few dozen): the map is cleared when full
_MAX_TEXT_SHAPES = 64
#: constant replies a connection keeps encoded (plain SQL has three constant outcomes;
#: an Execute's are per result shape too); the map is cleared when full
_MAX_CONSTANT_REPLIES = 16


class SessionExecutor(Protocol):
    """What the session needs of :class:`~cubequeue.server.executor.Executor` (tests
    give it a fake with no store)."""

    def statement(
        self,
        sql: str,
        session: PlainSession,
        process_id: str | None,
        binder: Binder | None = None,
        params: Sequence[str | None] = (),
        *,
        origin: Origin | None = None,
    ) -> tuple[Command, Step] | PlainOutcome | PlainWait: ...

    def describe(
        self, sql: str, session: PlainSession, *, origin: Origin | None = None
    ) -> Prepared | PlainDescription: ...

    def run(
        self, cmd: Command, process_id: str | None = None, *, text: str = "",
        origin: Origin | None = None,
    ) -> Step: ...

    def plain(
        self, sql: str, session: PlainSession, params: Sequence[str | None] = (), *,
        origin: Origin | None = None,
    ) -> PlainOutcome | PlainWait: ...

    def check_open(
        self, session: PlainSession, statement_ends_block: bool, *, text: str = "",
        origin: Origin | None = None,
    ) -> None: ...

    def failed(self, session: PlainSession | None, exc: BaseException) -> QueueError: ...


class SessionContext(Protocol):
    """What the session reads of the server (a subset of ``ServerContext``)."""

    @property
    def executor(self) -> SessionExecutor: ...

    @property
    def config(self) -> Config: ...

    @property
    def server_version(self) -> str: ...

    def password_for(self, user: str) -> str | None: ...


class SessionHooks(Protocol):
    def admit(self, user: str) -> tuple[int, int]:
        """Register the connection; returns (pid, secret); raises 53300 when full."""
        ...


_Run = Generator[WaitFor, ResultSet, None]


class PgSession:
    def __init__(self, ctx: SessionContext, hooks: SessionHooks) -> None:
        self.ctx = ctx
        self.executor = ctx.executor
        self.hooks = hooks
        self.state = SessionState.STARTUP
        #: encoded replies not yet taken (:meth:`take_bytes`)
        self.wire: list[bytes] = []
        self.user: str | None = None
        self.plain: PlainSession | None = None
        self.backend_key: tuple[int, int] | None = None
        self.names = Names()
        #: the session's TimeZone, for text timestamptz values (kept in step with SET)
        self._tz: tzinfo = UTC
        self._exchange: Exchange | None = None
        self._suspended: _Run | None = None
        self._suspended_rule: Rule | None = None
        #: how the suspended step's rows may be streamed (:meth:`row_sink`), if at all
        self._stream_plan: ShapeFor | None = None
        #: who sends the statements, for their log lines (known after startup)
        self.origin: Origin | None = None
        #: id(constant PlainOutcome) → (it, its encoded reply): :meth:`_constant_reply`
        self._constant_replies: dict[int, tuple[PlainOutcome, bytes]] = {}
        #: the same for an Execute, by (outcome, result shape): :meth:`_constant_portal`
        self._constant_portals: dict[
            tuple[int, int], tuple[PlainOutcome, ResultShape, bytes]] = {}
        #: id(result columns) → (them, their text shape, the zone it was built for)
        self._text_shapes: dict[int, tuple[tuple[Column, ...], ResultShape | None, tzinfo]] = {}

    # --- public API -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.state is SessionState.CLOSED

    @property
    def tx_status(self) -> str:
        return self.plain.tx_status if self.plain is not None else "I"

    @property
    def process_id(self) -> str | None:
        return self.plain.process_id if self.plain is not None else None

    def take_bytes(self) -> bytes:
        """The replies so far, encoded and joined, for one ``transport.write``."""
        wire = self.wire
        if not wire:
            return b""
        self.wire = []
        return wire[0] if len(wire) == 1 else b"".join(wire)

    def take(self) -> list[m.BackendMessage]:
        """The replies so far as messages (for tests and tools: the wire is bytes)."""
        return BackendDecoder().feed(self.take_bytes())

    def send(self, msg: m.BackendMessage) -> None:
        self.wire.append(encode(msg))

    def handle(self, msg: m.FrontendMessage) -> WaitFor | None:
        """Answer one message as the transition table says (see :mod:`.states`)."""
        assert self._suspended is None, "handle() while a wait is pending"
        if self.state is SessionState.CLOSED:
            return None
        step = _DISPATCH.get((self.state, type(msg)))
        if step is None:
            self._fatal(IllegalTransition(self.state, type(msg)))
            return None
        rule, action = step
        try:
            run = action(self, msg)
        except Exception as exc:
            self._failed(rule, exc)
            return None
        if run is None:
            if rule.next is not None:
                self.state = rule.next
            return None
        return self._advance(rule, run, None, None)

    def handle_run(
        self, msgs: Sequence[object], start: int, stop_at: Container[type]
    ) -> tuple[int, WaitFor | None]:
        """:meth:`handle` for ``msgs[start:]`` in order, in one call: a round trip's
        Bind/Describe/Execute/Sync pays one dispatch loop instead of a call chain per
        message. Stops after a message that has to wait (its wait is returned) or closes
        the session, and before one whose type is in ``stop_at`` (the listener's own):
        returns the index of the first message not handled, and the wait."""
        assert self._suspended is None, "handle_run() while a wait is pending"
        dispatch = _DISPATCH
        closed = SessionState.CLOSED
        i, end = start, len(msgs)
        while i < end:
            msg = msgs[i]
            kind = type(msg)
            if kind in stop_at:
                return i, None
            i += 1
            state = self.state
            if state is closed:
                return i, None
            step = dispatch.get((state, kind))
            if step is None:
                self._fatal(IllegalTransition(state, kind))
                return i, None
            rule, action = step
            try:
                run = action(self, msg)
            except Exception as exc:
                self._failed(rule, exc)
                continue
            if run is None:
                if rule.next is not None:
                    self.state = rule.next
                continue
            wait = self._advance(rule, run, None, None)
            if wait is not None:
                return i, wait
        return i, None

    def resume(
        self, result: ResultSet | None = None, error: BaseException | None = None
    ) -> WaitFor | None:
        """Continue after a :class:`WaitFor` with its result or its exception."""
        run, self._suspended = self._suspended, None
        rule, self._suspended_rule = self._suspended_rule, None
        assert run is not None and rule is not None, "resume() without a pending wait"
        return self._advance(rule, run, result, error)

    def row_sink(self, drain: Callable[[], Awaitable[None]]) -> WireRows | None:
        """Where the wait just returned may stream its rows (a large QUEUE LIST), or
        None when its rows must come back whole (an Execute with a row limit, whose
        PortalSuspended needs them). ``drain`` sends what was encoded and waits for the
        client (the listener's)."""
        plan, self._stream_plan = self._stream_plan, None
        return None if plan is None else WireRows(self, plan, drain)

    def abandon(self) -> None:
        """The client went away during a wait: drop the suspended work."""
        run, self._suspended = self._suspended, None
        self._suspended_rule = None
        if run is not None:
            run.close()
        self.state = SessionState.CLOSED

    def shutdown(self) -> None:
        """The server is stopping: FATAL 57P01."""
        self._fatal(AdminShutdown("terminating connection due to administrator command"))

    def fatal(self, exc: QueueError) -> None:
        self._fatal(exc)

    # --- plumbing ---------------------------------------------------------------------

    def _advance(
        self, rule: Rule, run: _Run, value: ResultSet | None, error: BaseException | None
    ) -> WaitFor | None:
        try:
            wait = run.throw(error) if error is not None else run.send(value)  # type: ignore[arg-type]  # the first send is None
        except StopIteration:
            if rule.next is not None:
                self.state = rule.next
            return None
        except Exception as exc:
            self._failed(rule, exc)
            return None
        self._suspended, self._suspended_rule = run, rule
        return wait

    def _failed(self, rule: Rule, exc: Exception) -> None:
        """An action failed: FATAL when its rule fails into ``closed``, else an
        ErrorResponse and the rule's error state."""
        if rule.on_error is SessionState.CLOSED:
            self._fatal(exc)
            return
        self._error(exc)
        self.state = rule.on_error

    def _fatal(self, exc: BaseException) -> None:
        if not isinstance(exc, QueueError):
            _log.error("internal error in the PostgreSQL session", exc_info=exc)
            exc = InternalError(f"internal error: {exc}")
        self.send(error_response(exc, "FATAL"))
        self.state = SessionState.CLOSED

    def _error(self, exc: BaseException) -> None:
        self.send(error_response(self.executor.failed(self.plain, exc)))

    def _ready(self) -> None:
        self.wire.append(READY[self.tx_status])

    def _session(self) -> PlainSession:
        assert self.plain is not None, "statements run only after startup"
        return self.plain

    # --- startup and authentication -------------------------------------------------

    def _startup(self, msg: m.StartupMessage) -> None:
        major, minor = msg.protocol >> 16, msg.protocol & 0xFFFF
        if major != 3:
            raise FeatureNotSupported(
                f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0"
            )
        params = dict(msg.parameters)
        unknown = tuple(k for k, _v in msg.parameters if k.startswith("_pq_."))
        if minor > 0 or unknown:
            self.send(m.NegotiateProtocolVersion(0, unknown))
        user = params.get("user")
        if not user:
            raise InvalidAuthorizationSpecification(
                "no PostgreSQL user name specified in startup packet"
            )
        self.user = user
        self.plain = PlainSession(
            server_version=self.ctx.server_version, user=user,
            # the server's default first, as postgresql.conf's: the client may override it
            startup_params={"statement_timeout": str(self.ctx.config.statement_timeout),
                            **params},
        )
        self.backend_key = self.hooks.admit(user)
        # the listener's hooks know the peer (and may know the connection id); tests'
        # hooks need not
        peer: str | None = getattr(self.hooks, "peer", None)
        self.origin = Origin("pg", getattr(self.hooks, "conn_id", None), peer, user)
        method = self.ctx.config.auth
        assert method in AUTH_METHODS, f"unchecked --auth {method}"
        self._exchange = make_exchange(method, user, self.ctx.password_for(user), peer=peer)
        if self._exchange is None:
            self._authenticated()
        else:
            self.state = SessionState.AUTH
            self.send(self._exchange.start())

    def _password(self, msg: m.PasswordMessage) -> None:
        assert self._exchange is not None
        reply, done = self._exchange.step(msg.payload)
        if reply is not None:
            self.send(reply)
        if done:
            self._authenticated()

    def _authenticated(self) -> None:
        assert self.plain is not None and self.backend_key is not None
        self._exchange = None
        self.send(m.AuthenticationOk())
        for name, value in self.plain.reported().items():
            self.send(m.ParameterStatus(name, value))
        self.send(m.BackendKeyData(*self.backend_key))
        self._tz = self.plain.zone
        self.state = SessionState.READY
        self._ready()

    # --- replies ----------------------------------------------------------------------

    def _send_rows(self, shape: ResultShape, rows: list[Row]) -> None:
        encode_row = shape.encode_row
        if encode_row is None or not rows:
            return
        if len(rows) == 1:
            self.wire.append(encode_row(rows[0]))
        else:
            self.wire.extend([encode_row(row) for row in rows])

    def _zone_for(self, spec: tuple[tuple[str, int], ...]) -> tzinfo:
        """The zone a result's shape needs: UTC unless it has a timestamptz column."""
        tz = self._tz
        return tz if tz is UTC or zoned(spec) else UTC

    def _text_shape(self, columns: tuple[Column, ...]) -> ResultShape | None:
        """A dialect result's text shape (None: no columns), kept per result schema: a
        command's columns are one constant tuple, so the spec and the shared shape are
        looked up once per schema and session zone, not rebuilt for every result."""
        tz = self._tz
        hit = self._text_shapes.get(id(columns))
        if hit is not None and hit[0] is columns and hit[2] is tz:
            return hit[1]
        spec = columns_of(columns)
        shape = None if spec is None else result_shape(spec, (0,) * len(spec),
                                                       self._zone_for(spec))  # fmt: skip
        if len(self._text_shapes) >= _MAX_TEXT_SHAPES:
            self._text_shapes.clear()
        self._text_shapes[id(columns)] = (columns, shape, tz)
        return shape

    def _dialect_reply(self, command: Command, result: ResultSet) -> None:
        shape = self._text_shape(result.columns)
        if isinstance(result, StreamedRows):  # the description and rows went already
            tag = command.tag if shape is None else f"{command.tag} {result.count}"
            self.wire.append(encode_command_complete(tag))
        elif shape is not None:
            self.wire.append(shape.description)
            self._send_rows(shape, result.rows)
            self.wire.append(encode_command_complete(f"{command.tag} {len(result.rows)}"))
        else:
            self.wire.append(encode_command_complete(command.tag))

    def _plain_effects(self, outcome: PlainOutcome) -> None:
        """What a plain statement asks of the names, and its notices (before its rows)."""
        self.names.apply(outcome.effect)
        for notice in outcome.notices:
            self.send(notice_response(notice.severity, notice.sqlstate, notice.message))

    def _parameter_status(self, outcome: PlainOutcome) -> None:
        status = outcome.parameter_status
        if not status:
            return
        for name, value in status.items():
            self.send(m.ParameterStatus(name, value))
        if "TimeZone" in status:
            self._tz = self._session().zone

    def _plain_reply(self, outcome: PlainOutcome) -> None:
        self._plain_effects(outcome)
        if outcome.result is not None:
            spec = columns_of(outcome.result.columns, outcome.type_oids)
            if spec is not None:
                shape = result_shape(spec, (0,) * len(spec), self._zone_for(spec))
                self.wire.append(shape.description)
                self._send_rows(shape, outcome.result.rows)
        if outcome.tag:
            self.wire.append(encode_command_complete(outcome.tag))
        else:  # only comments: PostgreSQL's empty query
            self.wire.append(EMPTY_QUERY)
        self._parameter_status(outcome)

    # --- simple query -----------------------------------------------------------------

    def _simple_statement(self, sql: str) -> _Run | None:
        """Run one statement of a simple Query; one that waits is returned as the
        generator that yields its wait and then answers it."""
        if _COPY.search(sql) is not None and first_word(sql) == "copy":
            return self._copy_out(sql)
        answer = self.executor.statement(sql, self._session(), self.process_id,
                                         origin=self.origin)
        if isinstance(answer, PlainOutcome):
            if answer.constant:
                self._constant_reply(answer)
            else:
                self._plain_reply(answer)
            return None
        if isinstance(answer, PlainWait):
            return self._plain_wait(answer)
        command, step = answer
        if isinstance(step, WaitFor):
            return self._dialect_wait(command, step)
        self._dialect_reply(command, step)
        return None

    def _constant_reply(self, outcome: PlainOutcome) -> None:
        """A constant outcome's reply (``SELECT 1``: RowDescription, DataRow,
        CommandComplete), encoded once per connection and then appended as is. Its
        types carry no zone (int4, void), so no setting changes its bytes."""
        replies = self._constant_replies
        reply = replies.get(id(outcome))
        if reply is not None and reply[0] is outcome:
            self.wire.append(reply[1])
            return
        mark = len(self.wire)
        self._plain_reply(outcome)
        if len(replies) >= _MAX_CONSTANT_REPLIES:
            replies.clear()
        replies[id(outcome)] = (outcome, b"".join(self.wire[mark:]))

    def _dialect_wait(self, command: Command, wait: WaitFor) -> _Run:
        self._stream_plan = self._simple_shape
        result = yield wait
        self._dialect_reply(command, result)

    def _simple_shape(self, columns: tuple[Column, ...]) -> tuple[ResultShape, bool]:
        """A simple Query's streamed result: text rows after its RowDescription."""
        spec = columns_of(columns)
        if spec is None:
            return result_shape(None, ()), False
        return result_shape(spec, (0,) * len(spec), self._zone_for(spec)), True

    def _plain_wait(self, wait: PlainWait) -> _Run:
        result = yield wait
        self._plain_reply(plain_outcome(result))

    def _copy_out(self, sql: str) -> _Run | None:
        """``COPY (SELECT …) TO STDOUT`` (simple Query only, as psql's ``\\copy`` and
        psycopg's ``copy()`` send it): CopyOutResponse, a CopyData per line, CopyDone.
        Its query runs as any plain SELECT, so it may wait as one."""
        answer = self.executor.plain(parse_copy(sql).query, self._session(), origin=self.origin)
        if isinstance(answer, PlainWait):
            return self._copy_wait(sql, answer)
        self._copy_reply(sql, answer)
        return None

    def _copy_wait(self, sql: str, wait: PlainWait) -> _Run:
        result = yield wait
        self._copy_reply(sql, plain_outcome(result))

    def _copy_reply(self, sql: str, outcome: PlainOutcome) -> None:
        out = run_copy(sql, lambda _query: outcome, self._tz)
        wire = self.wire
        wire.append(encode_copy_out_response(0, (0,) * out.column_count))
        wire.extend([encode_copy_data(line) for line in out.lines])
        wire.append(COPY_DONE)
        wire.append(encode_command_complete(out.tag))

    def _query(self, msg: m.Query) -> _Run | None:
        """Statements run here until one has to wait; the rest go to :meth:`_query_rest`."""
        try:
            statements = _split(msg.sql)
            if not statements:
                self.wire.append(EMPTY_QUERY)
            for i, sql in enumerate(statements):
                run = self._simple_statement(sql)
                if run is not None:
                    return self._query_rest(run, statements[i + 1 :])
        except Exception as exc:  # QueueError, or our bug (XX000): the session survives
            self._error(exc)
        self._ready()
        return None

    def _query_rest(self, first: _Run, rest: tuple[str, ...]) -> _Run:
        run: _Run | None = first
        try:
            while run is not None:
                yield from run
                run = None
                for i, sql in enumerate(rest):
                    run = self._simple_statement(sql)
                    if run is not None:
                        rest = rest[i + 1 :]
                        break
        except Exception as exc:
            self._error(exc)
        self._ready()

    # --- extended query ---------------------------------------------------------------

    def _parse(self, msg: m.Parse) -> None:
        if not msg.name:
            # A client that does not name its statements (psycopg without prepare,
            # pgbench -M extended, JDBC's first executions) parses the same text again
            # and again: PostgreSQL re-plans it, we keep the statement, its cached
            # decoders, encoders and Describe reply, when nothing it was built from changed
            last = self.names.statements.get("")
            if last is not None and last.reuse is not None and last.reuse == (
                    msg.query, msg.param_oids):
                self.wire.append(PARSE_COMPLETE)
                return
        self.names.check_new_statement(msg.name)
        if msg.name:
            self._check_names_cap(self.names.statements, "prepared statements")
        statements = _split(msg.query)
        if len(statements) > 1:
            raise SyntaxError("cannot insert multiple commands into a prepared statement")
        if not statements:
            self.names.statements[msg.name] = PreparedStatement(
                msg.name, "", "empty", tuple(msg.param_oids), None
            )
            self.wire.append(PARSE_COMPLETE)
            return
        sql = statements[0]
        desc = self.executor.describe(sql, self._session(), origin=self.origin)
        if isinstance(desc, Prepared):
            oids = dialect_param_oids(desc.params, msg.param_oids)
            spec = columns_of(desc.columns)
            stmt = PreparedStatement(msg.name, sql, "dialect", oids, spec, desc,
                                     reuse=(msg.query, msg.param_oids))
        else:
            count = max(desc.param_count, len(msg.param_oids))
            oids = tuple(
                (msg.param_oids[i] if i < len(msg.param_oids) else 0)
                or (desc.param_oids[i] if i < len(desc.param_oids) else 25)
                for i in range(count)
            )
            spec = None if desc.columns is None else columns_of(desc.columns, desc.type_oids)
            stmt = PreparedStatement(msg.name, sql, "plain", oids, spec, None, ends_block(sql),
                                     reuse=(msg.query, msg.param_oids) if desc.stable else None)
        self.names.statements[msg.name] = stmt
        self.wire.append(PARSE_COMPLETE)

    def _bind(self, msg: m.Bind) -> None:
        names = self.names
        stmt = names.statement(msg.statement)
        names.check_new_portal(msg.portal)
        if msg.portal:
            self._check_names_cap(names.portals, "portals")
        plain = self.plain
        if plain is None or plain.tx_status == "E":  # only a failed block refuses
            self.executor.check_open(self._session(), stmt.ends_block, text=stmt.sql,
                                     origin=self.origin)
        expected = len(stmt.param_oids)
        if len(msg.params) != expected:
            raise bind_count_error(len(msg.params), expected, stmt.name)
        values = stmt.loader(msg.param_formats)(msg.params)
        tz = self._tz
        shape = stmt.shape(msg.result_formats, tz if tz is UTC or stmt.zoned else UTC)
        command = None
        if stmt.prepared is not None:
            command = bind(stmt.prepared.command, values)
        names.portals[msg.portal] = Portal(msg.portal, stmt, command, values, shape)
        self.wire.append(BIND_COMPLETE)

    def _check_names_cap(self, held: dict[str, Any], what: str) -> None:
        """``--max-prepared-statements`` caps named statements and named portals each
        (the unnamed ones are replaced, never added), so one client cannot grow them."""
        limit = self.ctx.config.max_prepared_statements
        count = len(held) - ("" in held)
        if count >= limit:
            raise ConfigurationLimitExceeded(
                f"too many named {what} on this connection ({count}): the limit is "
                f"--max-prepared-statements ({limit}, CUBEQUEUE_MAX_PREPARED_STATEMENTS)",
                hint="Close or DEALLOCATE the ones no longer used.",
            )

    def _describe(self, msg: m.Describe) -> None:
        if msg.kind == "S":
            self.wire.append(self.names.statement(msg.name).description())
        else:
            self.wire.append(self.names.portal(msg.name).shape.description)

    def _execute(self, msg: m.Execute) -> _Run | None:
        """Run the portal's statement once (its rows are then sent in max_rows slices);
        only a step that waits goes through a generator, :meth:`_execute_wait`."""
        portal = self.names.portal(msg.portal)
        if portal.rows is None:
            stmt = portal.statement
            plain = self.plain
            if plain is None or plain.tx_status == "E":  # only a failed block refuses
                self.executor.check_open(self._session(), stmt.ends_block, text=stmt.sql,
                                         origin=self.origin)
            command = portal.command
            if command is not None:
                step = self.executor.run(command, self.process_id, text=stmt.sql,
                                         origin=self.origin)
                if isinstance(step, WaitFor):
                    return self._execute_wait(portal, step, msg.max_rows)
                self._portal_result(portal, command, step)
            elif stmt.kind == "empty":
                portal.rows = []
            else:
                answer = self.executor.plain(stmt.sql, self._session(),
                                             [param_text(v) for v in portal.params],
                                             origin=self.origin)
                if isinstance(answer, PlainWait):
                    return self._execute_plain_wait(portal, answer, msg.max_rows)
                self._plain_portal(portal, answer)
                if answer.constant and msg.max_rows <= 0:
                    self._constant_portal(portal, answer)
                    return None
        self._send_portal(portal, msg.max_rows)
        return None

    def _constant_portal(self, portal: Portal, outcome: PlainOutcome) -> None:
        """A constant outcome's DataRows and CommandComplete for an Execute without a
        row limit, encoded once per (outcome, result shape) and then appended as is."""
        shape = portal.shape
        replies = self._constant_portals
        reply = replies.get((id(outcome), id(shape)))
        if reply is not None and reply[0] is outcome and reply[1] is shape:
            self.wire.append(reply[2])
            portal.pos = len(portal.rows or ())
            return
        mark = len(self.wire)
        self._send_portal(portal, 0)
        if len(replies) >= _MAX_CONSTANT_REPLIES:
            replies.clear()
        replies[(id(outcome), id(shape))] = (outcome, shape, b"".join(self.wire[mark:]))

    def _execute_wait(self, portal: Portal, wait: WaitFor, max_rows: int) -> _Run:
        if max_rows <= 0 and portal.columns is not None:
            shape = portal.shape
            self._stream_plan = lambda _columns: (shape, False)
        else:
            self._stream_plan = None
        result = yield wait
        assert portal.command is not None, "a dialect portal's wait"
        self._portal_result(portal, portal.command, result)
        if isinstance(result, StreamedRows):  # the rows went already: the portal is done
            self.wire.append(encode_command_complete(f"{portal.tag} {result.count}"))
            return
        self._send_portal(portal, max_rows)

    def _execute_plain_wait(self, portal: Portal, wait: PlainWait, max_rows: int) -> _Run:
        result = yield wait
        self._plain_portal(portal, plain_outcome(result))
        self._send_portal(portal, max_rows)

    def _portal_result(self, portal: Portal, command: Command, result: ResultSet) -> None:
        portal.tag = command.tag
        portal.counted = portal.columns is not None
        portal.rows = result.rows if portal.counted else []

    def _plain_portal(self, portal: Portal, outcome: PlainOutcome) -> None:
        self._plain_effects(outcome)
        has_rows = outcome.result is not None and portal.columns is not None
        portal.rows = outcome.result.rows if outcome.result is not None and has_rows else []
        head, _, last = outcome.tag.rpartition(" ")
        if has_rows and head and last.isdigit():
            portal.tag, portal.counted = head, True
        else:
            portal.tag = outcome.tag
        self._parameter_status(outcome)

    def _send_portal(self, portal: Portal, max_rows: int) -> None:
        """Rows from where the last Execute stopped; PortalSuspended when max_rows is hit
        (PostgreSQL suspends whenever exactly max_rows rows were fetched)."""
        if portal.statement.kind == "empty":
            self.wire.append(EMPTY_QUERY)
            return
        rows = portal.rows or []
        start = portal.pos
        end = len(rows) if max_rows <= 0 else min(len(rows), start + max_rows)
        if start == 0 and end == len(rows):
            self._send_rows(portal.shape, rows)
        else:
            self._send_rows(portal.shape, rows[start:end])
        portal.pos = end
        if max_rows > 0 and end - start == max_rows:
            self.wire.append(PORTAL_SUSPENDED)
            return
        tag = f"{portal.tag} {end - start}" if portal.counted else portal.tag
        self.wire.append(encode_command_complete(tag))

    def _close(self, msg: m.Close) -> None:
        self.names.close(msg.kind, msg.name)
        self.wire.append(CLOSE_COMPLETE)

    def _sync(self, _msg: m.Sync) -> None:
        """The end of an extended-protocol batch: outside a block, portals end too."""
        if self.tx_status == "I":
            if self.names.portals:
                self.names.portals.clear()
            self.wire.append(READY["I"])
            return
        self._ready()

    def _function_call(self, _msg: m.FunctionCall) -> None:
        self._error(FeatureNotSupported("the fast-path function call interface is not supported"))
        self._ready()

    def _ignore(self, _msg: m.FrontendMessage) -> None:
        return None

    def _terminate(self, _msg: m.Terminate) -> None:
        return None


@lru_cache(maxsize=1024)
def _split_cached(sql: str) -> tuple[str, ...]:
    return tuple(split_statements(sql))


def _split(sql: str) -> tuple[str, ...]:
    """:func:`split_statements`, remembered for short texts (``SELECT 1``, ``BEGIN``,
    a prepared statement's text): they recur, a long one (a payload) seldom does."""
    if len(sql) <= _SPLIT_CACHE_MAX_LEN:
        return _split_cached(sql)
    return tuple(split_statements(sql))


#: each action of the transition table → the method that performs it
_ACTIONS: dict[Action, Callable[[PgSession, Any], _Run | None]] = {
    Action.STARTUP: PgSession._startup,
    Action.PASSWORD: PgSession._password,
    Action.QUERY: PgSession._query,
    Action.PARSE: PgSession._parse,
    Action.BIND: PgSession._bind,
    Action.DESCRIBE: PgSession._describe,
    Action.EXECUTE: PgSession._execute,
    Action.CLOSE: PgSession._close,
    Action.SYNC: PgSession._sync,
    Action.FUNCTION_CALL: PgSession._function_call,
    Action.IGNORE: PgSession._ignore,
    Action.TERMINATE: PgSession._terminate,
}
#: the transition table with each rule's method, looked up once per message
_DISPATCH: dict[tuple[SessionState, type], tuple[Rule, Callable[[PgSession, Any], _Run | None]]] = {
    key: (rule, _ACTIONS[rule.action]) for key, rule in TRANSITIONS.items()
}
