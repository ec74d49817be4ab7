"""The common request, ``HttpMessage{HttpQuery}``, read with direct ``struct`` reads.

Every statement over the WebSocket starts with decoding its message, and the general
reader of :mod:`.codec` (a bounds-checked method call per scalar, about thirty per
message) cost about as much as running a short statement. :func:`read_query` reads the
shape Cube's driver sends (a query, an optional ``connection_id`` and ``trace_obj``,
typed parameters, no inline tables) in a few functions with the same checks inline: the
vtable and object bounds of every table, every field inside its table, every vector and
string inside the buffer, UTF-8 strings, known parameter tags.

It never decides that a message is malformed: whatever it does not read, or finds
wrong, it declines (``None``), and the general reader decodes it or raises the
:class:`~cubequeue.server.errors.ProtocolViolation` naming the fault. So a message it
reads decodes to what the general reader gives (``tests/server/cubews/test_ws_query_reader.py``
checks both against each other on generated and corrupted messages).
"""

from __future__ import annotations

import struct
from typing import Final

from cubequeue.server.cubews.messages import HttpMessage, HttpQuery, ParamValue

__all__ = ["MAX_FAST_PARAMETERS", "read_query"]

#: more parameters than this go to the general reader (which counts tables against the
#: verifier's cap); Cube's statements have at most a handful
MAX_FAST_PARAMETERS: Final = 64

_u8: Final = struct.Struct("<B").unpack_from
_u16: Final = struct.Struct("<H").unpack_from
_u32: Final = struct.Struct("<I").unpack_from
_i32: Final = struct.Struct("<i").unpack_from
_i64: Final = struct.Struct("<q").unpack_from
_f64: Final = struct.Struct("<d").unpack_from
_head: Final = struct.Struct("<HH").unpack_from
_vt1: Final = struct.Struct("<HHH").unpack_from
_vt2: Final = struct.Struct("<HHHH").unpack_from
#: ``n`` vtable slots at once, for the widest table read here (HttpQuery: 5 fields)
_slots: Final = [struct.Struct(f"<{n}H").unpack_from for n in range(6)]
_HTTP_QUERY: Final = 1
_INT64, _BOOL, _STRING, _BINARY, _FLOAT64, _NULL = 1, 2, 3, 4, 5, 6


class _ForGeneralReader(Exception):
    """Not read here: the general reader decides."""


def _fields(buf: bytes, size: int, pos: int, widths: tuple[int, ...]) -> list[int]:
    """The absolute position of each field of the table at ``pos`` (0: absent), each
    checked to lie inside its object, as ``codec._Reader.table`` and ``_Table.field``."""
    vtable = pos - _i32(buf, pos)[0]
    if vtable < 0:
        raise _ForGeneralReader
    vt_size, obj_size = _head(buf, vtable)
    if (
        vt_size < 4
        or vt_size & 1
        or vtable + vt_size > size
        or obj_size < 4
        or pos + obj_size > size
    ):
        raise _ForGeneralReader
    n = len(widths)
    if vt_size >= 4 + 2 * n:  # every slot asked for is in the vtable: one read
        offsets: tuple[int, ...] = _slots[n](buf, vtable + 4)
    else:  # a shorter vtable (trailing fields absent)
        have = (vt_size - 4) // 2
        offsets = _slots[have](buf, vtable + 4) + (0,) * (n - have)
    out = []
    for offset, width in zip(offsets, widths, strict=True):
        if offset and offset + width > obj_size:
            raise _ForGeneralReader
        out.append(pos + offset if offset else 0)
    return out


def _only_field(buf: bytes, size: int, pos: int, width: int) -> int:
    """:func:`_fields` for a table of one field (a parameter's value): the same checks
    without the tuple, the list and the loop, since a statement's parameters are most of
    the tables of its message."""
    vtable = pos - _i32(buf, pos)[0]
    if vtable < 0:
        raise _ForGeneralReader
    offset: int
    vt_size, obj_size, offset = _vt1(buf, vtable) if vtable + 6 <= size else (0, 0, 0)
    if (
        vt_size < 4
        or vt_size & 1
        or vtable + vt_size > size
        or obj_size < 4
        or pos + obj_size > size
    ):
        raise _ForGeneralReader
    if vt_size < 6:
        return 0
    if not offset:
        return 0
    if offset + width > obj_size:
        raise _ForGeneralReader
    return pos + offset


