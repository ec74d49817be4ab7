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

The actions live in one mixin per phase of the protocol (:mod:`.startup`,
:mod:`.simple_query`, :mod:`.extended_query`, over :mod:`.replies` and
:mod:`.session_core`); this class is their union, the public API and the dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import Any

from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.context import PG_SERVER_VERSION
from cubequeue.server.errors import AdminShutdown
from cubequeue.server.executor import WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import BackendDecoder
from cubequeue.server.pgwire.errors import error_response
from cubequeue.server.pgwire.extended_query import ExtendedQuery
from cubequeue.server.pgwire.row_writer import WireRows
from cubequeue.server.pgwire.session_core import (
    Run,
    SessionContext,
    SessionExecutor,
    SessionHooks,
)
from cubequeue.server.pgwire.simple_query import SimpleQuery
from cubequeue.server.pgwire.startup import Startup
from cubequeue.server.pgwire.states import (
    TRANSITIONS,
    Action,
    IllegalTransition,
    Rule,
    SessionState,
)

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


class PgSession(Startup, SimpleQuery, ExtendedQuery):
    """One connection's protocol: every phase's actions (the mixins), the public API the
    listener drives, and the transition table's dispatch."""

    # --- public API -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.state is SessionState.CLOSED

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
        self, rule: Rule, run: Run, value: ResultSet | None, error: BaseException | None
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

    def _ignore(self, _msg: m.FrontendMessage) -> None:
        return None

    def _terminate(self, _msg: m.Terminate) -> None:
        return None


#: each action of the transition table → the method that performs it
_ACTIONS: dict[Action, Callable[[PgSession, Any], Run | None]] = {
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
_DISPATCH: dict[tuple[SessionState, type], tuple[Rule, Callable[[PgSession, Any], Run | None]]] = {
    key: (rule, _ACTIONS[rule.action]) for key, rule in TRANSITIONS.items()
}
