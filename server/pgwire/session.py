"""The per-connection PostgreSQL state machine, without any I/O (style.md point 3).

:meth:`PgSession.handle` takes one decoded frontend message and appends backend messages
to :attr:`PgSession.out`. It returns None when the message is fully answered, or a
:class:`WaitFor` when a ``QUEUE RESULT_BLOCKING`` has to wait: the caller (the asyncio
listener) runs ``executor.run_blocking`` and then calls :meth:`PgSession.resume` with the
result or the exception (``QueryCanceled`` for a CancelRequest), and the session carries
on exactly where it stopped, even in the middle of a multi-statement Query. Messages
that arrive meanwhile are the caller's to queue.

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
from typing import TYPE_CHECKING, Any, Protocol

from cubequeue.grammar import bind, is_dialect, split_statements
from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.auth import AUTH_METHODS, Exchange, make_exchange
from cubequeue.server.pgwire.errors import (
    DuplicateCursor,
    DuplicatePreparedStatement,
    InvalidAuthorizationSpecification,
    UndefinedParameter,
    error_response,
    notice_response,
)
from cubequeue.server.pgwire.statements import (
    ColumnSpec,
    Portal,
    PreparedStatement,
    columns_of,
    dialect_param_oids,
    dumper_for,
    row_description,
)
from cubequeue.server.pgwire.types import ParamValue, formats_for, load_param
from cubequeue.server.sql import PlainOutcome, PlainSession, describe_plain, run_plain
from cubequeue.storage.errors import (
    FeatureNotSupported,
    InFailedTransaction,
    InternalError,
    InvalidCursorName,
    InvalidStatementName,
    ProtocolViolation,
    QueueError,
    SyntaxError,
)
from cubequeue.storage.results import ResultSet, Row

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
        self.out: list[m.BackendMessage] = []
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

    def take(self) -> list[m.BackendMessage]:
        out, self.out = self.out, []
        return out

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
        from cubequeue.storage.errors import AdminShutdown

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
        self.out.append(error_response(exc, "FATAL"))
        self.state = SessionState.CLOSED

    def _error(self, exc: BaseException) -> None:
        if not isinstance(exc, QueueError):
            _log.error("internal error in the PostgreSQL session", exc_info=exc)
            exc = InternalError(f"internal error: {exc}")
        self.out.append(error_response(exc))
        if self.plain is not None:
            self.plain.fail_transaction()

    def _ready(self) -> None:
        self.out.append(m.ReadyForQuery(self.tx_status))

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
            self.out.append(m.NegotiateProtocolVersion(0, unknown))
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
            self.out.append(self._exchange.start())

    def _authenticate(self, payload: bytes) -> None:
        assert self._exchange is not None
        reply, done = self._exchange.step(payload)
        if reply is not None:
            self.out.append(reply)
        if done:
            self._authenticated()

    def _authenticated(self) -> None:
        assert self.plain is not None and self.backend_key is not None
        self._exchange = None
        self.out.append(m.AuthenticationOk())
        for name, value in self.plain.reported().items():
            self.out.append(m.ParameterStatus(name, value))
        self.out.append(m.BackendKeyData(*self.backend_key))
        self.state = SessionState.READY
        self._ready()

    # --- running statements ---------------------------------------------------------

    def _check_failed_block(self, sql: str) -> None:
        if self.tx_status == "E" and not _TX_END.match(sql):
            raise InFailedTransaction(_IN_FAILED)

    def _run_command(self, cmd: Command) -> Generator[WaitFor, ResultSet, ResultSet]:
        if isinstance(cmd, QueueResultBlocking):
            result = yield WaitFor(cmd, self.process_id)
            return result
        return self.ctx.executor.run(cmd, self.process_id)

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
            self.out.append(notice_response(notice.severity, notice.sqlstate, notice.message))
        return outcome

    def _after_plain(self, outcome: PlainOutcome) -> None:
        for name, value in outcome.parameter_status.items():
            self.out.append(m.ParameterStatus(name, value))

    def _send_rows(self, spec: ColumnSpec, formats: tuple[int, ...], rows: list[Row]) -> None:
        if spec is None or not rows:
            return
        dump = dumper_for(spec, formats)
        out = self.out
        for row in rows:
            out.append(m.DataRow(dump(row)))

    def _simple_statement(self, sql: str) -> Generator[WaitFor, ResultSet, None]:
        self._check_failed_block(sql)
        if is_dialect(sql):
            prepared = self.ctx.executor.prepare(sql)
            if prepared.params:
                raise UndefinedParameter(f"there is no parameter ${prepared.params[0].index}")
            result = yield from self._run_command(prepared.command)
            spec = columns_of(result.columns)
            if spec is not None:
                text = (0,) * len(spec)
                self.out.append(row_description(spec, text))
                self._send_rows(spec, text, result.rows)
                self.out.append(m.CommandComplete(f"{prepared.command.tag} {len(result.rows)}"))
            else:
                self.out.append(m.CommandComplete(prepared.command.tag))
            return
        outcome = self._plain(sql)
        if outcome.result is not None:
            spec = columns_of(outcome.result.columns, outcome.type_oids)
            if spec is not None:
                text = (0,) * len(spec)
                self.out.append(row_description(spec, text))
                self._send_rows(spec, text, outcome.result.rows)
        if outcome.tag:
            self.out.append(m.CommandComplete(outcome.tag))
        else:  # only comments: PostgreSQL's empty query
            self.out.append(m.EmptyQueryResponse())
        self._after_plain(outcome)

    def _query(self, msg: m.Query) -> _Run:
        try:
            statements = split_statements(msg.sql)
            if not statements:
                self.out.append(m.EmptyQueryResponse())
            for sql in statements:
                yield from self._simple_statement(sql)
        except Exception as exc:  # QueueError, or our bug (XX000): the session survives
            self._error(exc)
        self._ready()

    # --- extended query ---------------------------------------------------------------

    def _parse(self, msg: m.Parse) -> None:
        if msg.name and msg.name in self._statements:
            raise DuplicatePreparedStatement(f'prepared statement "{msg.name}" already exists')
        statements = split_statements(msg.query)
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
        self.out.append(m.ParseComplete())

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
        self._check_failed_block(stmt.sql)
        expected = len(stmt.param_oids)
        if len(msg.params) != expected:
            raise ProtocolViolation(
                f"bind message supplies {len(msg.params)} parameters, but prepared statement "
                f'"{stmt.name}" requires {expected}'
            )
        param_formats = formats_for(msg.param_formats, expected, "parameter")
        values = tuple(
            load_param(oid, fmt, raw, i + 1)
            for i, (oid, fmt, raw) in enumerate(
                zip(stmt.param_oids, param_formats, msg.params, strict=True)
            )
        )
        columns = stmt.columns
        formats = formats_for(msg.result_formats, 0 if columns is None else len(columns), "result")
        command = None
        if stmt.prepared is not None:
            command = bind(stmt.prepared.command, values)
        self._portals[msg.portal] = Portal(
            msg.portal, stmt, command, values, formats, columns=columns
        )
        self.out.append(m.BindComplete())

    def _describe(self, msg: m.Describe) -> None:
        if msg.kind == "S":
            stmt = self._statement(msg.name)
            self.out.append(m.ParameterDescription(stmt.param_oids))
            spec, formats = stmt.columns, (0,) * len(stmt.columns or ())
        else:
            portal = self._portal(msg.name)
            spec, formats = portal.columns, portal.formats
        self.out.append(m.NoData() if spec is None else row_description(spec, formats))

    def _execute(self, msg: m.Execute) -> _Run:
        try:
            portal = self._portal(msg.portal)
            if portal.rows is None:
                self._check_failed_block(portal.statement.sql)
                yield from self._run_portal(portal)
            self._send_portal(portal, msg.max_rows)
        except Exception as exc:
            self._error(exc)
            self.state = SessionState.AWAITING_SYNC

    def _run_portal(self, portal: Portal) -> _Run:
        """Run the portal's statement once; its rows are then sent in max_rows slices."""
        stmt = portal.statement
        if stmt.kind == "empty":
            portal.rows = []
            return
        if portal.command is not None:
            result = yield from self._run_command(portal.command)
            portal.tag = portal.command.tag
            portal.counted = portal.columns is not None
            portal.rows = result.rows if portal.counted else []
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
            self.out.append(m.EmptyQueryResponse())
            return
        rows = portal.rows or []
        start = portal.pos
        end = len(rows) if max_rows <= 0 else min(len(rows), start + max_rows)
        self._send_rows(portal.columns, portal.formats, rows[start:end])
        portal.pos = end
        if max_rows > 0 and end - start == max_rows:
            self.out.append(m.PortalSuspended())
            return
        tag = f"{portal.tag} {end - start}" if portal.counted else portal.tag
        self.out.append(m.CommandComplete(tag))

    def _close(self, msg: m.Close) -> None:
        if msg.kind == "S":
            self._statements.pop(msg.name, None)
        else:
            self._portals.pop(msg.name, None)
        self.out.append(m.CloseComplete())

    def _sync(self) -> None:
        if self.tx_status == "I":
            self._portals.clear()
        self._ready()

    def _extended(self, msg: m.FrontendMessage) -> None:
        """Parse / Bind / Describe / Close: errors skip to the next Sync."""
        try:
            if isinstance(msg, m.Parse):
                self._parse(msg)
            elif isinstance(msg, m.Bind):
                self._bind(msg)
            elif isinstance(msg, m.Describe):
                self._describe(msg)
            elif isinstance(msg, m.Close):
                self._close(msg)
        except Exception as exc:
            self._error(exc)
            self.state = SessionState.AWAITING_SYNC

    def _function_call(self, _msg: m.FunctionCall) -> None:
        self._error(FeatureNotSupported("the fast-path function call interface is not supported"))
        self._ready()


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
