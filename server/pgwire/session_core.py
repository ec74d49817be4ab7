"""What every phase of a PostgreSQL connection shares: the session's fields, the
executor and server it talks to (as Protocols), and the few helpers every phase calls
(send, an ErrorResponse, ReadyForQuery, the split statement text).

:class:`~.session.PgSession` is this core plus one mixin per phase of the protocol, as
the pgwire crate has one handler per phase: :mod:`.startup` (startup and
authentication), :mod:`.simple_query` (simple Query and COPY), :mod:`.extended_query`
(Parse/Bind/Describe/Execute/Close/Sync) over :mod:`.replies` (encoding results, and the
per-connection reply caches). The mixins add methods only; the transition table's
dispatch (:mod:`.session`) calls them directly, so the split costs no call per message.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from datetime import UTC, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from cubequeue.grammar import split_statements
from cubequeue.grammar.commands import Command
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import Column, ResultSet
from cubequeue.server.executor import Binder, Origin, PlainWait, Prepared, Step, WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.auth import Exchange
from cubequeue.server.pgwire.encoder import READY, encode
from cubequeue.server.pgwire.errors import error_response
from cubequeue.server.pgwire.row_writer import ShapeFor
from cubequeue.server.pgwire.statements import Names, ResultShape
from cubequeue.server.pgwire.states import Rule, SessionState
from cubequeue.server.sql import PlainOutcome, PlainSession

if TYPE_CHECKING:
    from cubequeue.server.config import Config
    from cubequeue.server.sql.outcome import PlainDescription

__all__ = ["Run", "SessionContext", "SessionCore", "SessionExecutor", "SessionHooks", "split"]

#: texts up to this length keep their split_statements outcome (see split)
_SPLIT_CACHE_MAX_LEN = 256


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


#: a step that waits: yields its :class:`WaitFor`, is sent the result, then answers
Run = Generator[WaitFor, ResultSet, None]


class SessionCore:
    """The session's fields and the helpers every phase uses."""

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
        self._suspended: Run | None = None
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

    @property
    def tx_status(self) -> str:
        return self.plain.tx_status if self.plain is not None else "I"

    @property
    def process_id(self) -> str | None:
        return self.plain.process_id if self.plain is not None else None

    def send(self, msg: m.BackendMessage) -> None:
        self.wire.append(encode(msg))

    def _error(self, exc: BaseException) -> None:
        self.send(error_response(self.executor.failed(self.plain, exc)))

    def _ready(self) -> None:
        self.wire.append(READY[self.tx_status])

    def _session(self) -> PlainSession:
        assert self.plain is not None, "statements run only after startup"
        return self.plain


@lru_cache(maxsize=1024)
def _split_cached(sql: str) -> tuple[str, ...]:
    return tuple(split_statements(sql))


def split(sql: str) -> tuple[str, ...]:
    """:func:`split_statements`, remembered for short texts (``SELECT 1``, ``BEGIN``,
    a prepared statement's text): they recur, a long one (a payload) seldom does."""
    if len(sql) <= _SPLIT_CACHE_MAX_LEN:
        return _split_cached(sql)
    return tuple(split_statements(sql))


