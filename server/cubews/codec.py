"""Sans-I/O flatbuffers codec for Cube Store's ``HttpMessage`` (``http_message.fbs``).

One binary WebSocket message holds one finished flatbuffer rooted at ``HttpMessage``: no
size prefix, no file identifier. There is no ``flatc`` step in cubequeue; the tables of
``http_message.fbs`` are written here by hand.

**Encoding** uses :class:`flatbuffers.Builder` and reproduces the byte layout of Cube
Store's Rust code (flatc-generated builders), so ``tests/server/cubews/test_ws_codec.py`` can
compare against the golden dumps of ``rust/cubeshared/tests/wire_compat.rs`` byte for
byte. Two rules give that layout:

* the order in which children are created: strings and vectors before the table that
  points at them, a table's children in field order, the command before the message's
  ``connection_id`` string;
* the order in which a table's fields are added, which is flatc's: largest scalar size
  first and, within one size, the last declared field first (``HttpMessage``:
  connection_id, command, message_id, then the one-byte command_type).

**Decoding** does not use :class:`flatbuffers.table.Table`: that reader trusts offsets
blindly (Python's negative indexing turns a bad offset into silently wrong data), and
the Python runtime has no verifier. Cube Store runs Rust's verifier
(``root_as_http_message``) on every message, so the reader below checks every offset,
length and UTF-8 string against the buffer, and caps the tables it will visit as the
Rust verifier does. Anything malformed raises :class:`ProtocolViolation`; nothing else
escapes. This module never imports asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import flatbuffers

from cubequeue.grammar.results import ColumnType, ResultSet, Value
from cubequeue.server.cubews.answers import ResultSetWriter, error_frame
from cubequeue.server.cubews.messages import (
    CommandType,
    HttpCommand,
    HttpError,
    HttpMessage,
    HttpQuery,
    HttpResultSet,
    HttpTable,
    OtherCommand,
    ParamType,
    ParamValue,
    param_type,
)
from cubequeue.server.cubews.query_reader import read_query
from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.timestamps import format_iso_utc

__all__ = [
    "MAX_TABLES",
    "cell_text",
    "cell_texts",
    "decode_general",
    "decode_message",
    "encode",
    "encode_error",
    "encode_query",
    "encode_result_set",
]

#: Tables one message may contain (the Rust verifier's default ``max_tables``).
MAX_TABLES = 1_000_000

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


# --------------------------------------------------------------------------- decoding


class _Reader:
    """Bounds-checked access to one buffer; every failure is a ProtocolViolation."""

    __slots__ = ("buf", "size", "tables")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.size = len(buf)
        self.tables = 0

    def scalar(self, fmt: struct.Struct, pos: int) -> int:
        if pos < 0 or pos + fmt.size > self.size:
            raise ProtocolViolation(f"malformed message: offset {pos} is outside the buffer")
        value: int = fmt.unpack_from(self.buf, pos)[0]
        return value

    def float64(self, pos: int) -> float:
        if pos < 0 or pos + 8 > self.size:
            raise ProtocolViolation(f"malformed message: offset {pos} is outside the buffer")
        value: float = _F64.unpack_from(self.buf, pos)[0]
        return value

    def indirect(self, pos: int) -> int:
        return pos + self.scalar(_U32, pos)

    def table(self, pos: int) -> _Table:
        self.tables += 1
        if self.tables > MAX_TABLES:
            raise ProtocolViolation(f"malformed message: more than {MAX_TABLES} tables")
        vtable = pos - self.scalar(_I32, pos)
        vt_size = self.scalar(_U16, vtable)
        obj_size = self.scalar(_U16, vtable + 2)
        if vt_size < 4 or vt_size % 2 or vtable + vt_size > self.size:
            raise ProtocolViolation("malformed message: bad vtable")
        if obj_size < 4 or pos + obj_size > self.size:
            raise ProtocolViolation("malformed message: table runs past the buffer")
        return _Table(self, pos, vtable, vt_size, obj_size)

    def vector(self, pos: int, elem_size: int) -> tuple[int, int]:
        """(start of data, element count) of the vector at ``pos``."""
        count = self.scalar(_U32, pos)
        start = pos + 4
        if start + count * elem_size > self.size:
            raise ProtocolViolation("malformed message: vector runs past the buffer")
        return start, count

    def string(self, pos: int) -> str:
        start, length = self.vector(pos, 1)
        try:
            return self.buf[start : start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation("malformed message: a string is not valid UTF-8") from None


class _Table:
    __slots__ = ("obj_size", "pos", "reader", "vt_size", "vtable")

    def __init__(self, reader: _Reader, pos: int, vtable: int, vt_size: int, obj_size: int):
        self.reader = reader
        self.pos = pos
        self.vtable = vtable
        self.vt_size = vt_size
        self.obj_size = obj_size

    def field(self, slot: int, width: int) -> int:
        """Absolute position of a present field, or 0 when it is absent."""
        voffset = 4 + 2 * slot
        if voffset + 2 > self.vt_size:
            return 0
        offset = self.reader.scalar(_U16, self.vtable + voffset)
        if offset == 0:
            return 0
        if offset + width > self.obj_size:
            raise ProtocolViolation("malformed message: field outside its table")
        return self.pos + offset

    def u8(self, slot: int, default: int = 0) -> int:
        pos = self.field(slot, 1)
        return self.reader.scalar(_U8, pos) if pos else default

    def u32(self, slot: int) -> int:
        pos = self.field(slot, 4)
        return self.reader.scalar(_U32, pos) if pos else 0

    def i64(self, slot: int) -> int:
        pos = self.field(slot, 8)
        return self.reader.scalar(_I64, pos) if pos else 0

    def f64(self, slot: int) -> float:
        pos = self.field(slot, 8)
        return self.reader.float64(pos) if pos else 0.0

    def target(self, slot: int) -> int:
        """Where the offset field in ``slot`` points, or 0 when absent."""
        pos = self.field(slot, 4)
        return self.reader.indirect(pos) if pos else 0

    def string(self, slot: int) -> str | None:
        pos = self.target(slot)
        return self.reader.string(pos) if pos else None

    def required_target(self, slot: int, what: str) -> int:
        pos = self.target(slot)
        if not pos:
            raise ProtocolViolation(f"malformed message: required field {what} is missing")
        return pos

    def offsets(self, slot: int) -> list[int] | None:
        """Targets of a vector of offsets (tables or strings), or None when absent."""
        pos = self.target(slot)
        if not pos:
            return None
        start, count = self.reader.vector(pos, 4)
        return [self.reader.indirect(start + 4 * i) for i in range(count)]

    def strings(self, slot: int) -> tuple[str, ...] | None:
        targets = self.offsets(slot)
        return None if targets is None else tuple(self.reader.string(t) for t in targets)


def decode_message(data: bytes) -> HttpMessage:
    """Decode one ``HttpMessage``; :class:`ProtocolViolation` when it is malformed.

    The common request (an ``HttpQuery``) is read by :func:`.query_reader.read_query`;
    whatever it declines is read here, with every check."""
    fast = read_query(data)
    return fast if fast is not None else decode_general(data)


def decode_general(data: bytes) -> HttpMessage:
    """:func:`decode_message` without the common request's reader: any command, with every
    check (the reference that reader is tested against)."""
    reader = _Reader(bytes(data))
    root = reader.table(reader.scalar(_U32, 0))
    message_id = root.u32(0)
    command_type = root.u8(1)
    connection_id = root.string(3)
    command: HttpCommand
    if command_type in (CommandType.HTTP_QUERY, CommandType.HTTP_RESULT_SET, CommandType.HTTP_ERROR):
        table = reader.table(root.required_target(2, "command"))
        if command_type == CommandType.HTTP_QUERY:
            command = _decode_query(reader, table)
        elif command_type == CommandType.HTTP_RESULT_SET:
            command = _decode_result_set(reader, table)
        else:
            command = HttpError(table.string(0) or "")
    else:
        command = OtherCommand(command_type)
    return HttpMessage(message_id, command, connection_id)


def _decode_query(reader: _Reader, table: _Table) -> HttpQuery:
    inline_tables = None
    targets = table.offsets(2)
    if targets is not None:
        inline_tables = tuple(_decode_table(reader.table(t)) for t in targets)
    parameters = None
    targets = table.offsets(3)
    if targets is not None:
        parameters = tuple(_decode_parameter(reader, reader.table(t)) for t in targets)
    return HttpQuery(
        query=table.string(0),
        trace_obj=table.string(1),
        inline_tables=inline_tables,
        parameters=parameters,
        response_format=table.u8(4),
    )


def _decode_table(table: _Table) -> HttpTable:
    return HttpTable(table.string(0), table.strings(1), table.strings(2), table.string(3))


def _decode_parameter(reader: _Reader, param: _Table) -> ParamValue:
    tag = param.u8(0)
    value = reader.table(param.required_target(1, "HttpParameter.value"))
    if tag == ParamType.INT64:
        return value.i64(0)
    if tag == ParamType.BOOL:
        return value.u8(0) != 0
    if tag == ParamType.STRING:
        return reader.string(value.required_target(0, "StringValue.v"))
    if tag == ParamType.BINARY:
        start, count = reader.vector(value.required_target(0, "BinaryValue.v"), 1)
        return reader.buf[start : start + count]
    if tag == ParamType.FLOAT64:
        return value.f64(0)
    if tag == ParamType.NULL:
        return None
    raise ProtocolViolation(f"malformed message: unknown parameter type {tag}")


def _decode_result_set(reader: _Reader, table: _Table) -> HttpResultSet:
    rows: list[tuple[str | None, ...]] = []
    for row_pos in table.offsets(1) or ():
        cells = reader.table(row_pos).offsets(0) or ()
        rows.append(tuple(reader.table(c).string(0) for c in cells))
    return HttpResultSet(table.strings(0) or (), tuple(rows))


# --------------------------------------------------------------------------- encoding


def cell_text(value: Value, column_type: ColumnType) -> str | None:
    """One cell as Cube Store's legacy format sends it (``docs/dialect.md`` §1.5, §8 rules
    6 and 11): every value is text, booleans ``true``/``false``, timestamps ISO 8601 UTC
    with ms (:func:`cubequeue.server.timestamps.format_iso_utc`)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if column_type is ColumnType.TIMESTAMP and isinstance(value, int):
        return format_iso_utc(value)
    return str(value)


