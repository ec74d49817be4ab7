"""One PostgreSQL connection's asyncio shell around :class:`PgSession`: it only moves
bytes and drives waits (the listening sockets are :mod:`.listener`'s).

Bytes go to the :class:`Decoder`, messages to the session, the session's answers to
``transport.write``. Output is written after every batch of input, so a Flush (or a
Describe that asyncpg sends without Sync) is answered at once. The connection-level work
the session cannot do without I/O lives here too:

* SSLRequest → ``N``, or ``S`` and a TLS upgrade (``loop.start_tls``) when
  ``--tls-cert``/``--tls-key`` are set; GSSENCRequest → ``N``;
* CancelRequest (on its own connection) → ``ctx.connections.cancel(pid, secret)``, then
  close without a reply; the target's running ``RESULT_BLOCKING`` is cancelled and
  the session answers 57014 "canceling statement due to user request";
* a step that waits (``RESULT_BLOCKING`` on callbacks, or a store that answers later in
  a task, ``executor.complete``) runs while this connection queues its later messages
  and every other connection goes on; a client that disconnects just has its wait
  cancelled, which withdraws its waiter;
* backpressure: reading pauses while the transport's write buffer is over its high-water
  mark, or while the messages queued behind a wait hold more than
  :data:`~.queued.MAX_QUEUED_BYTES` (or number more than ``MAX_QUEUED_MESSAGES``): the rest
  waits in the kernel, as PostgreSQL leaves it there while a statement runs;
* a client that half-closes (``shutdown(SHUT_WR)``) after its last message still gets
  every answer, a RESULT_BLOCKING's included; the connection closes once they are sent;
* a step that waits is canceled after the session's ``statement_timeout`` (57014);
* a connection that has not finished startup and authentication within
  :data:`AUTHENTICATION_TIMEOUT_S` (PostgreSQL's ``authentication_timeout``) is closed,
  and one that sent nothing at all within ``--startup-timeout`` is closed sooner;
* a message whose first bytes arrived must be whole within ``--message-timeout``, or
  the connection gets FATAL 08P01 and is closed: the timer is armed only when a read
  ends inside a message, and its clock stops while reading is paused here;
* the :class:`~.acceptor.Admission` that accepted it hears when it was heard, logged in
  (then the user's caps apply) or lost, and may shed it while it is silent;
* ``--tls-required``: a startup packet in plaintext is refused with 28000, as a
  PostgreSQL server whose pg_hba.conf has only ``hostssl`` lines answers, logged at
  WARNING and counted (``cubequeue_logins_refused{reason="tls_required"}``);
* on shutdown every connection gets FATAL 57P01 and is closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, cast

from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.errors import (
    AdminShutdown,
    ProtocolViolation,
    QueryCanceled,
    TooManyConnections,
)
from cubequeue.server.executor import BlockingWait, WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.acceptor import Admission, Admitted
from cubequeue.server.pgwire.decoder import Decoder, FramingError
from cubequeue.server.pgwire.encoder import READY
from cubequeue.server.pgwire.errors import InvalidAuthorizationSpecification
from cubequeue.server.pgwire.queued import Fatal, Queued, QueuedMessages
from cubequeue.server.pgwire.session import PgSession
from cubequeue.server.pgwire.states import SessionState

if TYPE_CHECKING:
    from cubequeue.server.context import ConnectionInfo, ServerContext

__all__ = ["AUTHENTICATION_TIMEOUT_S", "WRITE_HIGH_WATER", "PgProtocol"]

_log = logging.getLogger("cubequeue.pg")

AUTHENTICATION_TIMEOUT_S: Final = 60.0
#: transport write buffer high-water mark (bytes) before reading pauses
WRITE_HIGH_WATER: Final = 1 << 20
_CANCELED = "canceling statement due to user request"
#: the encoded ReadyForQuery replies (each its own chunk of the session's output)
_READY_REPLIES: Final = frozenset(READY.values())


class PgProtocol(Admitted):
    def __init__(
        self, ctx: ServerContext, tls: ssl.SSLContext | None,
        admission: Admission | None = None,
    ) -> None:
        self.ctx = ctx
        self.tls = tls
        self._admission = admission
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.decoder = Decoder(ctx.config.max_message_size)
        self.session = PgSession(ctx, self)
        self.info: ConnectionInfo | None = None
        self.pid: int | None = None
        #: messages queued behind a wait, and the bytes they hold
        self._pending = QueuedMessages()
        self._eof = False
        #: a step's wait (a task, or a RESULT_BLOCKING on callbacks) or a TLS upgrade
        self._busy: asyncio.Task[object] | BlockingWait | None = None
        #: why a running wait was cancelled: "user" (57014), "shutdown" (57P01) or the
        #: FATAL error that ends the connection
        self._cancel_reason: str | QueueError | None = None
        self._write_paused = False
        #: a streamed result waiting for the client to read (:meth:`_drain_rows`)
        self._drained: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._lost = False
        self._closing = False
        self._auth_timer: asyncio.TimerHandle | None = None
        self._silence_timer: asyncio.TimerHandle | None = None
        #: the message the decoder holds part of: when its first bytes came, and its deadline
        self._partial_since: float | None = None
        self._message_timer: asyncio.TimerHandle | None = None
        self._user: str | None = None
        self._encrypted = False
        self._unix = False
        self._refusal: QueueError | None = None

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast("asyncio.Transport", transport)
        if self._closing:  # shed before it was set up
            self.transport.abort()
            return
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if not isinstance(peer, tuple):
            self._unix = True
            self.peer = "[local]"
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        loop = asyncio.get_running_loop()
        self._auth_timer = loop.call_later(AUTHENTICATION_TIMEOUT_S, self._auth_timeout)
        self._silence_timer = loop.call_later(
            self.ctx.config.startup_timeout, self._silence_timeout
        )
        try:
            self.info = self.ctx.connections.open_pending("pg", self.peer, self._shutdown)
        except TooManyConnections as exc:
            # answered at the startup packet, as PostgreSQL does, so that a client in
            # the middle of its SSLRequest reads the reason rather than a broken exchange
            _log.warning("refusing %s: %s", self.peer, exc.message,
                         extra={"peer": self.peer, "sqlstate": exc.sqlstate})
            self._refusal = exc

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if self._silence_timer is not None:
            self._silence_timer.cancel()
            self._silence_timer = None
            if self._admission is not None:
                self._admission.heard(self)
        decoded: Sequence[Queued]
        try:
            decoded = self.decoder.feed(data)
        except FramingError as exc:
            decoded = [*exc.decoded, Fatal(exc)]
        if self.decoder.partial:
            self._partial(bool(decoded))
        elif self._partial_since is not None:
            self._partial_since = None  # its timer, if armed, finds nothing and ends
        if self._pending or not self._free() or self.session.state is SessionState.STARTUP:
            # startup goes the queued way: _first_packet checks that nothing follows an
            # SSLRequest in the same read
            self._pending.add(decoded)
            self._pump()
            return
        # Nothing queued and nothing running (every round trip of a client that waits for
        # its answers): handle the batch where it lies; only what is left when a step
        # starts waiting is queued and its bytes counted, since only queued messages
        # hold memory the reading pause has to bound.
        # The session runs the batch in one call (PgSession.handle_run) up to a wait, a
        # close or a message of the listener's own (_SPECIAL, handled here one by one).
        session = self.session
        i, total = 0, len(decoded)
        while i < total:
            i, wait = session.handle_run(decoded, i, _SPECIAL)
            if wait is not None:
                self._start_wait(wait)
            elif i < total and type(decoded[i]) in _SPECIAL:
                if not self._handle(decoded[i]):
                    return
                i += 1
            if session.state is SessionState.CLOSED:
                self._close()
                return
            if not self._free():
                self._pending.add(decoded[i:])
                break
        self._pumped()

    def eof_received(self) -> bool | None:
        """A half-closed client sends nothing more but still reads: keep the transport
        open until every queued message is answered (:meth:`_pump` closes it). TLS
        cannot stay half-open, so there the transport closes at once."""
        if self._encrypted:
            return None
        self._eof = True
        self._pump()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._closing = True
        if self._busy is not None:
            self._busy.cancel()  # withdraws the waiter (executor.complete)
        self.session.abandon()
        self._pending.drop()
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._silence_timer is not None:
            self._silence_timer.cancel()
        if self._message_timer is not None:
            self._message_timer.cancel()
            self._message_timer = None
        if self._admission is not None:
            self._admission.lost(self)
        if self.pid is not None:
            self.ctx.connections.unregister_backend(self.pid)
        if self.info is not None:
            self.ctx.connections.close(self.info)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)
        self._update_reading()
        self._pump()

    # --- SessionHooks -----------------------------------------------------------------

    @property
    def conn_id(self) -> int | None:
        """The connection log's id, so statement log lines carry the same one."""
        return self.info.id if self.info is not None else None

    def admit(self, user: str) -> tuple[int, int]:
        if self.ctx.shutting_down:
            raise AdminShutdown("the database system is shutting down")
        self._user = user  # counted against its caps once authenticated (_pump)
        pid, secret = self.ctx.connections.new_backend_key()
        self.ctx.connections.register_backend(pid, secret, self._cancel)
        self.pid = pid
        return pid, secret

    # --- the message pump -------------------------------------------------------------

    def _free(self) -> bool:
        """The next message may be handled now: no wait or TLS upgrade runs, output flows."""
        return self._busy is None and not self._write_paused and not self._closing

    def _pump(self) -> None:
        pending = self._pending
        while pending and self._free():
            item = pending.take()
            if not self._handle(item):
                return
        self._pumped()

    def _handle(self, item: Queued) -> bool:
        """One message to the session; False once the connection is closing."""
        session = self.session
        if type(item) not in _SPECIAL:
            wait = session.handle(item)  # type: ignore[arg-type]  # Fatal is in _SPECIAL
            if wait is not None:
                self._start_wait(wait)
        elif isinstance(item, Fatal):
            _log.info(
                "protocol violation from %s: %s", self.peer, item.error.message,
                extra={"peer": self.peer, "sqlstate": item.error.sqlstate},
            )  # fmt: skip
            session.fatal(item.error)
        elif isinstance(item, m.SSLRequest | m.GSSENCRequest | m.CancelRequest):
            self._first_packet(item)
            return not self._closing
        elif isinstance(item, m.StartupMessage) and self._refusal is not None:
            session.fatal(self._refusal)
        elif isinstance(item, m.StartupMessage) and self._refuse_plaintext():
            user = item.get("user") or ""
            refusal = InvalidAuthorizationSpecification(
                f'no pg_hba.conf entry for host "{self.peer.rpartition(":")[0]}", '
                f'user "{user}", no encryption (--tls-required)'
            )
            # a refused login is a WARNING (README, Security), rate-limited per template
            # and peer host by the log handler's filter (server/logs.py), and counted
            _log.warning("refusing a plaintext login from %s: %s", self.peer, refusal.message,
                         extra={"peer": self.peer, "user": user,
                                "sqlstate": refusal.sqlstate})
            self.ctx.metrics.login_refused("tls_required")
            session.fatal(refusal)
        else:
            wait = session.handle(item)
            if wait is not None:
                self._start_wait(wait)
        if session.state is SessionState.CLOSED:  # ``closed``, without a property call
            self._close()
            return False
        return True

    def _pumped(self) -> None:
        """After a batch: the login's caps, a half-closed client's close, the answers."""
        session = self.session
        if self._auth_timer is not None and session.state is SessionState.READY:
            self._auth_timer.cancel()
            self._auth_timer = None
            if self._admission is not None:
                self._admission.authenticated(self)
            if not self._authenticated():
                return
        if self._eof and self._busy is None and not self._pending and not self._closing:
            self._close()  # half-closed: everything asked is answered
            return
        if self._busy is None or isinstance(self._busy, BlockingWait):
            self._flush()
        else:  # a store step waits: the replies so far go out with its answer
            self._flush_answered()
        self._update_reading()

    def _authenticated(self) -> bool:
        """Count the just logged-in connection against its user's caps; False (and the
        connection refused with 53300, the login's answers dropped) when one is full."""
        info, user = self.info, self._user
        if info is None or not info.pending or user is None:
            return True
        try:
            self.ctx.connections.authenticate(info, user)
        except TooManyConnections as exc:
            self.session.take_bytes()  # AuthenticationOk … ReadyForQuery: never sent
            self.session.fatal(exc)
            self._close()
            return False
        return True

    def _refuse_plaintext(self) -> bool:
        return self.ctx.config.tls_required and not self._encrypted and not self._unix

    def _flush(self) -> None:
        data = self.session.take_bytes()
        if data and self.transport is not None and not self._lost:
            self.transport.write(data)

    def _flush_answered(self) -> None:
        """Before a store step that waits, send the replies only if a round trip among
        them is complete (a ReadyForQuery): PostgreSQL sends a batch's replies when the
        batch ends, so a BindComplete goes out with its statement's rows, one write per
        round trip instead of two (a store that waits on every statement, the PostgreSQL
        one, paid a write, and the client a wake-up, for each BindComplete). A
        RESULT_BLOCKING, which may wait for seconds, still sends them at once."""
        if any(chunk in _READY_REPLIES for chunk in self.session.wire):
            self._flush()

    def _write_raw(self, data: bytes) -> None:
        if self.transport is not None and not self._lost:
            self.transport.write(data)

    def _close(self) -> None:
        self._flush()
        self._closing = True
        self._pending.drop()
        if self.transport is not None:
            self.transport.close()

    def _update_reading(self) -> None:
        if self.transport is None or self._lost or self._eof:
            return
        pending = self._pending
        pause = self._write_paused or (pending.full if pending else False)
        if pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
            if self._partial_since is not None:  # the client could not send meanwhile
                self._partial_since = asyncio.get_running_loop().time()

    # --- untyped first packets --------------------------------------------------------

    def _first_packet(self, msg: m.SSLRequest | m.GSSENCRequest | m.CancelRequest) -> None:
        if isinstance(msg, m.CancelRequest):
            self.ctx.connections.cancel(msg.process_id, msg.secret_key)
            self._close()
            return
        if self.decoder.buffered or self._pending:
            # bytes after an SSLRequest would be read as plaintext (CVE-2021-23214)
            self.session.fatal(ProtocolViolation("received unencrypted data after SSL request"))
            self._close()
            return
        if isinstance(msg, m.SSLRequest) and self.tls is not None and self._refusal is None:
            self._write_raw(b"S")
            upgrade = asyncio.get_running_loop().create_task(self._start_tls(self.tls))
            upgrade.add_done_callback(self._tls_done)
            self._busy = upgrade
            return
        self._write_raw(b"N")

    async def _start_tls(self, tls: ssl.SSLContext) -> object:
        loop = asyncio.get_running_loop()
        assert self.transport is not None
        new = await loop.start_tls(self.transport, self, tls, server_side=True)
        if new is not None:
            self.transport = new
        self._encrypted = True
        self.tls = None  # a second SSLRequest (inside TLS) is answered N
        return None

    def _tls_done(self, task: asyncio.Task[object]) -> None:
        self._busy = None
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                _log.info("TLS handshake with %s failed: %s", self.peer, task.exception())
            if self.transport is not None:
                self.transport.abort()
            return
        self._pump()

    # --- blocking waits and cancel ----------------------------------------------------

    def _start_wait(self, wait: WaitFor) -> bool:
        """Run a step that waits; False when it was answered at once (a RESULT_BLOCKING
        whose result is there: the session carried on and nothing waits)."""
        session = self.session
        plain = session.plain
        timeout_ms = plain.statement_timeout_ms if plain else 0
        executor = self.ctx.executor
        while wait.blocking:  # on callbacks, no task (executor.BlockingWait)
            session.row_sink(self._drain_rows)  # a blocking wait streams nothing
            blocking = executor.begin_blocking(wait, self._wait_done, timeout_ms)
            if not blocking.done():
                self._flush()  # it may wait long: what it answered so far goes now
                self._busy = blocking
                return True
            error = blocking.exception()
            after = (session.resume(error=error) if error is not None
                     else session.resume(blocking.result()))
            if after is None:
                return False
            wait = after
        self._flush_answered()
        coro = executor.complete(wait, timeout_ms, session.row_sink(self._drain_rows))
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(self._wait_done)
        self._busy = task
        return True

    async def _drain_rows(self) -> None:
        """A streamed result's slice is encoded: send it, and while the transport's
        buffer is over its high-water mark (a client reading slowly) wait until it
        drains, so a large result is never held in memory whole; else yield one
        event-loop turn to the other connections."""
        self._flush()
        if not self._write_paused or self._lost:
            await asyncio.sleep(0)
            return
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await self._drained
        finally:
            self._drained = None

    def _wait_done(self, task: asyncio.Task[object] | BlockingWait) -> None:
        self._busy = None
        if self._lost:
            return
        reason, self._cancel_reason = self._cancel_reason, None
        if task.cancelled():
            if reason is not None and reason != "user":
                self.session.abandon()
                if isinstance(reason, QueueError):
                    self.session.fatal(reason)
                else:
                    self.session.shutdown()
                self._close()
                return
            wait = self.session.resume(error=QueryCanceled(_CANCELED))
        else:
            exc = task.exception()
            if exc is not None:
                wait = self.session.resume(error=exc)
            else:
                result = task.result()
                assert isinstance(result, ResultSet)
                wait = self.session.resume(result)
        if wait is not None and self._start_wait(wait):
            return
        if self.session.closed:
            self._close()
            return
        self._pump()

    def _cancel(self) -> None:
        """CancelRequest with this connection's key: interrupt a running wait, if any."""
        if self._busy is not None and self._cancel_reason is None and not self._closing:
            self._cancel_reason = "user"
            self._busy.cancel()

    def _shutdown(self) -> None:
        if self._lost or self._closing:
            return
        if self._busy is not None and self.session.state is not SessionState.STARTUP:
            self._cancel_reason = "shutdown"
            self._busy.cancel()
            return
        self.session.shutdown()
        self._close()

    def _silence_timeout(self) -> None:
        self._silence_timer = None
        if not self._lost and not self._closing:
            _log.info("closing %s: sent nothing within %d s (--startup-timeout)", self.peer,
                      self.ctx.config.startup_timeout)
            if self.transport is not None:
                self.transport.abort()

    def _partial(self, completed: bool) -> None:
        """A read ended inside a message: a new one (the last read ended between
        messages, or this one completed some) starts its clock, and the deadline is
        armed unless it already is."""
        if completed or self._partial_since is None:
            loop = asyncio.get_running_loop()
            self._partial_since = loop.time()
            if self._message_timer is None:
                self._message_timer = loop.call_later(self.ctx.config.message_timeout,
                                                      self._message_deadline)

    def _message_deadline(self) -> None:
        """The oldest unfinished message's deadline: close the connection if it is
        still unfinished, else re-arm for the one that is."""
        self._message_timer = None
        since = self._partial_since
        if since is None or self._lost or self._closing:
            return
        loop = asyncio.get_running_loop()
        timeout = self.ctx.config.message_timeout
        if self._reading_paused:  # not the client's delay: its clock restarts
            since = self._partial_since = loop.time()
        left = since + timeout - loop.time()
        if left > 0:
            self._message_timer = loop.call_later(left, self._message_deadline)
            return
        held = self.decoder.buffered
        _log.info("closing %s: a message was left unfinished for %d s, %d bytes of it "
                  "received (--message-timeout)", self.peer, timeout, held,
                  extra={"peer": self.peer, "sqlstate": ProtocolViolation.sqlstate})
        self._end(ProtocolViolation(
            f"incomplete message: {held} bytes of it received in {timeout} s "
            "(--message-timeout)"))

    def _end(self, error: QueueError) -> None:
        """FATAL ``error`` and close; a running wait is cancelled first."""
        if self._busy is not None and self.session.state is not SessionState.STARTUP:
            self._cancel_reason = error
            self._busy.cancel()
            return
        self.session.fatal(error)
        self._close()

    def shed(self, reason: str, why: str) -> None:
        """The accept loop needs this silent connection's place (or descriptor)."""
        _log.info("closing %s: %s", self.peer, why, extra={"peer": self.peer})
        self.ctx.metrics.connection_shed(reason)
        if self.transport is None:
            self._closing = True  # connection_made aborts it at once
        elif not self._lost:
            self.transport.abort()

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if self.session.state in (SessionState.STARTUP, SessionState.AUTH) and not self._lost:
            _log.info("closing %s: no startup within %.0f s", self.peer, AUTHENTICATION_TIMEOUT_S)
            if self.transport is not None:
                self.transport.abort()


#: what :meth:`PgProtocol._handle` looks at before the session sees it
_SPECIAL: Final = frozenset({Fatal, m.SSLRequest, m.GSSENCRequest, m.CancelRequest,
                             m.StartupMessage})

