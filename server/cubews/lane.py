"""The socket's transport protocol once the handshake is done: a frame in, the answer out.

websockets' asyncio ``Connection`` turns every frame into a message queued in an
assembler, wakes the reader coroutine, and sends each answer through an async context
(state check, ``drain``); with a task per message, one statement cost four loop turns
and most of its server CPU outside cubequeue. After the upgrade, :meth:`Lane.attach`
puts this protocol between the transport and that connection, and drives the same
sans-I/O ``ServerProtocol`` (websockets' supported sans-I/O API) itself:

* a complete binary frame goes straight to ``on_message`` inside ``data_received``
  (the answers it queues go out in one ``transport.write`` at the end of the callback);
* every other frame (ping, pong, close, text, the frames of a fragmented message, and a
  whole frame that arrives while such a message still waits to run) goes to the
  connection's own ``process_event``, so pings, pong confirmation, keepalive,
  the closing handshake, 1009 on an oversize frame and fragment reassembly stay the
  library's; those messages reach the connection's ``recv`` as before;
* ``connection_lost``, ``eof_received`` and write flow control are passed on, so
  ``close()``, ``ping()``, ``send()`` and ``wait_closed()`` keep working. While the
  transport's write buffer is over its high-water mark, reading pauses: a client that
  does not read its answers stops being read.

Sans-I/O in spirit: no socket calls other than the transport's ``write``; no asyncio
import beyond the ``Protocol`` base class.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from websockets.frames import Frame, Opcode
from websockets.protocol import State

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection

__all__ = ["Lane"]

_log = logging.getLogger("cubequeue.ws")

_BINARY = Opcode.BINARY
_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
_OPEN = State.OPEN


class Lane(asyncio.Protocol):
    """The transport's protocol for one upgraded socket (see the module docstring)."""

    def __init__(self, conn: ServerConnection, on_message: Callable[[bytes], None]) -> None:
        self.conn = conn
        self.protocol = conn.protocol
        self.transport = conn.transport
        self.on_message = on_message
        #: answers are being queued by ``data_received``, which writes them at its end
        self.batching = False
        #: inside a fragmented message: its frames go to the connection's assembler
        self._fragments = False
        #: reading paused by this lane (write buffer full), not by the assembler
        self._held = False
        #: messages handed to the connection and not yet run: while there are any, whole
        #: frames queue behind them, so statements still run in the order they arrived
        self._behind = 0

    def attach(self) -> None:
        """Take over the transport; frames already parsed stay in the connection's queue
        (a client that pipelined frames behind its upgrade request) and run first."""
        queued = getattr(self.conn.recv_messages, "frames", ())
        self._behind = len(queued) if hasattr(queued, "__len__") else 0
        self.transport.set_protocol(self)

    def ran(self) -> None:
        """The connection's reader has run one message it got from the connection."""
        if self._behind:
            self._behind -= 1

    # --- asyncio.Protocol --------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        protocol = self.protocol
        protocol.receive_data(data)
        events = protocol.events_received()
        self.batching = True
        try:
            for event in events:
                if isinstance(event, Frame):
                    opcode = event.opcode
                    if opcode is _BINARY and event.fin and not self._fragments and not self._behind:
                        self._message(event.data)
                        continue
                    if opcode in _DATA:
                        self._fragments = not event.fin
                        if event.fin:
                            self._behind += 1
                self.conn.process_event(event)
        finally:
            self.batching = False
        self.flush()
        conn = self.conn
        if (protocol.close_expected() and conn.close_deadline is None
                and conn.close_timeout is not None):  # fmt: skip
            conn.close_deadline = conn.loop.time() + conn.close_timeout

    def eof_received(self) -> None:
        self.conn.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn.pause_writing()
        if not self._held:
            self._held = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.conn.resume_writing()
        if self._held:
            self._held = False
            self.transport.resume_reading()

    # --- answers -----------------------------------------------------------------------

    @property
    def open(self) -> bool:
        return self.protocol.state is _OPEN

    def send(self, frame: bytes) -> bool:
        """Queue one binary frame (written now, or at the end of ``data_received``)."""
        protocol = self.protocol
        if protocol.state is not _OPEN or self.transport.is_closing():
            return False
        protocol.send_binary(frame)
        if not self.batching:
            self.flush()
        return True

    def flush(self) -> None:
        """Write what the protocol has queued: frames in one write, then EOF if it asks."""
        chunks = self.protocol.data_to_send()
        if not chunks:
            return
        transport = self.transport
        if len(chunks) == 1 and chunks[0]:
            transport.write(chunks[0])
            return
        data = b"".join(chunks)
        if data:
            transport.write(data)
        if all(chunks):
            return
        # the protocol asks to end the stream: half-close when possible (not TLS)
        if transport.can_write_eof():
            try:
                transport.write_eof()
            except (OSError, RuntimeError):
                transport.close()
        else:
            transport.close()

    def _message(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self.on_message(data if isinstance(data, bytes) else bytes(data))
        except Exception:  # a bug of ours must not take the socket's protocol down
            _log.exception("ws message failed")
