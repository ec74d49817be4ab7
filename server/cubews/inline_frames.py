"""The socket's transport protocol once the handshake is done: a frame in, the answer out.

websockets' asyncio ``Connection`` turns every frame into a message queued in an
assembler, wakes the reader coroutine, and sends each answer through an async context
(state check, ``drain``): a task and several loop turns per message (what that cost is
in bench/RESULTS-notes.md, "the WebSocket lane"). After the upgrade,
:meth:`InlineFrames.attach` puts this protocol between the transport and that
connection, and drives the same sans-I/O ``ServerProtocol`` (websockets' supported
sans-I/O API) itself:

* a complete binary frame goes straight to ``on_message`` inside ``data_received``
  (the answers it queues go out in one ``transport.write`` at the end of the callback):
  its header (RFC 6455 §5.2) is read here and its payload unmasked with the library's
  ``apply_mask``, instead of going through websockets' generator parser. Every other
  frame is handed whole to the library's parser, which so stays
  aligned on frame boundaries; a frame it must fail (unmasked, an extension bit, over
  the size limit) and everything after it go to that parser;
* every other frame (ping, pong, close, text, the frames of a fragmented message, and a
  whole frame that arrives while such a message still waits to run) goes to the
  connection's own ``process_event``, so pings, pong confirmation, keepalive,
  the closing handshake, 1009 on an oversize frame and fragment reassembly stay the
  library's; those messages reach the connection's ``recv`` as before;
* ``connection_lost``, ``eof_received`` and write flow control are passed on, so
  ``close()``, ``ping()``, ``send()`` and ``wait_closed()`` keep working. While the
  transport's write buffer is over its high-water mark, reading pauses: a client that
  does not read its answers stops being read.

A huge answer (:class:`~.frame_sink.FrameParts`, a listing of a million rows) is sent
by :meth:`InlineFrames.send_parts` as a fragmented message (RFC 6455 §5.4), a fragment of
:data:`FRAGMENT_BYTES` per loop turn, waiting while the transport's buffer is over its
high-water mark: written at once it was copied whole into the transport's buffer in one
turn. Control frames (pings, pongs, close) may come between fragments; other answers of
the socket are held until the message is out.

Sans-I/O in spirit: no socket calls other than the transport's ``write``; asyncio only
for the ``Protocol`` base class and the waits of :meth:`InlineFrames.send_parts`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from websockets.frames import Frame, Opcode
from websockets.protocol import State

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - the library built without its C helper
    from websockets.utils import apply_mask

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection

    from cubequeue.server.cubews.frame_sink import FrameParts

__all__ = ["FRAGMENT_BYTES", "InlineFrames"]

#: payload bytes per fragment of a huge answer (one fragment per loop turn)
FRAGMENT_BYTES = 1 << 20

_log = logging.getLogger("cubequeue.ws")

_BINARY = Opcode.BINARY
#: first header byte of a whole binary frame: FIN, no extension bits, opcode 2
_FIN_BINARY = 0x82
_NO_LIMIT = 2**63
_U16 = struct.Struct("!H")
_U64 = struct.Struct("!Q")
_HEAD16 = struct.Struct("!BBH")
_HEAD64 = struct.Struct("!BBQ")
_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
_OPEN = State.OPEN


def _frame_head(first: int, n: int) -> bytes:
    """An unmasked frame's header: ``first`` (FIN and opcode), then the payload length
    ``n`` in one, three or nine bytes (RFC 6455 §5.2)."""
    if n < 126:
        return bytes((first, n))
    if n < 65536:
        return _HEAD16.pack(first, 126, n)
    return _HEAD64.pack(first, 127, n)


class InlineFrames(asyncio.Protocol):
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
        #: reading paused here (write buffer full), not by the assembler
        self._held = False
        #: messages handed to the connection and not yet run: while there are any, whole
        #: frames queue behind them, so statements still run in the order they arrived
        self._behind = 0
        #: frames written by :meth:`send`, in order, not yet given to the transport
        self._out: list[bytes] = []
        #: the start of a frame whose end has not arrived yet
        self._partial = bytearray()
        #: every byte goes through websockets' parser from now on (a frame it must fail)
        self._delegated = False
        limits = [getattr(self.protocol, name, None) for name in ("max_message_size",
                                                                   "max_fragment_size")]
        #: the largest frame taken without the library's parser (its size limits)
        self._limit = min((n for n in limits if n is not None), default=_NO_LIMIT)
        #: fragmented messages being sent or waiting to (other answers are held)
        self._streams = 0
        self._stream_lock = asyncio.Lock()
        #: the transport's buffer is over its high-water mark; resolved when it drains
        self._writable: asyncio.Future[None] | None = None
        self.fragment_bytes = FRAGMENT_BYTES

    def attach(self) -> None:
        """Take over the transport; frames already parsed stay in the connection's queue
        (a client that pipelined frames behind its upgrade request) and run first."""
        queued = getattr(self.conn.recv_messages, "frames", ())
        self._behind = len(queued) if hasattr(queued, "__len__") else 0
        # bytes the library's parser holds (a frame begun before the upgrade finished):
        # it keeps parsing, so its reader stays aligned
        self._delegated = bool(getattr(getattr(self.protocol, "reader", None), "buffer", b""))
        self.transport.set_protocol(self)

    def ran(self) -> None:
        """The connection's reader has run one message it got from the connection."""
        if self._behind:
            self._behind -= 1

    # --- asyncio.Protocol --------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._delegated or self.protocol.state is not _OPEN:
            self._feed(data)
            return
        buf: bytes | bytearray = data
        if self._partial:
            self._partial += data
            buf = self._partial
        size = len(buf)
        pos = 0
        self.batching = True
        try:
            while size - pos >= 2:
                first, second = buf[pos], buf[pos + 1]
                length = second & 0x7F
                head = pos + 2
                if length == 126:
                    if size - pos < 4:
                        break
                    length = _U16.unpack_from(buf, head)[0]
                    head += 2
                elif length == 127:
                    if size - pos < 10:
                        break
                    length = _U64.unpack_from(buf, head)[0]
                    head += 8
                if not second & 0x80 or first & 0x70 or length > self._limit:
                    # unmasked, an extension bit, or over the limit: the library's
                    # parser fails the connection with the right close code
                    self._delegated = True
                    self._feed(bytes(buf[pos:]))
                    pos = size
                    return
                end = head + 4 + length
                if end > size:
                    break
                if first == _FIN_BINARY and not self._fragments and not self._behind:
                    self._message(apply_mask(buf[head + 4 : end], buf[head : head + 4]))
                else:
                    self._feed(bytes(buf[pos:end]))  # one whole frame: the parser stays aligned
                pos = end
                if self.protocol.state is not _OPEN:
                    self._delegated = True
                    self._feed(bytes(buf[pos:]))
                    pos = size
                    return
        finally:
            self.batching = False
            if pos == size:
                self._partial = bytearray()
            elif buf is self._partial:
                del self._partial[:pos]
            else:
                self._partial = bytearray(buf[pos:])
            self.flush()

    def _feed(self, data: bytes) -> None:
        """Bytes through websockets' own parser; its events as its connection has them."""
        protocol = self.protocol
        protocol.receive_data(data)
        events = protocol.events_received()
        was = self.batching
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
            self.batching = was
        if not was:
            self.flush()
        conn = self.conn
        if (protocol.state is not _OPEN and protocol.close_expected()
                and conn.close_deadline is None and conn.close_timeout is not None):  # fmt: skip
            conn.close_deadline = conn.loop.time() + conn.close_timeout

    def eof_received(self) -> None:
        self.conn.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._wake_writer()
        self.conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn.pause_writing()
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()
        if not self._held:
            self._held = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.conn.resume_writing()
        self._wake_writer()
        if self._held:
            self._held = False
            self.transport.resume_reading()

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- answers -----------------------------------------------------------------------

    @property
    def open(self) -> bool:
        return self.protocol.state is _OPEN

    def send(self, frame: bytes) -> bool:
        """Queue one binary frame (written now, or at the end of ``data_received``).

        Without extensions (the endpoint negotiates none) a server's binary frame is its
        RFC 6455 §5.2 header and the payload, unmasked: written here, after whatever the
        library has queued (a pong), so the socket's frames keep their order. The
        library's ``send_binary`` builds a ``Frame`` and serializes it per answer."""
        protocol = self.protocol
        if protocol.state is not _OPEN or self.transport.is_closing():
            return False
        if protocol.extensions or protocol.expect_continuation_frame:
            protocol.send_binary(frame)
        else:
            queued = protocol.data_to_send()
            out = self._out
            if queued:
                out += queued
            out.append(_frame_head(_FIN_BINARY, len(frame)))
            out.append(frame)
        if not self.batching:
            self.flush()
        return True

    async def send_parts(self, frame: FrameParts) -> bool:
        """Send a huge answer as one fragmented message (see the module docstring);
        False when the socket closed first (the client never got the whole message)."""
        self._streams += 1
        try:
            async with self._stream_lock:
                return await self._write_fragments(frame)
        finally:
            self._streams -= 1
            if not self._streams:
                self.flush()

    async def _write_fragments(self, frame: FrameParts) -> bool:
        protocol = self.protocol
        transport = self.transport
        if protocol.extensions or protocol.expect_continuation_frame:
            return self.send(b"".join(frame.parts))  # the library frames it (rare)
        step = self.fragment_bytes
        left = frame.size
        opcode = _BINARY.value
        pieces: list[memoryview] = []
        have = 0
        for part in frame.parts:
            view = memoryview(part)
            at = 0
            while at < len(view):
                take = min(step - have, len(view) - at)
                pieces.append(view[at : at + take])
                have += take
                at += take
                if have < step and have < left:
                    continue
                if protocol.state is not _OPEN or transport.is_closing():
                    return False
                left -= have
                transport.write(_frame_head(opcode | (0x80 if not left else 0), have))
                transport.write(b"".join(pieces))
                pieces = []
                have = 0
                opcode = Opcode.CONT.value
                self._flush_control()
                if self._writable is not None:
                    await self._writable
                else:
                    await asyncio.sleep(0)
        return not left

    def _flush_control(self) -> None:
        """Between two fragments, what the library queued (pongs, a close) goes out;
        an end of stream it asks for waits behind the held answers."""
        chunks = self.protocol.data_to_send()
        if not chunks:
            return
        if all(chunks):
            self.transport.write(b"".join(chunks))
        else:
            self._out += chunks

    def flush(self) -> None:
        """Write what is queued (these frames, then the protocol's) in one write,
        then EOF if the protocol asks."""
        if self._streams:
            return  # a fragmented message is being sent: held until it is out
        chunks = self.protocol.data_to_send()
        if self._out:
            chunks = self._out + chunks
            self._out = []
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
