"""Sans-I/O framing, server side, outbound: backend messages → bytes (PostgreSQL 15's
"Message Formats"). The body-less replies and ReadyForQuery are prebuilt bytes the
session appends as they are; :func:`encode_data_row` and
:func:`encode_command_complete` serve the hot path without building a message object.
Frontend messages are read by :mod:`.decoder`. Nothing here imports asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Final

from cubequeue.server.pgwire import messages as m

__all__ = [
    "BIND_COMPLETE",
    "CLOSE_COMPLETE",
    "COPY_DONE",
    "EMPTY_QUERY",
    "NO_DATA",
    "PARSE_COMPLETE",
    "PORTAL_SUSPENDED",
    "READY",
    "encode",
    "encode_command_complete",
    "encode_copy_data",
    "encode_copy_out_response",
    "encode_data_row",
    "encode_many",
]

# Precompiled network-order writers (as psycopg precompiles its own).
pack_int2: Final = struct.Struct("!h").pack
pack_int4: Final = struct.Struct("!i").pack
pack_uint4: Final = struct.Struct("!I").pack


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + pack_int4(len(body) + 4) + body


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


_AUTH_OK: Final = _frame(b"R", pack_int4(0))
_AUTH_CLEARTEXT: Final = _frame(b"R", pack_int4(3))
#: the body-less replies, prebuilt: the session appends these bytes as they are
PARSE_COMPLETE: Final = b"1\0\0\0\x04"
BIND_COMPLETE: Final = b"2\0\0\0\x04"
CLOSE_COMPLETE: Final = b"3\0\0\0\x04"
NO_DATA: Final = b"n\0\0\0\x04"
PORTAL_SUSPENDED: Final = b"s\0\0\0\x04"
EMPTY_QUERY: Final = b"I\0\0\0\x04"
#: ReadyForQuery by transaction status
READY: Final = {s: b"Z\0\0\0\x05" + s.encode() for s in "ITE"}


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
    return encode_data_row(msg.values)


def encode_data_row(values: tuple[bytes | None, ...]) -> bytes:
    """A DataRow straight from its column values (no :class:`~messages.DataRow`)."""
    parts = [pack_int2(len(values))]
    append = parts.append
    for value in values:
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


@lru_cache(maxsize=1024)
def encode_command_complete(tag: str) -> bytes:
    """CommandComplete. Remembered: tags recur (``QUEUE ACK``, ``QUEUE LIST 1``,
    ``SELECT 1``), and a hit is a hash lookup of a short string instead of an encode, a
    pack and two concatenations; the bound keeps ever new row counts from growing it."""
    raw = tag.encode("utf-8")
    return b"C" + pack_int4(len(raw) + 5) + raw + b"\0"


#: CopyDone ('c'): the end of a COPY TO's data (both directions use the same frame)
COPY_DONE: Final = b"c\0\0\0\x04"


def encode_copy_out_response(overall_format: int, column_formats: tuple[int, ...]) -> bytes:
    """CopyOutResponse ('H'): the server starts COPY TO STDOUT; ``overall_format`` 0 is
    text (then every column format is 0, as PostgreSQL sends them)."""
    body = bytes((overall_format,)) + pack_int2(len(column_formats))
    return _frame(b"H", body + b"".join(pack_int2(f) for f in column_formats))


def encode_copy_data(data: bytes) -> bytes:
    """CopyData ('d'): one row of COPY TO's output (a whole line, LF included)."""
    return b"d" + pack_int4(len(data) + 4) + data


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
    m.ReadyForQuery: lambda msg: READY[msg.status],
    m.RowDescription: _row_description,
    m.DataRow: _data_row,
    m.CommandComplete: lambda msg: encode_command_complete(msg.tag),
    m.EmptyQueryResponse: lambda _msg: EMPTY_QUERY,
    m.ErrorResponse: lambda msg: _frame(b"E", _fields(msg.fields)),
    m.NoticeResponse: lambda msg: _frame(b"N", _fields(msg.fields)),
    m.ParseComplete: lambda _msg: PARSE_COMPLETE,
    m.BindComplete: lambda _msg: BIND_COMPLETE,
    m.CloseComplete: lambda _msg: CLOSE_COMPLETE,
    m.NoData: lambda _msg: NO_DATA,
    m.PortalSuspended: lambda _msg: PORTAL_SUSPENDED,
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
