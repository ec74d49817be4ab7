"""Sans-I/O framing, server side, inbound: bytes → frontend messages.

The formats are those of PostgreSQL 15's "Message Formats" page. The decoder knows that a
connection starts with untyped packets (SSLRequest, GSSENCRequest, CancelRequest, then
the StartupMessage) and that typed messages follow. It caps sizes as PostgreSQL does
(``MAX_STARTUP_PACKET_LENGTH`` in its ``libpq/pqcomm.h``): a startup packet over 10,000
bytes, or a typed message whose declared length exceeds ``max_message_size``, is refused
as soon as the length is read, so a hostile length never makes the server buffer the body.
Backend messages are written by :mod:`.encoder`; the client role of this codec is
:mod:`cubequeue.server.pgwire.client`.

Anything the peer gets wrong raises :class:`FramingError` (a ``ProtocolViolation``,
08P01); framing is lost after it, so the caller answers FATAL and closes. Messages that
were complete before the bad bytes are handed over in ``FramingError.decoded`` so they
are still answered in order. Nothing here imports asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.messages import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    SSL_REQUEST_CODE,
)

__all__ = [
    "CANCEL_REQUEST_CODE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "GSSENC_REQUEST_CODE",
    "MAX_STARTUP_PACKET",
    "SSL_REQUEST_CODE",
    "Decoder",
    "FramingError",
    "decode_sasl_initial_response",
]

#: PostgreSQL's MAX_STARTUP_PACKET_LENGTH
MAX_STARTUP_PACKET: Final = 10_000
DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024

# Precompiled network-order readers (as psycopg precompiles its own).
_unpack_i16 = struct.Struct("!h").unpack_from
_unpack_i32 = struct.Struct("!i").unpack_from
_unpack_u32 = struct.Struct("!I").unpack_from


class FramingError(ProtocolViolation):
    """The peer broke framing; ``decoded`` holds the messages complete before it."""

    def __init__(self, message: str, decoded: list[m.FrontendMessage] | None = None) -> None:
        super().__init__(message)
        self.decoded: list[m.FrontendMessage] = decoded if decoded is not None else []


# --- body readers -----------------------------------------------------------------------


class _Reader:
    """A cursor over one message body; every overrun is a framing error."""

    __slots__ = ("body", "pos")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.pos = 0

    def cstr(self) -> str:
        end = self.body.find(b"\0", self.pos)
        if end < 0:
            raise FramingError("invalid string in message: missing terminator")
        raw = self.body[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FramingError('invalid byte sequence for encoding "UTF8"') from None

    def int16(self) -> int:
        if self.pos + 2 > len(self.body):
            raise FramingError("insufficient data left in message")
        (value,) = _unpack_i16(self.body, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        if self.pos + 4 > len(self.body):
            raise FramingError("insufficient data left in message")
        (value,) = _unpack_i32(self.body, self.pos)
        self.pos += 4
        return int(value)

    def uint32(self) -> int:
        if self.pos + 4 > len(self.body):
            raise FramingError("insufficient data left in message")
        (value,) = _unpack_u32(self.body, self.pos)
        self.pos += 4
        return int(value)

    def count(self) -> int:
        n = self.int16()
        if n < 0:
            raise FramingError(f"invalid count in message: {n}")
        return n

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.body):
            raise FramingError("insufficient data left in message")
        raw = self.body[self.pos : self.pos + n]
        self.pos += n
        return raw

    def kind(self) -> str:
        raw = self.take(1)
        if raw not in (b"S", b"P"):
            raise FramingError(f"invalid DESCRIBE/CLOSE message subtype {raw[0]}")
        return raw.decode("ascii")

    def end(self) -> None:
        if self.pos != len(self.body):
            raise FramingError("invalid message format: trailing bytes")


def _query(r: _Reader) -> m.Query:
    return m.Query(r.cstr())


def _parse(r: _Reader) -> m.Parse:
    name, query = r.cstr(), r.cstr()
    oids = tuple(r.uint32() for _ in range(r.count()))
    return m.Parse(name, query, oids)


def _bind(r: _Reader) -> m.Bind:
    portal, statement = r.cstr(), r.cstr()
    formats = tuple(r.int16() for _ in range(r.count()))
    params: list[bytes | None] = []
    for _ in range(r.count()):
        size = r.int32()
        if size == -1:
            params.append(None)
        elif size < -1:
            raise FramingError(f"invalid parameter length {size}")
        else:
            params.append(r.take(size))
    results = tuple(r.int16() for _ in range(r.count()))
    return m.Bind(portal, statement, formats, tuple(params), results)


def _describe(r: _Reader) -> m.Describe:
    kind = r.kind()
    return m.Describe(kind, r.cstr())


def _close(r: _Reader) -> m.Close:
    kind = r.kind()
    return m.Close(kind, r.cstr())


def _execute(r: _Reader) -> m.Execute:
    portal = r.cstr()
    return m.Execute(portal, r.int32())


def _copy_fail(r: _Reader) -> m.CopyFail:
    return m.CopyFail(r.cstr())


def _rest(cls: Callable[[bytes], m.FrontendMessage]) -> Callable[[_Reader], m.FrontendMessage]:
    def read(r: _Reader) -> m.FrontendMessage:
        r.pos = len(r.body)
        return cls(r.body)

    return read


def _empty(msg: m.FrontendMessage) -> Callable[[_Reader], m.FrontendMessage]:
    return lambda _r: msg


#: typed frontend messages by type byte; those with ``None`` bodies must be exactly empty
_READERS: dict[int, Callable[[_Reader], m.FrontendMessage]] = {
    ord("Q"): _query,
    ord("P"): _parse,
    ord("B"): _bind,
    ord("D"): _describe,
    ord("E"): _execute,
    ord("C"): _close,
    ord("S"): _empty(m.Sync()),
    ord("H"): _empty(m.Flush()),
    ord("X"): _empty(m.Terminate()),
    ord("c"): _empty(m.CopyDone()),
    ord("d"): _rest(m.CopyData),
    ord("f"): _copy_fail,
    ord("p"): _rest(m.PasswordMessage),
    ord("F"): _rest(m.FunctionCall),
}


def _startup(body: bytes) -> m.FrontendMessage:
    r = _Reader(body)
    code = r.int32()
    if code == SSL_REQUEST_CODE:
        r.end()
        return m.SSLRequest()
    if code == GSSENC_REQUEST_CODE:
        r.end()
        return m.GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        pid, secret = r.int32(), r.int32()
        r.end()
        return m.CancelRequest(pid, secret)
    params: list[tuple[str, str]] = []
    while True:
        name = r.cstr()
        if not name:
            break
        params.append((name, r.cstr()))
    r.end()
    return m.StartupMessage(code & 0xFFFFFFFF, tuple(params))


# --- fast readers for the hot messages ----------------------------------------------------
#
# The extended protocol sends Bind/Describe/Execute/Sync for every statement, so these
# read their body with ``find``/``unpack_from`` on the body itself instead of going through
# a :class:`_Reader`. Anything unusual (a missing terminator, a bad count, bad UTF-8,
# trailing bytes) raises ``_ForCheckedReader`` or a builtin error, and the message is read again by
# the checked reader above, which raises the exact :class:`FramingError`.


class _ForCheckedReader(Exception):
    """The fast reader met something it does not check; the checked reader decides."""


_FAST_ERRORS: Final = (_ForCheckedReader, ValueError, IndexError, struct.error)
_H_FORMATS: Final = {n: struct.Struct(f"!{n}h") for n in range(1, 17)}


def _fast_codes(body: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    (n,) = _unpack_i16(body, pos)
    pos += 2
    if n == 0:
        return (), pos
    if n == 1:
        (code,) = _unpack_i16(body, pos)
        return (code,), pos + 2
    if n < 0:
        raise _ForCheckedReader
    fmt = _H_FORMATS.get(n) or struct.Struct(f"!{n}h")
    return fmt.unpack_from(body, pos), pos + 2 * n


def _fast_bind(body: bytes) -> m.Bind:
    end = body.index(0)
    portal = body[:end].decode("utf-8") if end else ""
    pos = body.index(0, end + 1)
    statement = body[end + 1 : pos].decode("utf-8") if pos > end + 1 else ""
    formats, pos = _fast_codes(body, pos + 1)
    (count,) = _unpack_i16(body, pos)
    pos += 2
    if count < 0:
        raise _ForCheckedReader
    params: list[bytes | None] = []
    append = params.append
    for _ in range(count):
        (size,) = _unpack_i32(body, pos)
        pos += 4
        if size == -1:
            append(None)
            continue
        if size < -1 or pos + size > len(body):
            raise _ForCheckedReader
        append(body[pos : pos + size])
        pos += size
    results, pos = _fast_codes(body, pos)
    if pos != len(body):
        raise _ForCheckedReader
    return m.Bind(portal, statement, formats, tuple(params), results)


def _fast_parse(body: bytes) -> m.Parse:
    end = body.index(0)
    pos = body.index(0, end + 1)
    name = body[:end].decode("utf-8") if end else ""
    query = body[end + 1 : pos].decode("utf-8")
    (count,) = _unpack_i16(body, pos + 1)
    if count < 0 or pos + 3 + 4 * count != len(body):
        raise _ForCheckedReader
    oids = struct.unpack_from(f"!{count}I", body, pos + 3) if count else ()
    return m.Parse(name, query, oids)


def _fast_execute(body: bytes) -> m.Execute:
    end = body.index(0)
    if end + 5 != len(body):
        raise _ForCheckedReader
    (max_rows,) = _unpack_i32(body, end + 1)
    return m.Execute(body[:end].decode("utf-8") if end else "", max_rows)


def _fast_describe(body: bytes) -> m.Describe:
    kind = body[0]
    if (kind != 0x50 and kind != 0x53) or body.index(0, 1) != len(body) - 1:
        raise _ForCheckedReader
    return m.Describe("P" if kind == 0x50 else "S", body[1:-1].decode("utf-8"))


def _fast_query(body: bytes) -> m.Query:
    if body.index(0) != len(body) - 1:
        raise _ForCheckedReader
    return m.Query(body[:-1].decode("utf-8"))


_FAST: dict[int, Callable[[bytes], m.FrontendMessage]] = {
    ord("P"): _fast_parse,
    ord("B"): _fast_bind,
    ord("E"): _fast_execute,
    ord("D"): _fast_describe,
    ord("Q"): _fast_query,
}
_SYNC: Final = m.Sync()
_BODYLESS_MSGS: Final[dict[int, m.FrontendMessage]] = {
    ord("S"): _SYNC,
    ord("H"): m.Flush(),
    ord("X"): m.Terminate(),
    ord("c"): m.CopyDone(),
}


def _read_typed(code: int, body: bytes) -> m.FrontendMessage:
    fast = _FAST.get(code)
    if fast is not None:
        try:
            return fast(body)
        except _FAST_ERRORS:  # UnicodeDecodeError is a ValueError
            pass
    r = _Reader(body)
    msg = _READERS[code](r)
    r.end()
    return msg


#: frames (type byte and length included) up to this size are remembered by Decoder
#: (a few kilobytes per connection at most)
_MAX_REMEMBERED_FRAME: Final = 128
_MAX_REMEMBERED: Final = 16


class Decoder:
    """Incremental frontend-message decoder (h11's ``receive_data`` + ``next_event``).

    Bytes are copied once per message body (the slice handed to its reader). A chunk that
    holds only whole messages, the usual case, is parsed in place; a partial message is
    kept in a ``bytearray`` (amortised appends, so a 64 MB message that arrives in 64 KB
    chunks is not copied quadratically) and is parsed once ``_need`` bytes are there.

    A short query-cycle message (Parse, Bind, Describe, Execute, Query) whose bytes this
    connection sent before (``SELECT 1``, an Execute or Describe of the unnamed portal, a
    Bind without parameters: the same frames on every round trip) is answered with the
    frozen message decoded then, from a small per-connection map keyed by the frame (at
    most ``_MAX_REMEMBERED`` frames of up to ``_MAX_REMEMBERED_FRAME`` bytes; cleared
    when full). Password messages are never kept.
    """

    __slots__ = ("_need", "_seen", "expect_startup", "max_message_size", "partial")

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        #: the bytes of a message not complete yet (read it, never write it: its truth
        #: is the connection's per-read test for a partial message, with no call)
        self.partial = bytearray()
        #: bytes ``partial`` must hold before anything new can be decoded
        self._need = 0
        self.max_message_size = max_message_size
        #: True until a StartupMessage proper has been read
        self.expect_startup = True
        #: short frames already decoded → their message (see the class docstring)
        self._seen: dict[bytes, m.FrontendMessage] = {}

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete message."""
        return len(self.partial)

    def feed(self, data: bytes) -> list[m.FrontendMessage]:
        """Every message completed by ``data``; raises :class:`FramingError`."""
        pending = self.partial
        if pending:
            pending += data
            if len(pending) < self._need:
                return []
            buf = bytes(pending)
            pending.clear()
        else:
            buf = bytes(data)  # no copy when ``data`` already is ``bytes``
        out: list[m.FrontendMessage] = []
        pos = 0
        size = len(buf)
        need = 0
        bodyless = _BODYLESS_MSGS
        seen = self._seen
        startup = self.expect_startup
        try:
            while True:
                if startup:
                    if size - pos < 4:
                        need = 4
                        break
                    (length,) = _unpack_i32(buf, pos)
                    if length < 8 or length > MAX_STARTUP_PACKET:
                        raise FramingError("invalid length of startup packet")
                    if size - pos < length:
                        need = length
                        break
                    msg = _startup(buf[pos + 4 : pos + length])
                    pos += length
                    if isinstance(msg, m.StartupMessage):
                        self.expect_startup = startup = False
                    out.append(msg)
                    continue
                if size - pos < 5:
                    need = 5
                    break
                code = buf[pos]
                (length,) = _unpack_i32(buf, pos + 1)
                if length == 4 and code in bodyless:
                    out.append(bodyless[code])
                    pos += 5
                    continue
                end = pos + 1 + length
                frame = None
                if length <= _MAX_REMEMBERED_FRAME and end <= size:
                    frame = buf[pos:end]
                    known = seen.get(frame)
                    if known is not None:  # decoded, so checked, before: the same bytes
                        out.append(known)
                        pos = end
                        continue
                if code not in _READERS:
                    raise FramingError(f"invalid frontend message type {code}")
                if length < 4:
                    raise FramingError(f"invalid message length {length}")
                if code in bodyless:
                    raise FramingError(f"invalid message format: {chr(code)!r} with a body")
                if length - 4 > self.max_message_size:
                    raise FramingError(
                        f"message of {length - 4} bytes exceeds the maximum message size "
                        f"of {self.max_message_size} bytes (--max-message-size)"
                    )
                if size < end:
                    need = end - pos
                    break
                if frame is None or code not in _FAST:
                    # long, or not a query-cycle message: a password is never kept
                    out.append(_read_typed(code, buf[pos + 5 : end]))
                else:
                    known = _read_typed(code, frame[5:])
                    if len(seen) >= _MAX_REMEMBERED:
                        seen.clear()
                    seen[frame] = known
                    out.append(known)
                pos = end
        except FramingError as exc:
            exc.decoded = out
            raise
        if pos < size:
            pending += memoryview(buf)[pos:]
            self._need = need
        return out


def decode_sasl_initial_response(payload: bytes) -> m.SASLInitialResponse:
    """The first SASL ``p`` message: mechanism name, then Int32 length (-1: none), data."""
    r = _Reader(payload)
    mechanism = r.cstr()
    size = r.int32()
    data = None if size == -1 else r.take(size)
    r.end()
    return m.SASLInitialResponse(mechanism, data)
