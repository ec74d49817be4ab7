"""The ``/ws`` endpoint: Cube Store's WebSocket protocol on one socket (cube-client.md §3).

* **One task per message.** Cube's driver multiplexes everything (cache, queue, the
  RESULT_BLOCKING long polls and the ACKs that wake them) over one socket and matches
  answers by ``message_id`` (§3.2), so messages run concurrently and are answered in
  any order. The receive loop only spawns tasks; it never waits on a statement, so
  pongs and ACKs keep flowing while long polls wait.
* **Dedup** by (connection_id, message_id) across sockets (:mod:`.dedup`): a resend
  after a reconnect never runs a statement twice. An answer is forgotten once the
  client has provably read it: after the answers go out, the socket sends a ping, and
  the pong (which the client sends only after reading every earlier frame) confirms
  them. Answers that were never confirmed stay for ``--ws-dedup-ttl`` seconds.
* **Sizes** (config.md ``--max-message-size``, Cube Store ``http/mod.rs``): a message
  over the limit gets an HttpError naming it, on a socket that stays up; the transport
  refuses anything over twice the limit with close code 1009 (see ``http.py``).
* Cube Store's reactions to protocol errors: a message that is not a flatbuffer is
  logged and ignored (its id is unknown); a non-binary message, or a command other
  than HttpQuery, closes the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from cubequeue.grammar.errors import QueueError
from cubequeue.server.cubews.codec import decode_message, encode_error, encode_result_set
from cubequeue.server.cubews.dedup import JOINED, RUN, Cached, DedupTable, Key
from cubequeue.server.cubews.execute import execute_query
from cubequeue.server.cubews.messages import HttpMessage, HttpQuery

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection

    from cubequeue.server.context import ConnectionInfo, ServerContext
    from cubequeue.server.sql.session import PlainSession

__all__ = ["MAX_PROCESS_ID_LEN", "WsEndpoint", "oversize_request_error"]

_log = logging.getLogger("cubequeue.ws")

#: Cube Store caps the ``x-process-id`` header (``QUEUE_ITEM_PROCESS_ID_MAX_LEN``).
MAX_PROCESS_ID_LEN = 64
#: how long a confirming ping may wait for its pong before the answers stay cached
CONFIRM_TIMEOUT_S = 30.0
#: the longest pause between two sweeps of expired dedup answers
MAX_SWEEP_INTERVAL_S = 5.0


def oversize_request_error(size: int, limit: int) -> str:
    """Cube Store's answer to a request over the message limit, naming our knob."""
    return (
        f"Request of {size} bytes exceeds the maximum message size of {limit} bytes. "
        "Reduce the size of the query, or raise --max-message-size "
        "(CUBEQUEUE_MAX_MESSAGE_SIZE)."
    )


