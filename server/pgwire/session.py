"""The per-connection PostgreSQL state machine, without any I/O (style.md point 3).

:meth:`PgSession.handle` takes one decoded frontend message and appends the encoded
backend messages to :attr:`PgSession.wire` (replies go straight to bytes: the constant
ones are prebuilt, RowDescriptions and DataRow encoders are cached per prepared statement
and result formats; :meth:`PgSession.take` decodes them back for tests). It returns None when the message is fully answered, or a
:class:`WaitFor` when a ``QUEUE RESULT_BLOCKING`` has to wait: the caller (the asyncio
listener) runs ``executor.run_blocking`` and then calls :meth:`PgSession.resume` with the
result or the exception (``QueryCanceled`` for a CancelRequest), and the session carries
on exactly where it stopped, even in the middle of a multi-statement Query. Messages
that arrive meanwhile are the caller's to queue. Only a RESULT_BLOCKING goes through a
generator; every other statement is answered by plain calls.

The rules are PostgreSQL 15's "Message Flow" (postgres-wire.md §1):

* states: startup → auth → ready ⇄ awaiting-sync (after an extended-protocol error every
  message but Sync and Terminate is skipped), closed after a FATAL or Terminate;
* a simple Query runs its statements in order as an implicit transaction; the first
  error ends it; a blank Query gets EmptyQueryResponse; one ReadyForQuery at the end;
* the transaction status (I/T/E) lives in the plain-SQL session (BEGIN/COMMIT/ROLLBACK
  are plain SQL); any failure turns an open block into a failed one, where everything
  but COMMIT/ROLLBACK gets 25P02; queue commands inside a block run at once, since the
  store is not transactional.

Routing: a statement whose first word is QUEUE, CACHE or SYS goes to the executor;
everything else to :mod:`cubequeue.server.sql` (session statements, system tables).
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from cubequeue.grammar import bind, is_dialect, split_statements
from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.errors import (
    FeatureNotSupported,
    InternalError,
    QueueError,
    SyntaxError,
)
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.server.errors import (
    InFailedTransaction,
    InvalidCursorName,
    InvalidStatementName,
    ProtocolViolation,
    bind_count_error,
)
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.auth import AUTH_METHODS, Exchange, make_exchange
from cubequeue.server.pgwire.codec import (
    BIND_COMPLETE,
    CLOSE_COMPLETE,
    EMPTY_QUERY,
    PARSE_COMPLETE,
    PORTAL_SUSPENDED,
    READY,
    encode,
    encode_command_complete,
)
from cubequeue.server.pgwire.errors import (
    DuplicateCursor,
    DuplicatePreparedStatement,
    InvalidAuthorizationSpecification,
    UndefinedParameter,
    error_response,
    notice_response,
)
from cubequeue.server.pgwire.peer import BackendDecoder
from cubequeue.server.pgwire.statements import (
    Portal,
    PreparedStatement,
    ResultShape,
    columns_of,
    dialect_param_oids,
    result_shape,
)
from cubequeue.server.pgwire.types import ParamValue
from cubequeue.server.sql import PlainOutcome, PlainSession, describe_plain, run_plain

if TYPE_CHECKING:
    from cubequeue.server.context import ServerContext

__all__ = ["PG_SERVER_VERSION", "PgSession", "SessionHooks", "SessionState", "WaitFor"]

_log = logging.getLogger("cubequeue.pg")

#: the PostgreSQL release cubequeue claims: a major psql 15 accepts (postgres-wire.md §2.3)
PG_SERVER_VERSION = "15.18"
_PROTOCOL_3_0 = 3 << 16
_TX_END = re.compile(
    r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*(COMMIT|END|ROLLBACK|ABORT)\b", re.I | re.S
)
#: texts up to this length keep their split_statements outcome (see _split)
_SPLIT_CACHE_MAX_LEN = 256
_IN_FAILED = "current transaction is aborted, commands ignored until end of transaction block"


class SessionState(enum.Enum):
    STARTUP = "startup"
    AUTH = "auth"
    READY = "ready"
    AWAITING_SYNC = "awaiting-sync"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class WaitFor:
    """The session waits for ``executor.run_blocking(command, process_id)``."""

    command: QueueResultBlocking
    process_id: str | None


class SessionHooks(Protocol):
    def admit(self, user: str) -> tuple[int, int]:
        """Register the connection; returns (pid, secret); raises 53300 when full."""
        ...


_Run = Generator[WaitFor, ResultSet, None]


class PgSession:
    def __init__(self, ctx: ServerContext, hooks: SessionHooks) -> None:
        self.ctx = ctx
        self.hooks = hooks
        self.state = SessionState.STARTUP
        #: encoded replies not yet taken (:meth:`take_bytes`)
        self.wire: list[bytes] = []
        self.user: str | None = None
        self.plain: PlainSession | None = None
        self.backend_key: tuple[int, int] | None = None
        self._exchange: Exchange | None = None
        self._startup_params: dict[str, str] = {}
        self._statements: dict[str, PreparedStatement] = {}
        self._portals: dict[str, Portal] = {}
        self._suspended: _Run | None = None

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
        assert self._suspended is None, "handle() while a wait is pending"
        if self.state is SessionState.CLOSED:
            return None
        try:
            run = self._dispatch(msg)
        except QueueError as exc:
            self._fatal(exc)
            return None
        return None if run is None else self._advance(run, None, None)

    def resume(
        self, result: ResultSet | None = None, error: BaseException | None = None
    ) -> WaitFor | None:
        """Continue after a :class:`WaitFor` with its result or its exception."""
        run, self._suspended = self._suspended, None
        assert run is not None, "resume() without a pending wait"
        return self._advance(run, result, error)

    def abandon(self) -> None:
        """The client went away during a wait: drop the suspended work."""
        run, self._suspended = self._suspended, None
        if run is not None:
            run.close()
        self.state = SessionState.CLOSED

    def shutdown(self) -> None:
        """The server is stopping: FATAL 57P01 (dialect doc §8 rule 10)."""
        from cubequeue.server.errors import AdminShutdown

        self._fatal(AdminShutdown("terminating connection due to administrator command"))

    def fatal(self, exc: QueueError) -> None:
        self._fatal(exc)

    # --- plumbing ---------------------------------------------------------------------

    def _advance(
        self, run: _Run, value: ResultSet | None, error: BaseException | None
    ) -> WaitFor | None:
        try:
            wait = run.throw(error) if error is not None else run.send(value)  # type: ignore[arg-type]  # the first send is None
        except StopIteration:
            return None
        self._suspended = run
        return wait

    def _fatal(self, exc: QueueError) -> None:
        self.send(error_response(exc, "FATAL"))
        self.state = SessionState.CLOSED

    def _error(self, exc: BaseException) -> None:
        if not isinstance(exc, QueueError):
            _log.error("internal error in the PostgreSQL session", exc_info=exc)
            exc = InternalError(f"internal error: {exc}")
        self.send(error_response(exc))
        if self.plain is not None:
            self.plain.fail_transaction()

    def _ready(self) -> None:
        self.wire.append(READY[self.tx_status])

    def _dispatch(self, msg: m.FrontendMessage) -> _Run | None:
        state = self.state
        if state is SessionState.STARTUP:
            if not isinstance(msg, m.StartupMessage):
                raise ProtocolViolation(f"unexpected {type(msg).__name__} during startup")
            self._startup(msg)
            return None
        if state is SessionState.AUTH:
            if not isinstance(msg, m.PasswordMessage):
                raise ProtocolViolation(
                    f"expected password response, got message type {type(msg).__name__}"
                )
            self._authenticate(msg.payload)
            return None
        if isinstance(msg, m.Terminate):
            self.state = SessionState.CLOSED
            return None
        if state is SessionState.AWAITING_SYNC:
            if isinstance(msg, m.Sync):
                self.state = SessionState.READY
                self._sync()
            return None
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            raise ProtocolViolation(f"unexpected {type(msg).__name__} message")
        return handler(self, msg)

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
        self._startup_params = params
        version = f"{PG_SERVER_VERSION} (cubequeue {self.ctx.version})"
        self.plain = PlainSession(server_version=version, user=user, startup_params=params)
        self.backend_key = self.hooks.admit(user)
        method = self.ctx.config.auth
        assert method in AUTH_METHODS, f"unchecked --auth {method}"
        self._exchange = make_exchange(method, user, self.ctx.password_for(user))
        if self._exchange is None:
            self._authenticated()
        else:
            self.state = SessionState.AUTH
            self.send(self._exchange.start())

    def _authenticate(self, payload: bytes) -> None:
        assert self._exchange is not None
        reply, done = self._exchange.step(payload)
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
        self.state = SessionState.READY
        self._ready()

    # --- running statements ---------------------------------------------------------

    def _check_failed_block(self, sql: str) -> None:
        if self.tx_status == "E" and not _TX_END.match(sql):
            raise InFailedTransaction(_IN_FAILED)

    def _plain(self, sql: str, params: tuple[ParamValue, ...] = ()) -> PlainOutcome:
        assert self.plain is not None
        outcome = run_plain(sql, self.plain, self.ctx.store, [_as_text(v) for v in params])
        effect = outcome.effect
        if effect in ("deallocate_all", "discard_all"):
            self._statements.clear()
        if effect in ("close_all", "discard_all"):
            self._portals.clear()
        if isinstance(effect, tuple):
            if effect[1] not in self._statements:
                raise InvalidStatementName(f'prepared statement "{effect[1]}" does not exist')
            del self._statements[effect[1]]
        for notice in outcome.notices:
            self.send(notice_response(notice.severity, notice.sqlstate, notice.message))
        return outcome

    def _after_plain(self, outcome: PlainOutcome) -> None:
        for name, value in outcome.parameter_status.items():
            self.send(m.ParameterStatus(name, value))

    def _send_rows(self, shape: ResultShape, rows: list[Row]) -> None:
        encode_row = shape.encode_row
        if encode_row is None or not rows:
            return
        if len(rows) == 1:
            self.wire.append(encode_row(rows[0]))
        else:
            self.wire.extend([encode_row(row) for row in rows])

    def _simple_statement(self, sql: str) -> QueueResultBlocking | None:
        """Run one statement of a simple Query; a RESULT_BLOCKING is returned unrun."""
        self._check_failed_block(sql)
        if is_dialect(sql):
            prepared = self.ctx.executor.prepare(sql)
            if prepared.params:
                raise UndefinedParameter(f"there is no parameter ${prepared.params[0].index}")
            command = prepared.command
            if isinstance(command, QueueResultBlocking):
                return command
            self._simple_result(command, self.ctx.executor.run(command, self.process_id))
            return None
        outcome = self._plain(sql)
        if outcome.result is not None:
            spec = columns_of(outcome.result.columns, outcome.type_oids)
            if spec is not None:
                shape = result_shape(spec, (0,) * len(spec))
                self.wire.append(shape.description)
                self._send_rows(shape, outcome.result.rows)
        if outcome.tag:
            self.wire.append(encode_command_complete(outcome.tag))
        else:  # only comments: PostgreSQL's empty query
            self.wire.append(EMPTY_QUERY)
        self._after_plain(outcome)
        return None

    def _simple_result(self, command: Command, result: ResultSet) -> None:
        spec = columns_of(result.columns)
        if spec is not None:
            shape = result_shape(spec, (0,) * len(spec))
            self.wire.append(shape.description)
            self._send_rows(shape, result.rows)
            self.wire.append(encode_command_complete(f"{command.tag} {len(result.rows)}"))
        else:
            self.wire.append(encode_command_complete(command.tag))

    def _query(self, msg: m.Query) -> _Run | None:
        """Statements run here until one has to wait; the rest go to :meth:`_query_rest`."""
        try:
            statements = _split(msg.sql)
            if not statements:
                self.wire.append(EMPTY_QUERY)
            for i, sql in enumerate(statements):
                blocking = self._simple_statement(sql)
                if blocking is not None:
                    return self._query_rest(blocking, statements[i + 1 :])
        except Exception as exc:  # QueueError, or our bug (XX000): the session survives
            self._error(exc)
        self._ready()
        return None

    def _query_rest(self, blocking: QueueResultBlocking, rest: tuple[str, ...]) -> _Run:
        try:
            result = yield WaitFor(blocking, self.process_id)
            self._simple_result(blocking, result)
            for i, sql in enumerate(rest):
                more = self._simple_statement(sql)
                if more is not None:
                    yield from self._query_rest(more, rest[i + 1 :])
                    return
        except Exception as exc:
            self._error(exc)
        self._ready()

    # --- extended query ---------------------------------------------------------------

    def _parse(self, msg: m.Parse) -> None:
        if msg.name and msg.name in self._statements:
            raise DuplicatePreparedStatement(f'prepared statement "{msg.name}" already exists')
        statements = _split(msg.query)
        if len(statements) > 1:
            raise SyntaxError("cannot insert multiple commands into a prepared statement")
        if not statements:
            stmt = PreparedStatement(msg.name, "", "empty", tuple(msg.param_oids), None)
        elif is_dialect(statements[0]):
            prepared = self.ctx.executor.prepare(statements[0])
            oids = dialect_param_oids(prepared.params, msg.param_oids)
            spec = columns_of(prepared.columns)
            stmt = PreparedStatement(msg.name, statements[0], "dialect", oids, spec, prepared)
        else:
            assert self.plain is not None
            desc = describe_plain(statements[0], self.plain, self.ctx.store)
            count = max(desc.param_count, len(msg.param_oids))
            oids = tuple(
                (msg.param_oids[i] if i < len(msg.param_oids) else 0)
                or (desc.param_oids[i] if i < len(desc.param_oids) else 25)
                for i in range(count)
            )
            spec = None if desc.columns is None else columns_of(desc.columns, desc.type_oids)
            stmt = PreparedStatement(msg.name, statements[0], "plain", oids, spec)
        self._statements[msg.name] = stmt
        self.wire.append(PARSE_COMPLETE)

    def _statement(self, name: str) -> PreparedStatement:
        stmt = self._statements.get(name)
        if stmt is None:
            if not name:
                raise InvalidStatementName("unnamed prepared statement does not exist")
            raise InvalidStatementName(f'prepared statement "{name}" does not exist')
        return stmt

    def _portal(self, name: str) -> Portal:
        portal = self._portals.get(name)
        if portal is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        return portal

    def _bind(self, msg: m.Bind) -> None:
        stmt = self._statement(msg.statement)
        if msg.portal and msg.portal in self._portals:
            raise DuplicateCursor(f'cursor "{msg.portal}" already exists')
        if self.plain is not None and self.plain.tx_status == "E":
            self._check_failed_block(stmt.sql)
        expected = len(stmt.param_oids)
        if len(msg.params) != expected:
            raise bind_count_error(len(msg.params), expected, stmt.name)
        values = stmt.loader(msg.param_formats)(msg.params)
        shape = stmt.shape(msg.result_formats)
        command = None
        if stmt.prepared is not None:
            command = bind(stmt.prepared.command, values)
        self._portals[msg.portal] = Portal(msg.portal, stmt, command, values, shape)
        self.wire.append(BIND_COMPLETE)

    def _describe(self, msg: m.Describe) -> None:
        if msg.kind == "S":
            self.wire.append(self._statement(msg.name).description())
        else:
            self.wire.append(self._portal(msg.name).shape.description)

    def _execute(self, msg: m.Execute) -> _Run | None:
        """Run the portal's statement once (its rows are then sent in max_rows slices);
        only a RESULT_BLOCKING goes through a generator, in :meth:`_execute_blocking`."""
        try:
            portal = self._portal(msg.portal)
            if portal.rows is None:
                self._check_failed_block(portal.statement.sql)
                command = portal.command
                if isinstance(command, QueueResultBlocking):
                    return self._execute_blocking(portal, command, msg.max_rows)
                self._run_portal(portal)
            self._send_portal(portal, msg.max_rows)
        except Exception as exc:
            self._error(exc)
            self.state = SessionState.AWAITING_SYNC
        return None

    def _execute_blocking(
        self, portal: Portal, command: QueueResultBlocking, max_rows: int
    ) -> _Run:
        try:
            result = yield WaitFor(command, self.process_id)
            self._portal_result(portal, command, result)
            self._send_portal(portal, max_rows)
        except Exception as exc:
            self._error(exc)
            self.state = SessionState.AWAITING_SYNC

    def _portal_result(self, portal: Portal, command: Command, result: ResultSet) -> None:
        portal.tag = command.tag
        portal.counted = portal.columns is not None
        portal.rows = result.rows if portal.counted else []

    def _run_portal(self, portal: Portal) -> None:
        stmt = portal.statement
        if stmt.kind == "empty":
            portal.rows = []
            return
        command = portal.command
        if command is not None:
            self._portal_result(portal, command, self.ctx.executor.run(command, self.process_id))
            return
        outcome = self._plain(stmt.sql, portal.params)
        has_rows = outcome.result is not None and portal.columns is not None
        portal.rows = outcome.result.rows if outcome.result is not None and has_rows else []
        head, _, last = outcome.tag.rpartition(" ")
        if has_rows and head and last.isdigit():
            portal.tag, portal.counted = head, True
        else:
            portal.tag = outcome.tag
        self._after_plain(outcome)

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
        if msg.kind == "S":
            self._statements.pop(msg.name, None)
        else:
            self._portals.pop(msg.name, None)
        self.wire.append(CLOSE_COMPLETE)

    def _sync(self) -> None:
        if self.tx_status == "I":
            if self._portals:
                self._portals.clear()
            self.wire.append(READY["I"])
            return
        self._ready()

    def _extended(self, msg: m.FrontendMessage) -> None:
        """Parse / Bind / Describe / Close: errors skip to the next Sync."""
        try:
            _EXTENDED[type(msg)](self, msg)
        except Exception as exc:
            self._error(exc)
            self.state = SessionState.AWAITING_SYNC

    def _function_call(self, _msg: m.FunctionCall) -> None:
        self._error(FeatureNotSupported("the fast-path function call interface is not supported"))
        self._ready()


@lru_cache(maxsize=1024)
def _split_cached(sql: str) -> tuple[str, ...]:
    return tuple(split_statements(sql))


def _split(sql: str) -> tuple[str, ...]:
    """:func:`split_statements`, remembered for short texts (``SELECT 1``, ``BEGIN``,
    a prepared statement's text): they recur, a long one (a payload) seldom does."""
    if len(sql) <= _SPLIT_CACHE_MAX_LEN:
        return _split_cached(sql)
    return tuple(split_statements(sql))


def _as_text(value: ParamValue) -> str | None:
    """Plain SQL takes parameters as text, the way PostgreSQL would print them."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flush(_session: PgSession, _msg: m.FrontendMessage) -> None:
    """Flush: the listener writes after every batch of input, so nothing is held back."""
    return None


def _sync(session: PgSession, _msg: m.FrontendMessage) -> None:
    session._sync()


#: Parse / Bind / Describe / Close, inside :meth:`PgSession._extended`'s error handling
_EXTENDED: dict[type, Callable[[PgSession, Any], None]] = {
    m.Parse: PgSession._parse,
    m.Bind: PgSession._bind,
    m.Describe: PgSession._describe,
    m.Close: PgSession._close,
}

#: message type → handler; a handler returns a generator when it may have to wait
_HANDLERS: dict[type, Callable[[PgSession, Any], _Run | None]] = {
    m.Query: PgSession._query,
    m.Execute: PgSession._execute,
    m.Parse: PgSession._extended,
    m.Bind: PgSession._extended,
    m.Describe: PgSession._extended,
    m.Close: PgSession._extended,
    m.Sync: _sync,
    m.Flush: _flush,
    # outside COPY, PostgreSQL ignores these (they may follow a failed COPY)
    m.CopyData: _flush,
    m.CopyDone: _flush,
    m.CopyFail: _flush,
    m.FunctionCall: PgSession._function_call,
}
