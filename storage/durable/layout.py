"""The data directory's files and their 64-byte headers.

::

    LOCK                    flock'd by the server that owns the directory
    snap-<lsn>.cqs          complete snapshots holding every record up to <lsn>
    log-<first lsn>.cql     log segments, preallocated and zero-filled
    quarantine/             bytes and records that failed validation, with reasons

No manifest: names carry the lsn (ZooKeeper ``snapshot.<zxid>``, etcd ``<seq>-<index>.wal``)
and a snapshot without its trailer does not exist. Each header names the directory's
UUID, so a file copied in from another data directory is refused, not replayed.
"""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from dataclasses import dataclass

__all__ = [
    "HEADER_BYTES",
    "LOG_MAGIC",
    "SNAP_MAGIC",
    "DamagedHeader",
    "FileHeader",
    "SegmentTail",
    "decode_header",
    "encode_header",
    "log_name",
    "parse_name",
    "snap_name",
]

LOG_MAGIC = b"CQLOG\0\0\0"
SNAP_MAGIC = b"CQSNAP\0\0"
#: 2: frames may carry marshal payloads (see :mod:`.frames`); 1 (JSON frames only) is
#: still read, and a server that knows only 1 refuses a version-2 file by this number
FORMAT_VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})
#: checksum algorithm ids: 1 = zlib.crc32 (room for CRC32C without a flag day)
CRC32_ZLIB = 1
HEADER_BYTES = 64
_HEAD = struct.Struct("<8sHHI16sQq")  # magic, version, checksum id, 0, uuid, lsn, created
_CRC = struct.Struct("<I")
_NAME = re.compile(r"(log|snap)-([0-9]{20})\.(cql|cqs)")


@dataclass(frozen=True, slots=True)
class FileHeader:
    magic: bytes
    directory: uuid.UUID
    #: a segment's first lsn, or the last lsn a snapshot holds
    lsn: int
    created_ms: int


class DamagedHeader(ValueError):
    """The header's own bytes are damaged (its checksum fails): what it held can be
    derived again (the lsn from the file name, the directory from ``DIRECTORY_ID``), so
    the frames after it are still read, each by its own checksum."""


@dataclass(frozen=True, slots=True)
class SegmentTail:
    """The last segment, where its written data ends: the log continues in it rather
    than in a new file, so restarts add no segments."""

    name: str
    first_lsn: int
    #: where the next frame goes
    offset: int
    #: the lsn the next frame must carry
    next_lsn: int


def encode_header(header: FileHeader) -> bytes:
    head = _HEAD.pack(header.magic, FORMAT_VERSION, CRC32_ZLIB, 0, header.directory.bytes,
                      header.lsn, header.created_ms)
    body = head + _CRC.pack(zlib.crc32(head))
    return body + b"\0" * (HEADER_BYTES - len(body))


def decode_header(data: bytes, magic: bytes, directory: uuid.UUID | None) -> FileHeader:
    """The header at the start of ``data``; ValueError naming what is wrong."""
    if len(data) < HEADER_BYTES:
        raise DamagedHeader("shorter than its header")
    (crc,) = _CRC.unpack_from(data, _HEAD.size)
    if zlib.crc32(data[: _HEAD.size]) != crc:
        raise DamagedHeader("header checksum mismatch")
    got_magic, version, algorithm, _, dir_bytes, lsn, created = _HEAD.unpack_from(data)
    if got_magic != magic:
        raise ValueError(f"magic {got_magic!r} is not {magic!r}")
    if version not in READABLE_VERSIONS or algorithm != CRC32_ZLIB:
        raise ValueError(f"format version {version} / checksum {algorithm} is not supported")
    found = uuid.UUID(bytes=dir_bytes)
    if directory is not None and found != directory:
        raise ValueError(f"belongs to data directory {found}, not {directory}")
    return FileHeader(got_magic, found, lsn, created)


def log_name(first_lsn: int) -> str:
    return f"log-{first_lsn:020d}.cql"


def snap_name(lsn: int) -> str:
    return f"snap-{lsn:020d}.cqs"


def parse_name(name: str) -> tuple[str, int] | None:
    """("log" | "snap", lsn) for a data file's name, else None."""
    match = _NAME.fullmatch(name)
    if match is None or (match[1] == "log") != (match[3] == "cql"):
        return None
    return match[1], int(match[2])
