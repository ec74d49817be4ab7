"""The frame codec: one group commit = one frame (sans-I/O: bytes in, events out).

Layout (little-endian, 8-byte aligned so that a length field never straddles a torn
sector, as etcd's WAL encoder aligns its records)::

    u32 payload length   (0 = end of written data: the preallocated zeros)
    u32 crc32            over bytes 8.. of the header and the payload
    u64 first lsn        must be the previous frame's last lsn + 1
    u32 record count
    u16 flags            (0; compression reserved)
    u16 reserved
    payload              JSON array of records (UTF-8, surrogatepass), zero-padded to 8

A length above :data:`MAX_FRAME_BYTES` or beyond the end of the file is corruption, never
an allocation. The payload is JSON from the standard library's C encoder: records hold only
integers, text, booleans and nulls, so msgpack's bytes type buys nothing, one C call
encodes a whole group, and the server gains no dependency.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cubequeue.storage.durable.records import Record

__all__ = [
    "ALIGN",
    "HEADER",
    "MAX_FRAME_BYTES",
    "BadFrame",
    "Frame",
    "decode_payload",
    "encode_frame",
    "encode_payload",
    "find_next_frame",
    "frames",
    "read_frame",
]

HEADER = struct.Struct("<IIQIHH")
ALIGN = 8
#: results can reach ≈ 20 MB; anything near this is a corrupt length, not a frame
MAX_FRAME_BYTES = 256 * 1024 * 1024
_PAD = b"\0" * ALIGN
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_loads = json.loads


@dataclass(frozen=True, slots=True)
class Frame:
    """A frame that validated: where it lies and which lsns it carries."""

    offset: int
    end: int
    first_lsn: int
    count: int
    payload: bytes

    @property
    def last_lsn(self) -> int:
        return self.first_lsn + self.count - 1


@dataclass(frozen=True, slots=True)
class BadFrame:
    """Bytes at ``offset`` that are not a whole valid frame, and why."""

    offset: int
    reason: str
    #: the bytes end before the frame does (or a zero-filled stretch cuts it): a torn write
    short: bool


def encode_frame(first_lsn: int, records: Sequence[Record]) -> bytes:
    """``records`` as one frame whose first record has ``first_lsn``."""
    payload = _dumps(records).encode("utf-8", "surrogatepass")
    return encode_payload(first_lsn, len(records), payload)


def encode_payload(first_lsn: int, count: int, payload: bytes) -> bytes:
    head = HEADER.pack(len(payload), 0, first_lsn, count, 0, 0)
    crc = zlib.crc32(payload, zlib.crc32(memoryview(head)[8:]))
    pad = -len(payload) % ALIGN
    return b"".join((HEADER.pack(len(payload), crc, first_lsn, count, 0, 0), payload, _PAD[:pad]))


def read_frame(buf: bytes | memoryview, offset: int, end: int) -> Frame | BadFrame | None:
    """The frame at ``offset`` (``None``: zeros, the end of written data)."""
    if offset + HEADER.size > end:
        if any(bytes(buf[offset:end])):
            return BadFrame(offset, "a frame header cut by the end of the file", True)
        return None
    length, crc, first_lsn, count, flags, _ = HEADER.unpack_from(buf, offset)
    if length == 0:
        if any(bytes(buf[offset:offset + HEADER.size])):
            return BadFrame(offset, "a zero length with a non-zero header", False)
        return None
    if length > MAX_FRAME_BYTES:
        return BadFrame(offset, f"a length of {length} bytes exceeds the frame limit", False)
    body_end = offset + HEADER.size + length
    if body_end > end:
        return BadFrame(offset, f"a frame of {length} bytes runs past the end of the file", True)
    view = memoryview(buf)
    actual = zlib.crc32(view[offset + HEADER.size:body_end], zlib.crc32(view[offset + 8:offset + HEADER.size]))
    if actual != crc:
        torn = _has_zero_sector(view[offset:body_end])
        return BadFrame(offset, f"checksum mismatch (stored {crc:08x}, computed {actual:08x})", torn)
    if count == 0 or flags != 0:
        return BadFrame(offset, f"a frame with {count} records and flags {flags}", False)
    frame_end = body_end + (-length % ALIGN)
    return Frame(offset, min(frame_end, end), first_lsn, count, bytes(view[offset + HEADER.size:body_end]))


def _has_zero_sector(view: memoryview) -> bool:
    """A 512-byte sector of zeros inside the frame: written partly, not corrupted
    (etcd's ``isTornEntry``)."""
    return any(not any(view[start:start + 512]) for start in range(0, len(view) - 511, 512))


def find_next_frame(buf: bytes | memoryview, offset: int, end: int, min_lsn: int) -> Frame | None:
    """The first valid frame after ``offset`` (8-byte steps) whose lsn is ≥ ``min_lsn``:
    where salvage resumes after corrupt bytes."""
    pos = offset + ALIGN - offset % ALIGN if offset % ALIGN else offset + ALIGN
    while pos + HEADER.size <= end:
        found = read_frame(buf, pos, end)
        if isinstance(found, Frame) and found.first_lsn >= min_lsn:
            return found
        pos += ALIGN
    return None


def decode_payload(frame: Frame) -> list[object]:
    """The frame's records as decoded JSON values (:func:`records.validate` checks each);
    raises ValueError when the payload is not a JSON array of ``count`` values."""
    values = _loads(frame.payload.decode("utf-8", "surrogatepass"))
    if not isinstance(values, list) or len(values) != frame.count:
        raise ValueError(f"the payload holds no array of {frame.count} records")
    return values


def frames(buf: bytes | memoryview, offset: int, end: int) -> Iterator[Frame | BadFrame]:
    """Every frame from ``offset`` until the zeros or the first bad frame (yielded last)."""
    while True:
        found = read_frame(buf, offset, end)
        if found is None:
            return
        yield found
        if isinstance(found, BadFrame):
            return
        offset = found.end
