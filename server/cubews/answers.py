"""The two answer frames (``HttpResultSet``, ``HttpError``) written without ``flatbuffers.Builder``.

Every statement over the WebSocket is answered with one of these, and the Python
runtime's Builder costs a few method calls and a bounds check per byte-sized step, a
large share of a short statement's server time (bench/RESULTS-notes.md). This writer
follows the Builder's algorithm step for step (back to front, the same alignment
padding, the same vtable deduplication, the same ``Finish``), so the bytes are identical
to :func:`~.codec.encode`'s (``tests/server/cubews/test_ws_answers.py`` checks both against each
other and against Cube Store's golden dumps); it only keeps the chunks in a list and
joins them once, instead of moving a head through a growing bytearray.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

from cubequeue.server.cubews.messages import CommandType

__all__ = ["MAX_CACHED_HEADS", "ResultSetWriter", "error_frame", "result_set_frame"]

_U32: Final = struct.Struct("<I")
_I32: Final = struct.Struct("<i")
_ZEROS: Final = bytes(8)
#: a vector of ``n`` offsets with its length, by ``n`` (short vectors only: a row's cells)
_VECTORS: dict[int, struct.Struct] = {}
_MAX_CACHED_VECTOR: Final = 64
_HTTP_ERROR: Final = int(CommandType.HTTP_ERROR)
_HTTP_RESULT_SET: Final = int(CommandType.HTTP_RESULT_SET)

#: a column type, as ``convert`` takes it (the store's, opaque here)
T = TypeVar("T")


class _BackToFront:
    """A flatbuffer written back to front: ``size`` is the Builder's ``Offset()``."""

    __slots__ = ("minalign", "parts", "size", "vtables")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.minalign = 1
        self.vtables: dict[tuple[int, ...], int] = {}

    def prep(self, align: int, additional: int) -> None:
        if align > self.minalign:
            self.minalign = align
        pad = -(self.size + additional) & (align - 1)
        if pad:
            self.parts.append(_ZEROS[:pad])
            self.size += pad

    def string(self, text: str) -> int:
        data = text.encode("utf-8")
        n = len(data)
        self.prep(4, n + 1)
        self.parts.append(data + b"\x00")
        self.parts.append(_U32.pack(n))
        self.size += n + 5
        return self.size

    def offsets(self, offsets: Sequence[int]) -> int:
        """A vector of offsets (``StartVector(4, n, 4)``, prepended last to first)."""
        n = len(offsets)
        self.prep(4, 4 * n)
        base = self.size + 4 * n
        values = [base - 4 * i - off for i, off in enumerate(offsets)]
        self.parts.append(_vector(n).pack(n, *values))
        self.size += 4 * n + 4
        return self.size

    def table(self, fields: Sequence[int]) -> int:
        """A table whose fields are all offsets (0 = absent), written last field first."""
        end = self.size
        slots = [0] * len(fields)
        for slot in range(len(fields) - 1, -1, -1):
            off = fields[slot]
            if off:
                self.prep(4, 0)
                self.parts.append(_U32.pack(self.size - off + 4))
                self.size += 4
                slots[slot] = self.size
        return self.end_table(end, slots)

    def end_table(self, end: int, slots: list[int]) -> int:
        """``WriteVtable``: the object's vtable offset, and the vtable unless one is equal."""
        self.prep(4, 0)
        self.size += 4
        obj = self.size
        while slots and not slots[-1]:
            slots.pop()
        fields = [obj - s if s else 0 for s in slots]
        key = (*reversed(fields), obj - end)
        found = self.vtables.get(key)
        if found is not None:
            self.parts.append(_I32.pack(found - obj))
            return obj
        vbytes = 2 * (len(fields) + 2)
        self.parts.append(_I32.pack(vbytes))
        self.parts.append(struct.pack(f"<{len(fields) + 2}H", vbytes, obj - end, *fields))
        self.size += vbytes
        self.vtables[key] = self.size
        return obj

    def finish_message(self, message_id: int, connection_id: str | None, command_type: int,
                       command: int) -> bytes:  # fmt: skip
        """The ``HttpMessage`` root (field order as flatc adds them) and ``Finish``."""
        conn = self.string(connection_id) if connection_id is not None else 0
        end = self.size
        slots = [0, 0, 0, 0]
        if conn:
            self.prep(4, 0)
            self.parts.append(_U32.pack(self.size - conn + 4))
            self.size += 4
            slots[3] = self.size
        self.prep(4, 0)
        self.parts.append(_U32.pack(self.size - command + 4))
        self.size += 4
        slots[2] = self.size
        if message_id:
            self.prep(4, 0)
            self.parts.append(_U32.pack(message_id))
            self.size += 4
            slots[0] = self.size
        if command_type:
            self.parts.append(bytes((command_type,)))
            self.size += 1
            slots[1] = self.size
        root = self.end_table(end, slots)
        self.prep(self.minalign, 4)
        self.prep(4, 0)
        self.parts.append(_U32.pack(self.size - root + 4))
        self.size += 4
        self.parts.reverse()
        return b"".join(self.parts)


