"""PostgreSQL frontend messages built by hand, and backend messages read off a socket,
for tests that speak the wire below any driver (a message cut in two, a startup packet
of their own).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

__all__ = ["SYNC", "bind", "message", "parse", "query", "read_messages", "startup",
           "until_ready"]

#: protocol 3.0
PROTOCOL_VERSION = 196608


def startup(user: str = "cube") -> bytes:
    """A StartupMessage for ``user`` on the database ``cube``."""
    body = struct.pack("!i", PROTOCOL_VERSION) + f"user\0{user}\0database\0cube\0\0".encode()
    return struct.pack("!i", len(body) + 4) + body


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\0")


def parse(name: str, sql: str) -> bytes:
    return message(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))


def bind(portal: str, statement: str) -> bytes:
    return message(b"B", portal.encode() + b"\0" + statement.encode() + b"\0"
                   + struct.pack("!hhh", 0, 0, 0))


SYNC = message(b"S", b"")


def read_messages(sock: socket.socket) -> Iterator[tuple[bytes, bytes]]:
    """(type, body) of every backend message until the server closes."""
    buf = b""
    while True:
        while len(buf) >= 5:
            size = struct.unpack("!i", buf[1:5])[0]
            if len(buf) < size + 1:
                break
            yield buf[:1], buf[5:size + 1]
            buf = buf[size + 1:]
        data = sock.recv(1 << 16)
        if not data:
            return
        buf += data


def until_ready(messages: Iterator[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The messages up to and including ReadyForQuery."""
    got = []
    for kind, body in messages:
        got.append((kind, body))
        if kind == b"Z":
            return got
    raise AssertionError(f"closed before ReadyForQuery: {got}")
