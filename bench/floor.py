"""``python -m bench.floor --port N``: the floor of a Python PostgreSQL-wire server.

A bare uvloop protocol that answers ``SELECT 1`` and nothing else, each frontend message
with reply bytes built once at import: the least any Python asyncio server can spend on a
round trip (one ``data_received``, a walk over the read's messages, one
``transport.write``). ``make bench`` runs pgbench's ``SELECT 1`` against it beside
cubequeue and PostgreSQL and reports every round-trip figure as a ratio to it (issue 28).

It speaks enough of protocol 3.0 for pgbench (``-M simple|extended|prepared``), psql and
asyncpg (``execute``, ``fetchval``, ``prepare``): SSL and GSS requests are declined with
``N``; any user and database log in with AuthenticationOk, the ParameterStatus lines a
driver reads, BackendKeyData and ReadyForQuery. Query, Parse, Bind, Describe, Execute,
Sync, Flush, Close and Terminate are answered; a result is sent in text or binary, as the
Bind asked. Another statement, or any other message, is an ErrorResponse (0A000, or
08P01 for a message it does not take) so a benchmark can never measure a wrong answer;
in the extended protocol the messages after an error are skipped until Sync, as
PostgreSQL does. The reply for each message is one prebuilt ``bytes``; nothing is
cached per read or per connection, so the figure is a floor a general server can be
held to (cubequeue decodes, runs and encodes the same messages).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import struct
import sys
from typing import cast

__all__ = ["FloorProtocol", "main", "serve"]

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102
#: the spellings of ``SELECT 1`` looked up directly (a Query's or a Parse's text, NUL
#: included; pgbench sends its script's line with the newline); others go through
#: :func:`is_select_one`
SELECT_ONE = frozenset(f"{s}{end}\x00".encode() for s in ("SELECT 1", "select 1")
                       for end in ("", ";", "\n", ";\n"))  # fmt: skip
PARAMETERS = (
    ("server_version", "15.0"),
    ("server_encoding", "UTF8"),
    ("client_encoding", "UTF8"),
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("integer_datetimes", "on"),
    ("standard_conforming_strings", "on"),
    ("is_superuser", "off"),
    ("application_name", ""),
)


def message(tag: bytes, body: bytes) -> bytes:
    """One backend message: tag, length (itself included), body."""
    return tag + struct.pack("!I", len(body) + 4) + body


def error(code: str, text: str) -> bytes:
    fields = b"".join(k + v.encode() + b"\x00" for k, v in
                      ((b"S", "ERROR"), (b"V", "ERROR"), (b"C", code), (b"M", text)))  # fmt: skip
    return message(b"E", fields + b"\x00")


def _row_description(fmt: int) -> bytes:
    # one column "?column?": no table, int4 (OID 23, 4 bytes, typmod -1), format `fmt`
    return message(b"T", struct.pack("!H", 1) + b"?column?\x00"
                   + struct.pack("!IhIhih", 0, 0, 23, 4, -1, fmt))  # fmt: skip


READY = message(b"Z", b"I")
HELLO = b"".join((
    message(b"R", struct.pack("!I", 0)),
    *(message(b"S", f"{k}\x00{v}\x00".encode()) for k, v in PARAMETERS),
    message(b"K", struct.pack("!II", os.getpid() & 0x7FFFFFFF, 0x5EED)),
    READY,
))  # fmt: skip
ROW_DESCRIPTION = (_row_description(0), _row_description(1))
DATA_ROW = (message(b"D", struct.pack("!HI", 1, 1) + b"1"),
            message(b"D", struct.pack("!HIi", 1, 4, 1)))  # fmt: skip
SELECT_DONE = message(b"C", b"SELECT 1\x00")
SIMPLE_ANSWER = ROW_DESCRIPTION[0] + DATA_ROW[0] + SELECT_DONE + READY
EMPTY_QUERY = message(b"I", b"") + READY
PARSE_DONE = message(b"1", b"")
BIND_DONE = message(b"2", b"")
CLOSE_DONE = message(b"3", b"")
STATEMENT_DESCRIPTION = message(b"t", b"\x00\x00") + ROW_DESCRIPTION[0]
EXECUTED = (DATA_ROW[0] + SELECT_DONE, DATA_ROW[1] + SELECT_DONE)
ONLY_SELECT_ONE = error("0A000", "the floor server answers SELECT 1 only")
NOT_TAKEN = error("08P01", "the floor server does not take this message")


def is_select_one(text: bytes) -> bool:
    """``SELECT 1`` in any case, with blanks and one ``;`` around it (``text`` ends in NUL)."""
    return b" ".join(text[:-1].strip().removesuffix(b";").split()).lower() == b"select 1"


def result_format(bind: bytes) -> int:
    """The result format a Bind body asks for (0 text, 1 binary; one code or none)."""
    at = bind.index(b"\x00", bind.index(b"\x00") + 1) + 1  # past the portal and statement
    (formats,) = struct.unpack_from("!H", bind, at)
    at += 2 + 2 * formats
    (params,) = struct.unpack_from("!H", bind, at)
    at += 2
    for _ in range(params):
        (size,) = struct.unpack_from("!i", bind, at)
        at += 4 + max(size, 0)
    (results,) = struct.unpack_from("!H", bind, at)
    return struct.unpack_from("!h", bind, at + 2)[0] if results else 0


class FloorProtocol(asyncio.Protocol):
    """One connection: start-up, then the simple and extended query protocols."""

    __slots__ = ("buffer", "failed", "fmt", "started", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.started = False
        #: the last Bind's result format, read by Describe (portal) and Execute
        self.fmt = 0
        #: an extended-protocol error: skip to Sync
        self.failed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        buf = self.buffer + data if self.buffer else data
        if not self.started:
            buf = self._startup(buf)
            if not self.started:  # a start-up message still arriving, or declined
                self.buffer = buf
                return
        out: list[bytes] = []
        at, end = 0, len(buf)
        while end - at >= 5:
            stop = at + 1 + int.from_bytes(buf[at + 1 : at + 5], "big")
            if stop > end:
                break
            tag = buf[at]
            if self.failed and tag != 83:  # skipping to Sync after an error
                pass
            elif tag == 66:  # Bind
                self.fmt = result_format(buf[at + 5 : stop])
                out.append(BIND_DONE)
            elif tag == 69:  # Execute
                out.append(EXECUTED[self.fmt])
            elif tag == 83:  # Sync
                self.failed = False
                out.append(READY)
            elif tag == 68:  # Describe
                out.append(STATEMENT_DESCRIPTION if buf[at + 5] == 83 else ROW_DESCRIPTION[self.fmt])
            elif tag == 80:  # Parse: name, text, parameter types
                start = buf.index(b"\x00", at + 5) + 1
                text = buf[start : buf.index(b"\x00", start) + 1]
                if text in SELECT_ONE or is_select_one(text):
                    out.append(PARSE_DONE)
                else:
                    out.append(ONLY_SELECT_ONE)
                    self.failed = True
            elif tag == 81:  # Query
                text = buf[at + 5 : stop]
                if text in SELECT_ONE or is_select_one(text):
                    out.append(SIMPLE_ANSWER)
                else:
                    out.append(EMPTY_QUERY if not text.strip(b"\x00 \n\t;") else ONLY_SELECT_ONE + READY)
            elif tag == 72:  # Flush: everything is written at the end of the read anyway
                pass
            elif tag == 67:  # Close
                out.append(CLOSE_DONE)
            elif tag == 88:  # Terminate
                self._write(out)
                self.buffer = b""
                assert self.transport is not None
                self.transport.close()
                return
            else:
                out.append(NOT_TAKEN)
                self.failed = True
            at = stop
        self.buffer = buf[at:]
        self._write(out)

    def _write(self, out: list[bytes]) -> None:
        if out:
            assert self.transport is not None
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _startup(self, buf: bytes) -> bytes:
        """Answer the untagged start-up messages; what is left is the tagged stream."""
        assert self.transport is not None
        while len(buf) >= 8:
            size, code = struct.unpack_from("!II", buf)
            if len(buf) < size:
                break
            buf = buf[size:]
            if code in (SSL_REQUEST, GSS_REQUEST):
                self.transport.write(b"N")
            elif code == PROTOCOL_3:
                self.started = True
                self.transport.write(HELLO)
                return buf
            else:  # a cancel request (nothing runs long enough) or another protocol
                if code != CANCEL_REQUEST:
                    self.transport.write(error("0A000", f"protocol {code} is not taken"))
                self.transport.close()
                return b""
        return buf


async def serve(host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(FloorProtocol, host, port, reuse_address=True)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set_result, None)
    print(f"floor server listening on {host}:{port}", flush=True)
    async with server:
        await stop


def main(argv: list[str] | None = None) -> int:
    import uvloop

    ap = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(argv)
    uvloop.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
