"""A PostgreSQL-wire message left unfinished is not held forever (``--message-timeout``).

A real server and a bare socket show the close (FATAL 08P01, then EOF); the protocol
driven with a fake transport shows when the timer is armed: only when a read ends
inside a message, with a clock that restarts for each new message and while reading
is paused by the server itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
from typing import Any

from fake_transport import FakeTransport
from wire_messages import query, startup

from cubequeue.server.pgwire import connection
from cubequeue.server.pytest_plugin import start_cubequeue

WAIT_S = 60.0


def read_until(sock: socket.socket, kind: bytes) -> list[tuple[bytes, bytes]]:
    """Backend messages up to and including the first of type ``kind`` (or EOF)."""
    out: list[tuple[bytes, bytes]] = []
    buf = b""
    while True:
        while len(buf) >= 5 and len(buf) >= 1 + struct.unpack("!i", buf[1:5])[0]:
            size = struct.unpack("!i", buf[1:5])[0]
            out.append((buf[:1], buf[5 : 1 + size]))
            buf = buf[1 + size :]
            if out[-1][0] == kind:
                return out
        chunk = sock.recv(65536)
        if not chunk:
            out.append((b"", b""))
            return out
        buf += chunk


def test_an_unfinished_query_is_closed_with_08p01() -> None:
    srv = start_cubequeue("--message-timeout", "1")
    try:
        with socket.create_connection((srv.host, srv.port), timeout=WAIT_S) as sock:
            sock.sendall(startup())
            read_until(sock, b"Z")
            declared = 60 << 20  # a Query declaring 60 MiB, 1 MiB of it sent
            sock.sendall(b"Q" + struct.pack("!i", declared + 4) + b"x" * (1 << 20))
            answer = read_until(sock, b"")
        kinds = [kind for kind, _ in answer]
        assert kinds == [b"E", b""], answer
        fields = answer[0][1]
        assert b"C08P01" in fields and b"SFATAL" in fields
        assert b"--message-timeout" in fields
        assert "left unfinished" in srv.log()
    finally:
        srv.stop()


# --- the timer, driven by hand -----------------------------------------------------------


def _protocol() -> tuple[Any, FakeTransport]:
    from cubequeue.server.app import build_context
    from cubequeue.server.options import load_config

    ctx = build_context(dataclasses.replace(load_config([], {}), message_timeout=5))
    proto = connection.PgProtocol(ctx, None)
    transport = FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    proto.data_received(startup())
    return proto, transport


def test_whole_messages_arm_no_timer() -> None:
    async def main() -> None:
        proto, _transport = _protocol()
        for _ in range(3):
            proto.data_received(query("SELECT 1"))
        assert proto._message_timer is None and proto._partial_since is None
        proto.connection_lost(None)

    asyncio.run(main())


def test_the_clock_restarts_for_each_new_message() -> None:
    async def main() -> None:
        proto, transport = _protocol()
        loop = asyncio.get_running_loop()
        two = query("SELECT 1") + query("SELECT 2")
        proto.data_received(two[:5])  # a read ends inside the first message
        assert proto._message_timer is not None
        first = proto._partial_since
        proto._partial_since = first - 4.0  # as if 4 of its 5 s had passed
        proto.data_received(two[5:-3])  # completes it and ends inside the second
        assert proto._partial_since is not None and proto._partial_since >= first
        proto._message_deadline()  # early: re-armed for the second message's time
        assert not transport.closed and proto._message_timer is not None
        proto.data_received(two[-3:])
        assert proto._partial_since is None
        proto._message_deadline()  # nothing unfinished: nothing happens
        assert not transport.closed
        assert loop.is_running()
        proto.connection_lost(None)

    asyncio.run(main())


def test_a_paused_reader_does_not_count_against_the_client() -> None:
    async def main() -> None:
        proto, transport = _protocol()
        proto.data_received(query("SELECT 1")[:5])
        proto._partial_since -= 10.0  # well past the 5 s
        proto._reading_paused = True  # the server stopped reading, not the client
        proto._message_deadline()
        assert not transport.closed
        proto._reading_paused = False
        proto._partial_since -= 10.0
        proto._message_deadline()
        assert transport.closed
        assert b"08P01" in b"".join(transport.written)
        proto.connection_lost(None)

    asyncio.run(main())