class WsEndpoint:
    """State shared by every socket of one server: the dedup table and its sweeper."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.max_message_size = ctx.config.max_message_size
        self.dedup: DedupTable[_Socket] = DedupTable(float(ctx.config.ws_dedup_ttl))
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
    """One client socket: its tasks, its process id, its answers awaiting confirmation."""

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
        self.process_id = process_id
        self.user = user
        self._session: PlainSession | None = None
        #: tasks that die with the socket (no connection_id: nobody else wants the answer)
        self._private: set[asyncio.Task[None]] = set()
        #: tasks whose answer is shared through the dedup table (kept when the socket goes)
        self._shared: set[asyncio.Task[None]] = set()
        self._unconfirmed: list[Key] = []
        self._wake = asyncio.Event()
        self._confirmer: asyncio.Task[None] | None = None

    def session(self) -> PlainSession:
        if self._session is None:
            from cubequeue.server.pgwire.session import PG_SERVER_VERSION
            from cubequeue.server.sql.session import PlainSession

            params = {"process_id": self.process_id} if self.process_id is not None else None
            self._session = PlainSession(
                server_version=f"{PG_SERVER_VERSION} (cubequeue {self.endpoint.ctx.version})",
                user=self.user or "cube",
                startup_params=params,
            )
        return self._session

    async def serve(self) -> None:
        self._confirmer = asyncio.get_running_loop().create_task(self._confirm_forever())
        try:
            async for message in self.ws:
                if isinstance(message, str):
                    _log.warning("closing ws connection %d: text message received", self.info.id,
                                 extra={"conn_id": self.info.id})
                    await self.ws.close(CloseCode.UNSUPPORTED_DATA, "binary messages only")
                    return
                self._spawn(message)
        except ConnectionClosed as exc:
            if exc.rcvd is None and exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                _log.warning("ws connection %d: %s", self.info.id, exc.sent.reason,
                             extra={"conn_id": self.info.id})

    def _spawn(self, data: bytes) -> None:
        task = asyncio.get_running_loop().create_task(self._process(data))
        self._private.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._private.discard(task)
        self._shared.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("ws message task failed", exc_info=task.exception(),
                       extra={"conn_id": self.info.id})

    def stop(self, *, cancel_all: bool) -> None:
        if self._confirmer is not None:
            self._confirmer.cancel()
        for task in list(self._private) + (list(self._shared) if cancel_all else []):
            task.cancel()

    async def deliver(self, data: bytes, key: Key | None) -> bool:
        """Send one answer; False when the socket is gone (the answer stays cached)."""
        try:
            await self.ws.send(data)
        except ConnectionClosed:
            return False
        if key is not None:
            self._unconfirmed.append(key)
            self._wake.set()
        return True

    async def _confirm_forever(self) -> None:
        dedup = self.endpoint.dedup
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._unconfirmed = self._unconfirmed, []
            try:
                pong = await self.ws.ping()
                await asyncio.wait_for(pong, CONFIRM_TIMEOUT_S)
            except (ConnectionClosed, TimeoutError):
                return  # unconfirmed answers stay cached until the TTL, for the resend
            for key in batch:
                dedup.confirmed(key)

    async def _process(self, data: bytes) -> None:
        try:
            message = decode_message(data)
        except QueueError as exc:
            _log.warning("ws connection %d: undecodable message ignored: %s", self.info.id,
                         exc.message, extra={"conn_id": self.info.id})
            return
        limit = self.endpoint.max_message_size
        if len(data) > limit:
            text = oversize_request_error(len(data), limit)
            _log.warning("ws connection %d: %s", self.info.id, text, extra={"conn_id": self.info.id})
            await self.deliver(encode_error(message.message_id, message.connection_id, text), None)
            return
        if not isinstance(message.command, HttpQuery):
            await self._refuse_command(message)
            return
        if message.connection_id is None:
            await self.deliver(await self._answer(message, message.command), None)
            return
        key = (message.connection_id, message.message_id)
        outcome = self.endpoint.dedup.begin(key, self)
        if isinstance(outcome, Cached):
            await self.deliver(outcome.answer, key)
            return
        if outcome is JOINED:
            return
        assert outcome is RUN
        task = asyncio.current_task()
        if task is not None:  # the answer is shared now: outlive this socket
            self._private.discard(task)
            self._shared.add(task)
        try:
            answer = await self._answer(message, message.command)
        except asyncio.CancelledError:
            self.endpoint.dedup.abandon(key)
            raise
        for sock in self.endpoint.dedup.complete(key, answer):
            await sock.deliver(answer, key)

    async def _answer(self, message: HttpMessage, query: HttpQuery) -> bytes:
        try:
            result = await execute_query(self.endpoint.ctx, query, self.process_id, self.session)
        except QueueError as exc:
            return encode_error(message.message_id, message.connection_id, exc.message)
        except Exception as exc:  # a bug: logged, and the socket goes on
            _log.exception("internal error answering a ws message", extra={"conn_id": self.info.id})
            return encode_error(message.message_id, message.connection_id, f"internal error: {exc}")
        return encode_result_set(message.message_id, message.connection_id, result)

    async def _refuse_command(self, message: HttpMessage) -> None:
        command = message.command
        name = type(command).__name__
        tag = getattr(command, "type_tag", None)
        text = f"Unexpected command: {name if tag is None else f'type {tag}'}; expected HttpQuery"
        await self.deliver(encode_error(message.message_id, message.connection_id, text), None)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(CloseCode.POLICY_VIOLATION, "unexpected command")