def _string(buf: bytes, size: int, field: int) -> str | None:
    """The string an offset field points at (None when the field is absent)."""
    if not field:
        return None
    target = field + _u32(buf, field)[0]
    start = target + 4
    end = start + _u32(buf, target)[0]
    if end > size:
        raise _ForGeneralReader
    try:
        return buf[start:end].decode("utf-8")
    except UnicodeDecodeError:
        raise _ForGeneralReader from None


def _parameter(buf: bytes, size: int, pos: int) -> ParamValue:
    # the Param table (value_type: u8, value: offset), as _fields reads it, inline
    vtable = pos - _i32(buf, pos)[0]
    if vtable < 0 or vtable + 8 > size:
        raise _ForGeneralReader  # (a vtable without the value slot has no value: declined too)
    vt_size, obj_size, tag_off, value_off = _vt2(buf, vtable)
    if (
        vt_size < 8
        or vt_size & 1
        or vtable + vt_size > size
        or obj_size < 4
        or pos + obj_size > size
        or not value_off
        or value_off + 4 > obj_size
        or (tag_off and tag_off + 1 > obj_size)
    ):
        raise _ForGeneralReader
    tag = _u8(buf, pos + tag_off)[0] if tag_off else 0
    value_at = pos + value_off
    value = value_at + _u32(buf, value_at)[0]
    if tag == _STRING:
        text = _string(buf, size, _only_field(buf, size, value, 4))
        if text is None:
            raise _ForGeneralReader
        return text
    if tag == _INT64:
        at = _only_field(buf, size, value, 8)
        return _i64(buf, at)[0] if at else 0
    if tag == _NULL:
        _fields(buf, size, value, ())
        return None
    if tag == _BOOL:
        at = _only_field(buf, size, value, 1)
        return bool(_u8(buf, at)[0]) if at else False
    if tag == _FLOAT64:
        at = _only_field(buf, size, value, 8)
        return float(_f64(buf, at)[0]) if at else 0.0
    if tag == _BINARY:
        at = _only_field(buf, size, value, 4)
        if not at:
            raise _ForGeneralReader
        target = at + _u32(buf, at)[0]
        start = target + 4
        end = start + _u32(buf, target)[0]
        if end > size:
            raise _ForGeneralReader
        return buf[start:end]
    raise _ForGeneralReader


def read_query(data: bytes) -> HttpMessage | None:
    """``data`` as an ``HttpMessage{HttpQuery}`` without inline tables, or None: leave it
    to :func:`~.codec.decode_message` (another command, inline tables, or any fault)."""
    buf = bytes(data)  # no copy when it is bytes already
    size = len(buf)
    try:
        root = _u32(buf, 0)[0]
        id_at, type_at, command_at, conn_at = _fields(buf, size, root, (4, 1, 4, 4))
        if not type_at or _u8(buf, type_at)[0] != _HTTP_QUERY or not command_at:
            return None
        message_id = _u32(buf, id_at)[0] if id_at else 0
        connection_id = _string(buf, size, conn_at)
        query_pos = command_at + _u32(buf, command_at)[0]
        query_at, trace_at, tables_at, params_at, format_at = _fields(
            buf, size, query_pos, (4, 4, 4, 4, 1)
        )
        if tables_at:
            return None
        parameters: tuple[ParamValue, ...] | None = None
        if params_at:
            vector = params_at + _u32(buf, params_at)[0]
            count = _u32(buf, vector)[0]
            start = vector + 4
            if count > MAX_FAST_PARAMETERS or start + 4 * count > size:
                return None
            parameters = tuple(
                _parameter(buf, size, at + _u32(buf, at)[0])
                for at in range(start, start + 4 * count, 4)
            )
        query = HttpQuery(
            query=_string(buf, size, query_at),
            trace_obj=_string(buf, size, trace_at),
            parameters=parameters,
            response_format=_u8(buf, format_at)[0] if format_at else 0,
        )
    except (_ForGeneralReader, struct.error):
        return None
    return HttpMessage(message_id, query, connection_id)
