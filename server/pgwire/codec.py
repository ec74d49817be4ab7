"""Sans-I/O framing for the server side: bytes → frontend messages, backend messages → bytes.

The formats are those of PostgreSQL 15's "Message Formats" page. The decoder knows that a
connection starts with untyped packets (SSLRequest, GSSENCRequest, CancelRequest, then
the StartupMessage) and that typed messages follow. It caps sizes as PostgreSQL does
(``postgres-wire.md``, "Edge cases"): a startup packet over 10,000 bytes, or a typed
message whose declared length exceeds ``max_message_size``, is refused as soon as the
length is read, so a hostile length never makes the server buffer the body.

Anything the peer gets wrong raises :class:`FramingError` (a ``ProtocolViolation``,
08P01); framing is lost after it, so the caller answers FATAL and closes. Messages that
were complete before the bad bytes are handed over in ``FramingError.decoded`` so they
are still answered in order. Nothing here imports asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

from cubequeue.server.pgwire import messages as m
from cubequeue.storage.errors import ProtocolViolation

__all__ = [
    "CANCEL_REQUEST_CODE",
    "GSSENC_REQUEST_CODE",
    "MAX_STARTUP_PACKET",
    "SSL_REQUEST_CODE",
    "Decoder",
    "FramingError",
    "decode_sasl_initial_response",
    "encode",
    "encode_many",
]

SSL_REQUEST_CODE: Final = 80877103
GSSENC_REQUEST_CODE: Final = 80877104
CANCEL_REQUEST_CODE: Final = 80877102
#: PostgreSQL's MAX_STARTUP_PACKET_LENGTH
MAX_STARTUP_PACKET: Final = 10_000
DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024

# Precompiled network-order helpers (psycopg's ``_struct.py`` idea).
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_HEADER = struct.Struct("!ci")
pack_int2: Final = _I16.pack
pack_int4: Final = _I32.pack
pack_uint4: Final = _U32.pack
_unpack_i16 = _I16.unpack_from
_unpack_i32 = _I32.unpack_from
_unpack_u32 = _U32.unpack_from
_unpack_header = _HEADER.unpack_from


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
_BODYLESS: Final = frozenset(ord(c) for c in "SHXc")


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


class Decoder:
    """Incremental frontend-message decoder (h11's ``receive_data`` + ``next_event``)."""

    __slots__ = ("_buf", "expect_startup", "max_message_size")

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self._buf = bytearray()
        self.max_message_size = max_message_size
        #: True until a StartupMessage proper has been read
        self.expect_startup = True

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete message."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[m.FrontendMessage]:
        """Every message completed by ``data``; raises :class:`FramingError`."""
        buf = self._buf
        buf += data
        out: list[m.FrontendMessage] = []
        pos = 0
        size = len(buf)
        try:
            while True:
                if self.expect_startup:
                    if size - pos < 4:
                        break
                    (length,) = _unpack_i32(buf, pos)
                    if length < 8 or length > MAX_STARTUP_PACKET:
                        raise FramingError("invalid length of startup packet")
                    if size - pos < length:
                        break
                    msg = _startup(bytes(buf[pos + 4 : pos + length]))
                    pos += length
                    if isinstance(msg, m.StartupMessage):
                        self.expect_startup = False
                    out.append(msg)
                    continue
                if size - pos < 5:
                    break
                type_code, length = _unpack_header(buf, pos)
                code = type_code[0]
                reader = _READERS.get(code)
                if reader is None:
                    raise FramingError(f"invalid frontend message type {code}")
                if length < 4:
                    raise FramingError(f"invalid message length {length}")
                if code in _BODYLESS and length != 4:
                    raise FramingError(f"invalid message format: {chr(code)!r} with a body")
                if length - 4 > self.max_message_size:
                    raise FramingError(
                        f"message of {length - 4} bytes exceeds the maximum message size "
                        f"of {self.max_message_size} bytes (--max-message-size)"
                    )
                end = pos + 1 + length
                if size < end:
                    break
                r = _Reader(bytes(buf[pos + 5 : end]))
                msg = reader(r)
                r.end()
                pos = end
                out.append(msg)
        except FramingError as exc:
            del buf[:]
            exc.decoded = out
            raise
        del buf[:pos]
        return out


def decode_sasl_initial_response(payload: bytes) -> m.SASLInitialResponse:
    """The first SASL ``p`` message: mechanism name, then Int32 length (-1: none), data."""
    r = _Reader(payload)
    mechanism = r.cstr()
    size = r.int32()
    data = None if size == -1 else r.take(size)
    r.end()
    return m.SASLInitialResponse(mechanism, data)


# --- encoding backend messages ----------------------------------------------------------


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + pack_int4(len(body) + 4) + body


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


_AUTH_OK: Final = _frame(b"R", pack_int4(0))
_AUTH_CLEARTEXT: Final = _frame(b"R", pack_int4(3))
_PARSE_COMPLETE: Final = b"1\0\0\0\x04"
_BIND_COMPLETE: Final = b"2\0\0\0\x04"
_CLOSE_COMPLETE: Final = b"3\0\0\0\x04"
_NO_DATA: Final = b"n\0\0\0\x04"
_PORTAL_SUSPENDED: Final = b"s\0\0\0\x04"
_EMPTY_QUERY: Final = b"I\0\0\0\x04"
_READY: Final = {s: b"Z\0\0\0\x05" + s.encode() for s in "ITE"}


def _fields(fields: Iterable[tuple[str, str]]) -> bytes:
    return b"".join(code.encode("ascii") + _cstr(value) for code, value in fields) + b"\0"


def _row_description(msg: m.RowDescription) -> bytes:
    parts = [pack_int2(len(msg.fields))]
    for f in msg.fields:
        parts.append(_cstr(f.name))
        parts.append(
            struct.pack(
                "!IhIhih",
                f.table_oid,
                f.column_attr,
                f.type_oid,
                f.type_size,
                f.type_modifier,
                f.format,
            )
        )
    return _frame(b"T", b"".join(parts))


def _data_row(msg: m.DataRow) -> bytes:
    parts = [pack_int2(len(msg.values))]
    append = parts.append
    for value in msg.values:
        if value is None:
            append(b"\xff\xff\xff\xff")
        else:
            append(pack_int4(len(value)))
            append(value)
    body = b"".join(parts)
    return b"D" + pack_int4(len(body) + 4) + body


def _sasl(msg: m.AuthenticationSASL) -> bytes:
    names = b"".join(_cstr(name) for name in msg.mechanisms)
    return _frame(b"R", pack_int4(10) + names + b"\0")


def _negotiate(msg: m.NegotiateProtocolVersion) -> bytes:
    names = b"".join(_cstr(name) for name in msg.unrecognized)
    return _frame(b"v", pack_int4(msg.newest_minor) + pack_int4(len(msg.unrecognized)) + names)


def _key_data(msg: m.BackendKeyData) -> bytes:
    return _frame(b"K", pack_int4(msg.process_id) + pack_int4(msg.secret_key))


#: keyed by exact class, so each encoder gets its own message type (hence ``Any``)
_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    m.AuthenticationOk: lambda _msg: _AUTH_OK,
    m.AuthenticationCleartextPassword: lambda _msg: _AUTH_CLEARTEXT,
    m.AuthenticationMD5Password: lambda msg: _frame(b"R", pack_int4(5) + msg.salt),
    m.AuthenticationSASL: _sasl,
    m.AuthenticationSASLContinue: lambda msg: _frame(b"R", pack_int4(11) + msg.data),
    m.AuthenticationSASLFinal: lambda msg: _frame(b"R", pack_int4(12) + msg.data),
    m.ParameterStatus: lambda msg: _frame(b"S", _cstr(msg.name) + _cstr(msg.value)),
    m.BackendKeyData: _key_data,
    m.ReadyForQuery: lambda msg: _READY[msg.status],
    m.RowDescription: _row_description,
    m.DataRow: _data_row,
    m.CommandComplete: lambda msg: _frame(b"C", _cstr(msg.tag)),
    m.EmptyQueryResponse: lambda _msg: _EMPTY_QUERY,
    m.ErrorResponse: lambda msg: _frame(b"E", _fields(msg.fields)),
    m.NoticeResponse: lambda msg: _frame(b"N", _fields(msg.fields)),
    m.ParseComplete: lambda _msg: _PARSE_COMPLETE,
    m.BindComplete: lambda _msg: _BIND_COMPLETE,
    m.CloseComplete: lambda _msg: _CLOSE_COMPLETE,
    m.NoData: lambda _msg: _NO_DATA,
    m.PortalSuspended: lambda _msg: _PORTAL_SUSPENDED,
    m.ParameterDescription: lambda msg: _frame(
        b"t",
        pack_int2(len(msg.type_oids)) + b"".join(pack_uint4(oid) for oid in msg.type_oids),
    ),
    m.NegotiateProtocolVersion: _negotiate,
}


def encode(msg: m.BackendMessage) -> bytes:
    """The wire bytes of one backend message."""
    return _ENCODERS[type(msg)](msg)


def encode_many(msgs: Iterable[m.BackendMessage]) -> bytes:
    encoders = _ENCODERS
    return b"".join([encoders[type(msg)](msg) for msg in msgs])
