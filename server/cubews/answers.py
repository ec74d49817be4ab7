"""The two answer frames (``HttpResultSet``, ``HttpError``) written without ``flatbuffers.Builder``.

Every statement over the WebSocket is answered with one of these, and the Python
runtime's Builder costs a few method calls and a bounds check per byte-sized step
(about half of a statement's server time for an empty ``QUEUE LIST``). This writer
follows the Builder's algorithm step for step (back to front, the same alignment
padding, the same vtable deduplication, the same ``Finish``), so the bytes are identical
to :func:`~.codec.encode`'s (``tests/server/cubews/test_ws_answers.py`` checks both against each
other and against Cube Store's golden dumps); it only keeps the chunks in a list and
joins them once, instead of moving a head through a growing bytearray.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from cubequeue.server.cubews.messages import CommandType

__all__ = ["error_frame", "result_set_frame"]

_U32: Final = struct.Struct("<I")
_I32: Final = struct.Struct("<i")
_ZEROS: Final = bytes(8)
_HTTP_ERROR: Final = int(CommandType.HTTP_ERROR)
_HTTP_RESULT_SET: Final = int(CommandType.HTTP_RESULT_SET)


class _Back:
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
        self.parts.append(struct.pack(f"<{n + 1}I", n, *values))
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


def result_set_frame(message_id: int, connection_id: str | None, columns: Sequence[str],
                     rows: Sequence[Sequence[str | None]]) -> bytes:  # fmt: skip
    """``HttpMessage{HttpResultSet}``: every cell a string, NULL an absent string."""
    out = _Back()
    string = out.string
    columns_vec = out.offsets([string(c) for c in columns])
    row_offsets = []
    for row in rows:
        cells = [out.table((string(text) if text is not None else 0,)) for text in row]
        row_offsets.append(out.table((out.offsets(cells),)))
    rows_vec = out.offsets(row_offsets)
    table = out.table((columns_vec, rows_vec))
    return out.finish_message(message_id, connection_id, _HTTP_RESULT_SET, table)


def error_frame(message_id: int, connection_id: str | None, text: str) -> bytes:
    """``HttpMessage{HttpError}``."""
    out = _Back()
    table = out.table((out.string(text),))
    return out.finish_message(message_id, connection_id, _HTTP_ERROR, table)