#: column headers written so far, by column names: the head of the buffer (written
#: first, at offset 0, so its bytes depend on the names alone) and its end offset
_HEADS: dict[tuple[str, ...], tuple[bytes, int]] = {}
#: distinct column sets remembered; Cube sends a handful, so a full cache is cleared
MAX_CACHED_HEADS: Final = 256
#: the vtable of a one-field table whose field is present (a cell with text, a row):
#: ``end_table``'s key, the object's size with the soffset and the field
_ONE_FIELD: Final = (4, 8)
_FOUR: Final = _U32.pack(4)
#: a cell's soffset, field offset and text length; then the text, its NUL, the padding
_CELL: Final = struct.Struct("<iII")
_TAILS: Final = tuple(b"\x00" * (1 + pad) for pad in range(4))
#: its vtable and its soffset, as one part (parts are reversed once at the end)
_ONE_FIELD_VTABLE: Final = struct.pack("<3H", 6, 8, 4) + _I32.pack(6)
#: ``HttpMessage`` with all four fields, buffer order: the root offset, the vtable (its
#: size, the object's, message_id 8, command_type 7, command 12, connection_id 16), the
#: soffset, three pad bytes and command_type, message_id, the command and connection_id
#: offsets; then the connection id's length (its text, NUL and padding follow)
_MESSAGE_HEAD: Final = struct.Struct("<I6Hi3xBIIII")
#: ``HttpResultSet``'s vtable (columns 4, rows 8), soffset and two offsets
_RESULT_SET_TABLE: Final = struct.Struct("<4HiII")


