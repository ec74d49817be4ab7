"""The client role of the codec: frontend messages → bytes, bytes → backend messages.

The server never calls this. It exists so the codec can be tested both ways round
(``decode(encode(m)) == m``, h11's ``ConnectionPair`` idea) and so tests and tools can
speak raw protocol to the server, e.g. to send what no driver would (garbage frames,
2,000 Syncs, a Describe without a Sync).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.codec import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    SSL_REQUEST_CODE,
    pack_int2,
    pack_int4,
    pack_uint4,
)

__all__ = ["BackendDecoder", "RawClient", "encode_frontend"]


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + pack_int4(len(body) + 4) + body


def _untyped(body: bytes) -> bytes:
    return pack_int4(len(body) + 4) + body


def _startup(msg: m.StartupMessage) -> bytes:
    pairs = b"".join(_cstr(k) + _cstr(v) for k, v in msg.parameters)
    return _untyped(pack_uint4(msg.protocol) + pairs + b"\0")


def _bind(msg: m.Bind) -> bytes:
    parts = [_cstr(msg.portal), _cstr(msg.statement), pack_int2(len(msg.param_formats))]
    parts += [pack_int2(code) for code in msg.param_formats]
    parts.append(pack_int2(len(msg.params)))
    for value in msg.params:
        parts.append(b"\xff\xff\xff\xff" if value is None else pack_int4(len(value)) + value)
    parts.append(pack_int2(len(msg.result_formats)))
    parts += [pack_int2(code) for code in msg.result_formats]
    return _frame(b"B", b"".join(parts))


_FRONTEND: dict[type, Callable[[Any], bytes]] = {
    m.StartupMessage: _startup,
    m.SSLRequest: lambda _msg: _untyped(pack_int4(SSL_REQUEST_CODE)),
    m.GSSENCRequest: lambda _msg: _untyped(pack_int4(GSSENC_REQUEST_CODE)),
    m.CancelRequest: lambda msg: _untyped(
        pack_int4(CANCEL_REQUEST_CODE) + pack_int4(msg.process_id) + pack_int4(msg.secret_key)
    ),
    m.PasswordMessage: lambda msg: _frame(b"p", msg.payload),
    m.Query: lambda msg: _frame(b"Q", _cstr(msg.sql)),
    m.Parse: lambda msg: _frame(
        b"P",
        _cstr(msg.name)
        + _cstr(msg.query)
        + pack_int2(len(msg.param_oids))
        + b"".join(pack_uint4(oid) for oid in msg.param_oids),
    ),
    m.Bind: _bind,
    m.Describe: lambda msg: _frame(b"D", msg.kind.encode("ascii") + _cstr(msg.name)),
    m.Execute: lambda msg: _frame(b"E", _cstr(msg.portal) + pack_int4(msg.max_rows)),
    m.Close: lambda msg: _frame(b"C", msg.kind.encode("ascii") + _cstr(msg.name)),
    m.Sync: lambda _msg: b"S\0\0\0\x04",
    m.Flush: lambda _msg: b"H\0\0\0\x04",
    m.Terminate: lambda _msg: b"X\0\0\0\x04",
    m.CopyData: lambda msg: _frame(b"d", msg.data),
    m.CopyDone: lambda _msg: b"c\0\0\0\x04",
    m.CopyFail: lambda msg: _frame(b"f", _cstr(msg.message)),
    m.FunctionCall: lambda msg: _frame(b"F", msg.payload),
}


def encode_frontend(msg: m.FrontendMessage) -> bytes:
    return _FRONTEND[type(msg)](msg)


class _Body:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return tuple(int(v) for v in values)

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
    raise ProtocolViolation(f"unknown authentication request {code}")


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
        if size < 0:
            values.append(None)
        else:
            values.append(b.data[b.pos : b.pos + size])
            b.pos += size
    return m.DataRow(tuple(values))


def _negotiate(b: _Body) -> m.NegotiateProtocolVersion:
    minor, n = b.unpack("!ii")
    return m.NegotiateProtocolVersion(minor, tuple(b.cstr() for _ in range(n)))


_BACKEND: dict[bytes, Callable[[_Body], m.BackendMessage]] = {
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


class BackendDecoder:
    """Decodes what the server sends; a leading single ``S``/``N`` byte is an SSL answer."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[m.BackendMessage]:
        self._buf += data
        out: list[m.BackendMessage] = []
        while len(self._buf) >= 5:
            type_byte = self._buf[:1]
            (length,) = struct.unpack_from("!i", self._buf, 1)
            if len(self._buf) < 1 + length:
                break
            body = _Body(self._buf[5 : 1 + length])
            self._buf = self._buf[1 + length :]
            reader = _BACKEND.get(type_byte)
            if reader is None:
                raise ProtocolViolation(f"unknown backend message type {type_byte!r}")
            msg = reader(body)
            if body.pos != len(body.data):
                raise ProtocolViolation(f"trailing bytes in {type(msg).__name__}")
            out.append(msg)
        return out

    @property
    def buffered(self) -> bytes:
        return self._buf


class RawClient:
    """A blocking socket speaking raw messages, for tests that need exact control."""

    def __init__(self, host: str, port: int, *, timeout: float = 30.0) -> None:
        import socket

        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.decoder = BackendDecoder()
        self._ready: list[m.BackendMessage] = []

    def send(self, *msgs: m.FrontendMessage) -> None:
        self.sock.sendall(b"".join(encode_frontend(msg) for msg in msgs))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_byte(self) -> bytes:
        return self.sock.recv(1)

    def receive(self) -> m.BackendMessage | None:
        """The next message; None when the server closed the connection."""
        while not self._ready:
            data = self.sock.recv(65536)
            if not data:
                return None
            self._ready.extend(self.decoder.feed(data))
        return self._ready.pop(0)

    def until(self, kind: type, count: int = 1) -> list[m.BackendMessage]:
        """Every message up to and including the ``count``-th of type ``kind``."""
        out: list[m.BackendMessage] = []
        seen = 0
        while seen < count:
            msg = self.receive()
            if msg is None:
                raise ConnectionError(f"closed while waiting for {kind.__name__}: got {out!r}")
            out.append(msg)
            if isinstance(msg, kind):
                seen += 1
        return out

    def startup(self, user: str = "cube", **params: str) -> list[m.BackendMessage]:
        pairs = (("user", user), *params.items())
        self.send(m.StartupMessage(196608, tuple(pairs)))
        return self.until(m.ReadyForQuery)

    def query(self, sql: str) -> list[m.BackendMessage]:
        self.send(m.Query(sql))
        return self.until(m.ReadyForQuery)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