def _string_vector(builder: flatbuffers.Builder, items: Sequence[str]) -> int:
    offsets = [builder.CreateString(item) for item in items]
    return _offset_vector(builder, offsets)


def _offset_vector(builder: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    end: int = builder.EndVector()
    return end


def _finish_message(
    builder: flatbuffers.Builder,
    message_id: int,
    connection_id: str | None,
    command_type: int,
    command: int,
) -> bytes:
    conn = builder.CreateString(connection_id) if connection_id is not None else 0
    builder.StartObject(4)
    if conn:
        builder.PrependUOffsetTRelativeSlot(3, conn, 0)
    builder.PrependUOffsetTRelativeSlot(2, command, 0)
    builder.PrependUint32Slot(0, message_id, 0)
    builder.PrependUint8Slot(1, command_type, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def _result_set_table(
    builder: flatbuffers.Builder,
    columns: Sequence[str],
    rows: Sequence[Sequence[str | None]],
) -> int:
    columns_vec = _string_vector(builder, columns)
    row_offsets = []
    for row in rows:
        cells = []
        for text in row:
            value = builder.CreateString(text) if text is not None else 0
            builder.StartObject(1)
            if value:
                builder.PrependUOffsetTRelativeSlot(0, value, 0)
            cells.append(builder.EndObject())
        values_vec = _offset_vector(builder, cells)
        builder.StartObject(1)
        builder.PrependUOffsetTRelativeSlot(0, values_vec, 0)
        row_offsets.append(builder.EndObject())
    rows_vec = _offset_vector(builder, row_offsets)
    builder.StartObject(2)
    builder.PrependUOffsetTRelativeSlot(1, rows_vec, 0)
    builder.PrependUOffsetTRelativeSlot(0, columns_vec, 0)
    table: int = builder.EndObject()
    return table


def encode_result_set(message_id: int, connection_id: str | None, result: ResultSet) -> bytes:
    """A store result as ``HttpResultSet``: every cell a string, NULL an absent string.

    Written by :mod:`.answers` (the same bytes as :func:`encode`, without the Builder's
    per-step cost: every statement's answer passes here)."""
    columns = result.columns
    writer = ResultSetWriter([c.name for c in columns])
    writer.add(result.rows, [c.type for c in columns], cell_text, ColumnType.STRING)
    return writer.finish(message_id, connection_id)


def cell_texts(rows: Iterable[Sequence[Value]], types: list[ColumnType]) -> list[list[str | None]]:
    """Rows of store values as rows of :func:`cell_text` (a cell past the columns is a
    string); a str or NULL cell, nearly every cell, is taken as it is."""
    out = []
    for row in rows:
        if len(row) > len(types):
            types = types + [ColumnType.STRING] * (len(row) - len(types))
        out.append([v if v is None or v.__class__ is str else cell_text(v, t)
                    for v, t in zip(row, types, strict=False)])  # fmt: skip
    return out


def encode_error(message_id: int, connection_id: str | None, text: str) -> bytes:
    return error_frame(message_id, connection_id, text)


def encode_query(
    message_id: int,
    connection_id: str | None,
    query: str | None,
    *,
    trace_obj: str | None = None,
    inline_tables: Sequence[HttpTable] | None = None,
    parameters: Sequence[ParamValue] | None = None,
    response_format: int = 0,
) -> bytes:
    """An ``HttpQuery`` as Cube's client sends it (used by tests and the Python client)."""
    builder = flatbuffers.Builder(256)
    query_off = builder.CreateString(query) if query is not None else 0
    trace_off = builder.CreateString(trace_obj) if trace_obj is not None else 0
    tables_vec = 0
    if inline_tables is not None:
        tables_vec = _offset_vector(builder, [_inline_table(builder, t) for t in inline_tables])
    params_vec = 0
    if parameters is not None:
        params_vec = _offset_vector(builder, [_parameter(builder, p) for p in parameters])
    builder.StartObject(5)
    if params_vec:
        builder.PrependUOffsetTRelativeSlot(3, params_vec, 0)
    if tables_vec:
        builder.PrependUOffsetTRelativeSlot(2, tables_vec, 0)
    if trace_off:
        builder.PrependUOffsetTRelativeSlot(1, trace_off, 0)
    if query_off:
        builder.PrependUOffsetTRelativeSlot(0, query_off, 0)
    builder.PrependUint8Slot(4, response_format, 0)
    table = builder.EndObject()
    return _finish_message(builder, message_id, connection_id, CommandType.HTTP_QUERY, table)


def _inline_table(builder: flatbuffers.Builder, table: HttpTable) -> int:
    # Creation order of the wire_compat dump: columns, types, csv_rows, then name.
    columns = _string_vector(builder, table.columns) if table.columns is not None else 0
    types = _string_vector(builder, table.types) if table.types is not None else 0
    csv_rows = builder.CreateString(table.csv_rows) if table.csv_rows is not None else 0
    name = builder.CreateString(table.name) if table.name is not None else 0
    builder.StartObject(4)
    for slot, offset in ((3, csv_rows), (2, types), (1, columns), (0, name)):
        if offset:
            builder.PrependUOffsetTRelativeSlot(slot, offset, 0)
    end: int = builder.EndObject()
    return end


def _parameter(builder: flatbuffers.Builder, value: ParamValue) -> int:
    kind = param_type(value)
    child = 0
    if isinstance(value, str):
        child = builder.CreateString(value)
    elif isinstance(value, bytes):
        child = builder.CreateByteVector(value)
    builder.StartObject(1)
    if kind is ParamType.INT64:
        assert isinstance(value, int)
        builder.PrependInt64Slot(0, value, 0)
    elif kind is ParamType.BOOL:
        builder.PrependBoolSlot(0, bool(value), False)
    elif kind is ParamType.FLOAT64:
        assert isinstance(value, float)
        builder.PrependFloat64Slot(0, value, 0.0)
    elif child:  # String / Binary: required, so written even when empty
        builder.PrependUOffsetTRelativeSlot(0, child, 0)
    value_table = builder.EndObject()
    builder.StartObject(2)
    builder.PrependUOffsetTRelativeSlot(1, value_table, 0)
    builder.PrependUint8Slot(0, kind, 0)
    end: int = builder.EndObject()
    return end


def encode(message: HttpMessage) -> bytes:
    """Any decoded message back to bytes (``decode_message(encode(m)) == m``)."""
    command = message.command
    if isinstance(command, HttpQuery):
        return encode_query(
            message.message_id, message.connection_id, command.query,
            trace_obj=command.trace_obj, inline_tables=command.inline_tables,
            parameters=command.parameters, response_format=command.response_format,
        )
    if isinstance(command, HttpError):
        builder = flatbuffers.Builder(64 + len(command.error))
        error = builder.CreateString(command.error)
        builder.StartObject(1)
        builder.PrependUOffsetTRelativeSlot(0, error, 0)
        return _finish_message(builder, message.message_id, message.connection_id,
                               CommandType.HTTP_ERROR, builder.EndObject())  # fmt: skip
    if isinstance(command, HttpResultSet):
        builder = flatbuffers.Builder(256)
        table = _result_set_table(builder, command.columns, command.rows)
        return _finish_message(
            builder, message.message_id, message.connection_id,
            CommandType.HTTP_RESULT_SET, table,
        )
    raise ValueError(f"cannot encode command type {command.type_tag}")