class ResultSetWriter:
    """``HttpMessage{HttpResultSet}`` built a slice of rows at a time (:meth:`add`), then
    :meth:`finish`: the bytes of :func:`result_set_frame` for all the rows at once.

    A huge answer (a QUEUE LIST streamed from the store) is so encoded a slice per
    event-loop turn; one frame still carries it, as Cube Store sends it. Cells and rows
    (one-field tables) are written inline, with their shared vtable, instead of through
    the general table steps: they are nearly all of an answer's work."""

    __slots__ = ("_columns_vec", "_out", "_rows")

    def __init__(self, columns: Sequence[str]) -> None:
        out = self._out = _BackToFront()
        names = tuple(columns)
        head = _HEADS.get(names)
        if head is None:
            vec = out.offsets([out.string(c) for c in names])
            if len(_HEADS) >= MAX_CACHED_HEADS:
                _HEADS.clear()
            _HEADS[names] = (b"".join(reversed(out.parts)), vec)
        else:
            out.parts.append(head[0])
            out.size = vec = head[1]
            out.minalign = 4
        self._columns_vec = vec
        self._rows: list[int] = []

    def add(
        self,
        rows: Iterable[Sequence[Any]],
        types: Sequence[T] = (),
        convert: Callable[[Any, T], str | None] | None = None,
        other: T | None = None,
    ) -> None:
        """Write rows of cells: a str is the cell's text, None SQL NULL (an absent
        string); any other value is ``convert(value, type)``, its column's type from
        ``types`` (``other`` past them). Converting here, not in a pass before, spares
        a list per row and a second loop over the cells, most of them str already.

        A cell (or row) whose vtable is already written is one part, its bytes in
        buffer order: the parts are reversed once at the end, not the bytes in them."""
        ntypes = len(types)
        out = self._out
        parts = out.parts
        first = len(parts)
        append = parts.append
        vtables = out.vtables
        cell = _CELL.pack
        soffset = _I32.pack
        size = out.size
        one = vtables.get(_ONE_FIELD)
        row_offsets = self._rows
        for row in rows:
            cells: list[int] = []
            for text in row:
                if text is not None and text.__class__ is not str:  # exactly str: as it is
                    if convert is None:
                        raise TypeError(f"cell {text!r} is not text and no convert was given")
                    k = len(cells)
                    text = convert(text, types[k] if k < ntypes else other)  # type: ignore[arg-type]
                if text is None:  # a table without fields: ``table(())``
                    end = size
                    pad = -size & 3
                    size += pad + 4
                    key = (size - end,)
                    cells.append(size)
                    found = vtables.get(key)
                    if found is not None:
                        append(soffset(found - size) + _ZEROS[:pad])
                        continue
                    if pad:
                        append(_ZEROS[:pad])
                    out.size = size
                    _write_vtable(out, key)
                    size = out.size
                    continue
                # ``string`` then ``table((string,))``: soffset, field, length, text
                data = text.encode("utf-8")
                n = len(data)
                pad = -(size + n + 1) & 3
                size += pad + n + 13
                cells.append(size)
                if one is not None:
                    append(cell(one - size, 4, n) + data + _TAILS[pad])
                    continue
                append(_FOUR + _U32.pack(n) + data + _TAILS[pad])
                out.size = size
                _write_vtable(out, _ONE_FIELD)
                size = out.size
                one = vtables[_ONE_FIELD]
            # the cells' vector (``offsets``), then ``table((vector,))``
            n = len(cells)
            pad = -(size + 4 * n) & 3
            size += pad
            base = size + 4 * n
            vector = _vector(n).pack(n, *[base - 4 * i - off for i, off in enumerate(cells)])
            size += 4 * n + 12
            row_offsets.append(size)
            if one is not None:
                append(soffset(one - size) + _FOUR + vector + _ZEROS[:pad])
                continue
            append(_FOUR + vector + _ZEROS[:pad])
            out.size = size
            _write_vtable(out, _ONE_FIELD)
            size = out.size
            one = vtables[_ONE_FIELD]
        out.size = size
        # one part per call (parts are reversed once at the end): a slice's many small
        # parts would otherwise outweigh the frame itself
        chunk = b"".join(reversed(parts[first:]))
        del parts[first:]
        parts.append(chunk)

    def finish(self, message_id: int, connection_id: str | None) -> bytes:
        """The frame (the writer is spent)."""
        return b"".join(self.finish_parts(message_id, connection_id))

    def sliceable(self, message_id: int, connection_id: str | None) -> bool:
        """Whether :meth:`finish_parts` takes a vector built by :meth:`rows_vector` in
        slices: the common answer (a message id, a connection id, rows ending 4-aligned)."""
        return bool(message_id) and connection_id is not None and not self._out.size & 3

    def finish_parts(self, message_id: int, connection_id: str | None,
                     vector: list[bytes] | None = None) -> list[bytes]:  # fmt: skip
        """The frame as parts in buffer order (their join is :meth:`finish`'s bytes);
        ``vector``, when :meth:`sliceable`, is the rows' vector in slices."""
        out = self._out
        if self.sliceable(message_id, connection_id):
            assert connection_id is not None
            parts = out.parts
            parts.reverse()
            head = self._tail(message_id, connection_id)
            return [head, *(vector if vector is not None else [self.rows_vector()]), *parts]
        rows_vec = out.offsets(self._rows)
        table = out.table((self._columns_vec, rows_vec))
        return [out.finish_message(message_id, connection_id, _HTTP_RESULT_SET, table)]

    def rows_vector(self, start: int = 0, stop: int | None = None) -> bytes:
        """Entries ``start:stop`` of the rows' offset vector (its length first when
        ``start`` is 0), as :meth:`_BackToFront.offsets` writes it after the rows: a huge
        listing's vector is so built a slice per event-loop turn."""
        rows = self._rows
        n = len(rows)
        stop = n if stop is None else min(stop, n)
        base = self._out.size + 4 * n
        values = [base - 4 * i - rows[i] for i in range(start, stop)]
        if start:
            return struct.pack(f"<{len(values)}I", *values)
        if len(values) <= _MAX_CACHED_VECTOR:
            return _vector(len(values)).pack(n, *values)
        return struct.pack(f"<{len(values) + 1}I", n, *values)

    def _tail(self, message_id: int, connection_id: str) -> bytes:
        """What the common answer writes after the rows' vector, in buffer order: the
        ``HttpMessage`` root, vtable and table, the connection id, the result set's
        vtable and table. These are ``finish_message``'s steps with their offsets worked
        out once: every one but the ids follows from where the rows end."""
        end = self._out.size + 4 * len(self._rows) + 4  # the rows' vector written
        data = connection_id.encode("utf-8")
        m = len(data)
        pad = -(end + 21 + m) & 3
        conn = end + 25 + pad + m  # the connection id's offset
        message = _MESSAGE_HEAD.pack(16, 12, 20, 8, 7, 12, 16, 12, _HTTP_RESULT_SET,
                                     message_id, conn - end - 4, 4, m)  # fmt: skip
        table = _RESULT_SET_TABLE.pack(8, 12, 4, 8, 8, end + 8 - self._columns_vec, 4)
        return message + data + _TAILS[pad] + table


