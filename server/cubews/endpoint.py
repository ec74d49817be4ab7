"""The ``/ws`` endpoint: the asyncio shell around :class:`~.session.WsSession`.

What to answer is the session's business (socket-free, driven by bytes in tests); this
module only moves frames and runs waits:

* **A task only for a store that answers later.** Cube's driver multiplexes everything
  (cache, queue, the RESULT_BLOCKING long polls and the ACKs that wake them) over one
  socket and matches answers by ``message_id``, so messages are answered in any order.
  A statement the store answers at once (most of them) is run and answered inside the
  transport's ``data_received`` (:mod:`.inline_frames`). A RESULT_BLOCKING is held on callbacks,
  as on the PostgreSQL wire (``Executor.begin_blocking``, one
  :class:`~cubequeue.server.blocking_wait.BlockingWait`: no task), and answered when it
  ends; a store step that answers later gets a task (``Executor.complete``). Pongs and
  ACKs keep flowing while long polls wait.
* **Dedup confirmation.** An answer kept for resends (:mod:`.dedup`) is forgotten once
  the client has provably read it: after the answers go out, the socket sends a ping
  (at most one per ``CONFIRM_INTERVAL_S``, shared by the answers sent meanwhile), and
  the pong (which the client sends only after reading every earlier frame) confirms
  them. Answers that were never confirmed stay for ``--ws-dedup-ttl`` seconds, within
  ``--max-ws-resend-bytes`` per connection_id and ``--max-ws-resend-total-bytes`` in
  all. A wait whose answer other sockets share outlives this socket.
* **Deadlines**: a store step that waits is canceled after the session's
  ``statement_timeout`` (``--statement-timeout``), answered with an HttpError.
* **Sizes**: the transport refuses anything over twice ``--max-message-size`` with close
  code 1009 (see ``http.py``); the session answers a message over the limit itself.
* ``x-process-id``: the header is capped at :data:`MAX_PROCESS_ID_LEN` characters, the
  cap Cube Store puts on the header; the process id a queue item records has its own
  limit in bytes, checked by the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from cubequeue.grammar.errors import QueueError
from cubequeue.server.cubews.dedup import DedupTable, Key
from cubequeue.server.cubews.frame_sink import Frame, FrameParts, FrameSink
from cubequeue.server.cubews.inline_frames import InlineFrames
from cubequeue.server.cubews.session import (
    Await,
    Close,
    Event,
    Send,
    WsSession,
    oversize_request_error,
)
from cubequeue.server.row_sink import StreamedRows

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from websockets.asyncio.server import ServerConnection

    from cubequeue.server.context import ConnectionInfo, ServerContext
    from cubequeue.server.executor import BlockingWait

__all__ = ["MAX_PROCESS_ID_LEN", "WsEndpoint", "oversize_request_error"]

_log = logging.getLogger("cubequeue.ws")

#: the ``x-process-id`` header's own cap, in characters, as Cube Store has it
#: (``QUEUE_ITEM_PROCESS_ID_MAX_LEN``); not the store's byte limit on a process id
MAX_PROCESS_ID_LEN = 64
#: how long a confirming ping may wait for its pong before the answers stay cached
CONFIRM_TIMEOUT_S = 30.0
#: the shortest pause between two confirming pings of one socket: answers that go out
#: meanwhile share the next ping. A ping per answer doubled the frames, writes and
#: wake-ups of every statement (and made the client pong each one); answers wait this
#: much longer in the resend table, which its byte limits bound anyway
CONFIRM_INTERVAL_S = 0.05
#: the longest pause between two sweeps of expired dedup answers
MAX_SWEEP_INTERVAL_S = 5.0


class WsEndpoint:
    """State shared by every socket of one server: the dedup table and its sweeper."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.max_message_size = ctx.config.max_message_size
        config = ctx.config
        self.dedup: DedupTable[_Socket] = DedupTable(
            float(config.ws_dedup_ttl),
            max_bytes_per_connection=config.max_ws_resend_bytes,
            max_bytes_total=config.max_ws_resend_total_bytes,
        )
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def _sweep_forever(self) -> None:
        interval = max(0.05, min(MAX_SWEEP_INTERVAL_S, self.dedup.ttl_s / 4))
        while True:
            await asyncio.sleep(interval)
            self.dedup.sweep()

    async def handle(self, ws: ServerConnection) -> None:
        """Serve one upgraded socket until it closes (the handshake checks ran in http.py)."""
        headers = ws.request.headers if ws.request is not None else None
        process_id = headers.get("x-process-id") if headers is not None else None
        user = getattr(ws, "username", None)
        peer = _peer(ws)
        try:
            info = self.ctx.connections.open("ws", user, peer, lambda: _shutdown_socket(ws))
        except QueueError as exc:
            await ws.close(CloseCode.TRY_AGAIN_LATER, exc.message[:120])
            return
        sock = _Socket(self, ws, info, process_id, user)
        try:
            await sock.serve()
        finally:
            sock.stop(cancel_all=self.ctx.shutting_down)
            self.ctx.connections.close(info)


