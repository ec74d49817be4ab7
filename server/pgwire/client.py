"""The client role of the PostgreSQL v3 codec: frontend messages → bytes, bytes → backend
messages. Sans-I/O, and the only client-side framing in cubequeue.

The server itself never calls this. Two kinds of caller do:

* the blocking stdlib client of :mod:`cubequeue.server.pgclient` (``cubequeue
  healthcheck``, the pytest fixture's ``advance``), and its :class:`~cubequeue.server.
  pgclient.RawClient` for tests that send what no driver would (garbage frames, 2,000
  Syncs, a Describe without a Sync);
* the codec tests, which check ``decode(encode(m)) == m`` both ways round (h11's
  ``ConnectionPair`` idea) against the server side in :mod:`.decoder` and
  :mod:`.encoder`.

The healthcheck must start fast, so this module imports only :mod:`.messages` (plain
dataclasses) and the standard library: no grammar, no server errors. What the server
gets wrong is a :class:`PgError` with SQLSTATE 08P01 (protocol violation), the error
every caller of a client already handles.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.messages import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    SSL_REQUEST_CODE,
)

__all__ = [
    "DEFAULT_MAX_BACKEND_MESSAGE",
    "STARTUP_ANSWER_TYPES",
    "BackendDecoder",
    "NotPostgresError",
    "PgError",
    "encode_frontend",
]

#: the largest backend message the decoder buffers; a longer declared length is refused
#: as soon as it is read, so a broken server cannot make the client hold its body
DEFAULT_MAX_BACKEND_MESSAGE: Final = 256 * 1024 * 1024
#: what a PostgreSQL server may send first after a StartupMessage (PostgreSQL docs,
#: "Start-up"): an authentication request, an ErrorResponse, a NegotiateProtocolVersion,
#: or a NoticeResponse
STARTUP_ANSWER_TYPES: Final = frozenset(b"REvN")
#: how much of a foreign server's answer a NotPostgresError quotes
_QUOTED_BYTES = 16

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_pack_int2 = _I16.pack
_pack_int4 = _I32.pack
_pack_uint4 = _U32.pack


class PgError(Exception):
    """The server answered ErrorResponse, or the conversation broke.

    ``sqlstate`` is the error's C field; ``08006`` (connection failure) is used for I/O
    errors and unexpected messages, ``08P01`` for bytes that are no backend message, so
    callers can treat them alike.
    """

    def __init__(self, message: str, sqlstate: str = "08006", severity: str = "ERROR",
                 *, from_server: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.severity = severity
        #: True when the server sent this as an ErrorResponse
        self.from_server = from_server

    @classmethod
    def from_response(cls, msg: m.ErrorResponse) -> PgError:
        """The error an ErrorResponse reports (V is the untranslated severity)."""
        fields = dict(msg.fields)
        return cls(fields.get("M", "unknown error"), fields.get("C", "XX000"),
                   fields.get("V", fields.get("S", "ERROR")), from_server=True)

    def __str__(self) -> str:
        if self.from_server:
            return f"{self.severity} {self.sqlstate}: {self.message}"
        return self.message


class NotPostgresError(PgError):
    """The peer answered a StartupMessage with bytes no PostgreSQL server sends first: an
    HTTP server, a TLS-only port, a random service. ``answer`` holds the first bytes."""

    def __init__(self, answer: bytes, where: str = "") -> None:
        server = f"the server at {where}" if where else "the server"
        super().__init__(f"{server} does not speak the PostgreSQL protocol (it sent "
                         f"{answer[:_QUOTED_BYTES]!r})", "08P01")
        self.answer = answer


# --- frontend messages → bytes ----------------------------------------------------------


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + _pack_int4(len(body) + 4) + body


def _untyped(body: bytes) -> bytes:
    return _pack_int4(len(body) + 4) + body


def _startup(msg: m.StartupMessage) -> bytes:
    pairs = b"".join(_cstr(k) + _cstr(v) for k, v in msg.parameters)
    return _untyped(_pack_uint4(msg.protocol) + pairs + b"\0")


def _bind(msg: m.Bind) -> bytes:
    parts = [_cstr(msg.portal), _cstr(msg.statement), _pack_int2(len(msg.param_formats))]
    parts += [_pack_int2(code) for code in msg.param_formats]
    parts.append(_pack_int2(len(msg.params)))
    for value in msg.params:
        parts.append(b"\xff\xff\xff\xff" if value is None else _pack_int4(len(value)) + value)
    parts.append(_pack_int2(len(msg.result_formats)))
    parts += [_pack_int2(code) for code in msg.result_formats]
    return _frame(b"B", b"".join(parts))


def _sasl_initial(msg: m.SASLInitialResponse) -> bytes:
    data = b"\xff\xff\xff\xff" if msg.data is None else _pack_int4(len(msg.data)) + msg.data
    return _frame(b"p", _cstr(msg.mechanism) + data)


_FRONTEND: Final[dict[type, Callable[[Any], bytes]]] = {
    m.StartupMessage: _startup,
    m.SSLRequest: lambda _msg: _untyped(_pack_int4(SSL_REQUEST_CODE)),
    m.GSSENCRequest: lambda _msg: _untyped(_pack_int4(GSSENC_REQUEST_CODE)),
    m.CancelRequest: lambda msg: _untyped(
        _pack_int4(CANCEL_REQUEST_CODE) + _pack_int4(msg.process_id) + _pack_int4(msg.secret_key)
    ),
    m.PasswordMessage: lambda msg: _frame(b"p", msg.payload),
    m.SASLInitialResponse: _sasl_initial,
    m.Query: lambda msg: _frame(b"Q", _cstr(msg.sql)),
    m.Parse: lambda msg: _frame(
        b"P",
        _cstr(msg.name)
        + _cstr(msg.query)
        + _pack_int2(len(msg.param_oids))
        + b"".join(_pack_uint4(oid) for oid in msg.param_oids),
    ),
    m.Bind: _bind,
    m.Describe: lambda msg: _frame(b"D", msg.kind.encode("ascii") + _cstr(msg.name)),
    m.Execute: lambda msg: _frame(b"E", _cstr(msg.portal) + _pack_int4(msg.max_rows)),
    m.Close: lambda msg: _frame(b"C", msg.kind.encode("ascii") + _cstr(msg.name)),
    m.Sync: lambda _msg: b"S\0\0\0\x04",
    m.Flush: lambda _msg: b"H\0\0\0\x04",
    m.Terminate: lambda _msg: b"X\0\0\0\x04",
    m.CopyData: lambda msg: _frame(b"d", msg.data),
    m.CopyDone: lambda _msg: b"c\0\0\0\x04",
    m.CopyFail: lambda msg: _frame(b"f", _cstr(msg.message)),
    m.FunctionCall: lambda msg: _frame(b"F", msg.payload),
}


def encode_frontend(msg: m.FrontendMessage | m.SASLInitialResponse) -> bytes:
    """The bytes a client sends for ``msg`` (a SASLInitialResponse travels as ``p``)."""
    return _FRONTEND[type(msg)](msg)


# --- bytes → backend messages -----------------------------------------------------------


class _Body:
    """A cursor over one message body; an overrun raises struct.error or ValueError,
    which :meth:`BackendDecoder.feed` reports as a PgError."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return tuple(int(v) for v in values)

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise ValueError("value runs past the end of the message")
        value = self.data[self.pos : end]
        self.pos = end
        return value

    def cstr(self) -> str:
        end = self.data.index(b"\0", self.pos)
        value = self.data[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return value

    def rest(self) -> bytes:
        value = self.data[self.pos :]
        self.pos = len(self.data)
        return value

    def fields(self) -> tuple[tuple[str, str], ...]:
        out = []
        while self.data[self.pos] != 0:
            code = chr(self.data[self.pos])
            self.pos += 1
            out.append((code, self.cstr()))
        self.pos += 1
        return tuple(out)


def _auth(b: _Body) -> m.BackendMessage:
    (code,) = b.unpack("!i")
    if code == 0:
        return m.AuthenticationOk()
    if code == 3:
        return m.AuthenticationCleartextPassword()
    if code == 5:
        return m.AuthenticationMD5Password(b.rest())
    if code == 10:
        names = []
        while (name := b.cstr()) != "":
            names.append(name)
        return m.AuthenticationSASL(tuple(names))
    if code == 11:
        return m.AuthenticationSASLContinue(b.rest())
    if code == 12:
        return m.AuthenticationSASLFinal(b.rest())
    raise PgError(f"unsupported authentication request {code}")


def _row_description(b: _Body) -> m.RowDescription:
    (n,) = b.unpack("!h")
    fields = []
    for _ in range(n):
        name = b.cstr()
        table, attr, oid, size, mod, fmt = b.unpack("!IhIhih")
        fields.append(m.FieldDescription(name, oid, size, fmt, table, attr, mod))
    return m.RowDescription(tuple(fields))


def _data_row(b: _Body) -> m.DataRow:
    (n,) = b.unpack("!h")
    values: list[bytes | None] = []
    for _ in range(n):
        (size,) = b.unpack("!i")
        values.append(None if size < 0 else b.take(size))
    return m.DataRow(tuple(values))


def _negotiate(b: _Body) -> m.NegotiateProtocolVersion:
    minor, n = b.unpack("!ii")
    return m.NegotiateProtocolVersion(minor, tuple(b.cstr() for _ in range(n)))


_BACKEND: Final[dict[bytes, Callable[[_Body], m.BackendMessage]]] = {
    b"R": _auth,
    b"S": lambda b: m.ParameterStatus(b.cstr(), b.cstr()),
    b"K": lambda b: m.BackendKeyData(*b.unpack("!ii")),
    b"Z": lambda b: m.ReadyForQuery(b.rest().decode("ascii")),
    b"T": _row_description,
    b"D": _data_row,
    b"C": lambda b: m.CommandComplete(b.cstr()),
    b"I": lambda _b: m.EmptyQueryResponse(),
    b"E": lambda b: m.ErrorResponse(b.fields()),
    b"N": lambda b: m.NoticeResponse(b.fields()),
    b"1": lambda _b: m.ParseComplete(),
    b"2": lambda _b: m.BindComplete(),
    b"3": lambda _b: m.CloseComplete(),
    b"n": lambda _b: m.NoData(),
    b"s": lambda _b: m.PortalSuspended(),
    b"t": lambda b: m.ParameterDescription(b.unpack(f"!{b.unpack('!h')[0]}I")),
    b"v": _negotiate,
}


def _violation(text: str) -> PgError:
    return PgError(text, "08P01")


class BackendDecoder:
    """Decodes what the server sends into backend messages, buffering partial ones.

    The single-byte answer to an SSLRequest is not framed; a caller that sent one reads
    that byte itself before feeding the rest here.

    With ``startup=True`` the decoder expects the answer to a StartupMessage: a first byte
    outside :data:`STARTUP_ANSWER_TYPES`, or bytes that break framing before the first
    message, raise :class:`NotPostgresError`, so a client can tell "not PostgreSQL at all"
    from "a PostgreSQL server that misbehaved".
    """

    __slots__ = ("_buf", "_first", "_max")

    def __init__(self, *, max_message_size: int = DEFAULT_MAX_BACKEND_MESSAGE,
                 startup: bool = False) -> None:
        self._buf = bytearray()
        self._max = max_message_size
        #: still waiting for the first message of a startup answer
        self._first = startup

    def feed(self, data: bytes) -> list[m.BackendMessage]:
        """Every message completed by ``data``; raises PgError (08P01) on bad bytes,
        after which framing is lost and the connection must be dropped."""
        buf = self._buf
        buf += data
        if self._first:
            return self._feed_first()
        return self._feed()

    def _feed_first(self) -> list[m.BackendMessage]:
        if self._buf and self._buf[0] not in STARTUP_ANSWER_TYPES:
            raise NotPostgresError(bytes(self._buf))
        try:
            out = self._feed()
        except PgError:
            raise NotPostgresError(bytes(self._buf)) from None
        if out:
            self._first = False
        return out

    def _feed(self) -> list[m.BackendMessage]:
        buf = self._buf
        out: list[m.BackendMessage] = []
        pos = 0
        while len(buf) - pos >= 5:
            type_byte = bytes(buf[pos : pos + 1])
            (length,) = _I32.unpack_from(buf, pos + 1)
            if length < 4 or length - 4 > self._max:
                raise _violation(f"bad message length {length} for {type_byte!r}")
            end = pos + 1 + length
            if len(buf) < end:
                break
            reader = _BACKEND.get(type_byte)
            if reader is None:
                raise _violation(f"unknown backend message type {type_byte!r}")
            body = _Body(bytes(buf[pos + 5 : end]))
            pos = end
            try:
                msg = reader(body)
            except (struct.error, ValueError, IndexError) as exc:
                raise _violation(f"malformed {type_byte!r} message: {exc}") from None
            if body.pos != len(body.data):
                raise _violation(f"trailing bytes in {type(msg).__name__}")
            out.append(msg)
        del buf[:pos]
        return out

    @property
    def buffered(self) -> bytes:
        """The bytes of a message not yet complete."""
        return bytes(self._buf)