def _vector(n: int) -> struct.Struct:
    """The Struct of a vector of ``n`` offsets with its length (cached for short ones)."""
    vector = _VECTORS.get(n)
    if vector is None:
        vector = struct.Struct(f"<{n + 1}I")
        if n <= _MAX_CACHED_VECTOR:
            _VECTORS[n] = vector
    return vector


def _write_vtable(out: _BackToFront, key: tuple[int, ...]) -> None:
    """The first one-field or empty table of a buffer: its vtable, as ``end_table``
    writes it (``out.size`` is the object's offset, its soffset not yet written)."""
    if key == _ONE_FIELD:
        out.parts.append(_ONE_FIELD_VTABLE)
        out.size += 6
    else:
        out.parts.append(_I32.pack(4))
        out.parts.append(struct.pack("<2H", 4, key[0]))
        out.size += 4
    out.vtables[key] = out.size


def result_set_frame(message_id: int, connection_id: str | None, columns: Sequence[str],
                     rows: Sequence[Sequence[str | None]]) -> bytes:  # fmt: skip
    """``HttpMessage{HttpResultSet}``: every cell a string, NULL an absent string."""
    writer = ResultSetWriter(columns)
    writer.add(rows)
    return writer.finish(message_id, connection_id)


def error_frame(message_id: int, connection_id: str | None, text: str) -> bytes:
    """``HttpMessage{HttpError}``."""
    out = _BackToFront()
    table = out.table((out.string(text),))
    return out.finish_message(message_id, connection_id, _HTTP_ERROR, table)