_closing: set[asyncio.Task[None]] = set()


def _shutdown_socket(ws: ServerConnection) -> None:
    task = asyncio.get_running_loop().create_task(ws.close(CloseCode.GOING_AWAY, "server shutting down"))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


def _peer(ws: ServerConnection) -> str:
    address = ws.remote_address
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


class _Socket:
    """One client socket: its waiting tasks and its answers awaiting confirmation."""

    def __init__(
        self,
        endpoint: WsEndpoint,
        ws: ServerConnection,
        info: ConnectionInfo,
        process_id: str | None,
        user: str | None,
    ) -> None:
        self.endpoint = endpoint
        self.ws = ws
        self.info = info
        ctx = endpoint.ctx
        config = ctx.config
        self.session: WsSession[_Socket] = WsSession(
            ctx.executor,
            endpoint.dedup,
            self,
            process_id=process_id,
            user=user,
            server_version=ctx.server_version,
            max_message_size=endpoint.max_message_size,
            conn_id=info.id,
            peer=info.peer,
            max_blocking_waits=config.max_ws_blocking_waits,
            max_blocking_message_bytes=config.max_blocking_message_bytes,
            statement_timeout_ms=config.statement_timeout,
        )
        self.frames = InlineFrames(ws, self._receive)
        #: waits that die with the socket (no connection_id: nobody else wants the answer)
        self._private: set[asyncio.Task[None] | BlockingWait] = set()
        #: waits whose answer is shared through the dedup table (kept when the socket goes)
        self._shared: set[asyncio.Task[None] | BlockingWait] = set()
        #: closes asked for by the session (an unexpected command)
        self._closing: set[asyncio.Task[None] | BlockingWait] = set()
        self._unconfirmed: list[Key] = []
        self._wake = asyncio.Event()
        self._confirmer: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        self._confirmer = asyncio.get_running_loop().create_task(self._confirm_forever())
        self.frames.attach()
        try:
            # Only what InlineFrames hands on arrives here: a text message, a fragmented one,
            # and any message parsed before it took over.
            async for message in self.ws:
                if isinstance(message, str):
                    for event in self.session.receive(message):
                        if isinstance(event, Close):
                            with contextlib.suppress(ConnectionClosed):
                                await self.ws.close(event.code, event.reason)
                    return
                try:
                    self._receive(message)
                finally:
                    self.frames.ran()
        except ConnectionClosed as exc:
            if exc.rcvd is None and exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                _log.warning("ws connection %d: %s", self.info.id, exc.sent.reason,
                             extra={"conn_id": self.info.id})

    def _receive(self, data: bytes) -> None:
        """One binary message, answered now unless a step has to wait (then a task)."""
        self._perform(self.session.receive(data))

    def _perform(self, events: list[Event[_Socket]]) -> None:
        for event in events:
            if isinstance(event, Send):
                event.to.deliver(event.frame, event.key)
            elif isinstance(event, Close):
                self._spawn(self._close(event), self._closing)
            elif event.wait.blocking:
                self._hold(event)
            else:
                self._spawn(self._wait(event), self._shared if event.shared else self._private)

    def _spawn(self, step: Coroutine[None, None, None],
               tasks: set[asyncio.Task[None] | BlockingWait]) -> None:
        task = asyncio.get_running_loop().create_task(step)
        tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._private.discard(task)
        self._shared.discard(task)
        self._closing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("ws message task failed", exc_info=task.exception(),
                       extra={"conn_id": self.info.id})

    def stop(self, *, cancel_all: bool) -> None:
        if self._confirmer is not None:
            self._confirmer.cancel()
        for task in list(self._private) + (list(self._shared) if cancel_all else []):
            task.cancel()

    def deliver(self, data: Frame, key: Key | None) -> bool:
        """Send one answer; False when the socket is gone (the answer stays cached).
        A huge one goes out a fragment per turn; it is confirmed once all written."""
        if isinstance(data, FrameParts):
            if not self.frames.open:
                return False
            self._spawn(self._send_parts(data, key), self._private)
            return True
        if not self.frames.send(data):
            return False
        if key is not None:
            self._confirm(key)
        return True

    def _confirm(self, key: Key) -> None:
        self._unconfirmed.append(key)
        if not self._wake.is_set():
            self._wake.set()

    async def _send_parts(self, data: FrameParts, key: Key | None) -> None:
        if await self.frames.send_parts(data) and key is not None:
            self._confirm(key)

    async def _confirm_forever(self) -> None:
        dedup = self.endpoint.dedup
        loop = asyncio.get_running_loop()
        next_ping = loop.time()
        while True:
            await self._wake.wait()
            pause = next_ping - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            self._wake.clear()
            next_ping = loop.time() + CONFIRM_INTERVAL_S
            batch, self._unconfirmed = self._unconfirmed, []
            try:
                pong = await self.ws.ping()
                await asyncio.wait_for(pong, CONFIRM_TIMEOUT_S)
            except (ConnectionClosed, TimeoutError):
                return  # unconfirmed answers stay cached until the TTL, for the resend
            for key in batch:
                dedup.confirmed(key)

    async def _close(self, event: Close) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(event.code, event.reason)

    def _hold(self, event: Await) -> None:
        """Hold a RESULT_BLOCKING on the executor's callbacks (no task): answered now when
        the store answers at once, else when it is woken, times out or fails; a shared
        one outlives this socket (others want it)."""
        timeout_ms = self.session.plain.statement_timeout_ms
        blocking = self.endpoint.ctx.executor.begin_blocking(
            event.wait, lambda ended: self._blocking_done(ended, event), timeout_ms)
        if blocking.done():
            self._settle_blocking(blocking, event)
            return
        (self._shared if event.shared else self._private).add(blocking)

    def _blocking_done(self, blocking: BlockingWait, event: Await) -> None:
        self._private.discard(blocking)
        self._shared.discard(blocking)
        if blocking.cancelled():  # the socket went, or shutdown: nobody is answered
            self.session.abandon(event.ticket)
            return
        try:
            self._settle_blocking(blocking, event)
        except Exception:
            _log.exception("ws wait failed", extra={"conn_id": self.info.id})

    def _settle_blocking(self, blocking: BlockingWait, event: Await) -> None:
        error = blocking.exception()
        if error is not None:
            self._perform(self.session.settle(event.ticket, error=error))
        else:
            self._perform(self.session.settle(event.ticket, blocking.result()))

    async def _wait(self, event: Await) -> None:
        """Run a store step that answers later; a shared one outlives this socket."""
        sink = FrameSink()  # a listing the store streams is encoded a slice per turn
        try:
            timeout_ms = self.session.plain.statement_timeout_ms
            result = await self.endpoint.ctx.executor.complete(event.wait, timeout_ms, sink)
            frame = None
            if isinstance(result, StreamedRows) and sink.begun:
                ticket = event.ticket
                frame = await sink.seal(ticket.message_id, ticket.connection_id)
        except asyncio.CancelledError:
            self.session.abandon(event.ticket)
            raise
        except Exception as exc:
            self._perform(self.session.settle(event.ticket, error=exc))
            return
        self._perform(self.session.settle(event.ticket, result, sink=sink, frame=frame))
