"""A minimal, blocking PostgreSQL v3 client over the standard library.

It exists so that ``cubequeue healthcheck`` and the pytest fixture's ``advance(ms)`` need
no driver: the Docker image ships only cubequeue's own dependencies, and a project using
the fixture may have no PostgreSQL driver at all. It speaks exactly what those two need
(PostgreSQL docs, "Frontend/Backend Protocol", §55.2): StartupMessage, the trust,
cleartext, MD5 and SCRAM-SHA-256 authentication exchanges, and simple Query with text
results. ``scramp`` is imported only when the server asks for SASL, to keep start-up fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["PgClient", "PgError", "QueryResult", "connect"]

_PROTOCOL_3_0 = 196608
_MAX_MESSAGE = 256 * 1024 * 1024
_AUTH_OK = 0
_AUTH_CLEARTEXT = 3
_AUTH_MD5 = 5
_AUTH_SASL = 10
_AUTH_SASL_CONTINUE = 11
_AUTH_SASL_FINAL = 12
_SCRAM = "SCRAM-SHA-256"


class _ScramClient(Protocol):
    """The part of ``scramp.ScramClient`` used here (scramp ships no type stubs)."""

    def get_client_first(self) -> str: ...
    def set_server_first(self, message: str) -> None: ...
    def get_client_final(self) -> str: ...
    def set_server_final(self, message: str) -> None: ...


class PgError(Exception):
    """The server answered ErrorResponse, or the conversation broke.

    ``sqlstate`` is the error's C field; ``08006`` (connection failure) is used for I/O
    errors and unexpected messages so callers can treat both alike.
    """

    def __init__(self, message: str, sqlstate: str = "08006", severity: str = "ERROR",
                 *, from_server: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.severity = severity
        #: True when the server sent this as an ErrorResponse
        self.from_server = from_server

    def __str__(self) -> str:
        if self.from_server:
            return f"{self.severity} {self.sqlstate}: {self.message}"
        return self.message


@dataclass(slots=True)
class QueryResult:
    """One statement's outcome: column names, text rows (None = NULL) and the tag."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    tag: str = ""


def _error_from_fields(body: bytes) -> PgError:
    fields: dict[str, str] = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return PgError(fields.get("M", "unknown error"), fields.get("C", "XX000"),
                   fields.get("V", fields.get("S", "ERROR")), from_server=True)


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


class PgClient:
    """One connection; use :func:`connect` to open it. Not thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = bytearray()
        #: time.monotonic() after which every read fails; None = only the socket timeout
        self.deadline: float | None = None
        self.parameters: dict[str, str] = {}
        self.backend_key: tuple[int, int] | None = None

    # --- framing -----------------------------------------------------------------------

    def _send(self, kind: bytes, body: bytes) -> None:
        try:
            self._sock.sendall(kind + struct.pack("!I", len(body) + 4) + body)
        except OSError as err:
            raise PgError(f"send failed: {err}") from None

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            if self.deadline is not None:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise PgError("timed out waiting for the server")
                self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(max(65536, n - len(self._buf)))
            except TimeoutError:
                raise PgError("timed out waiting for the server") from None
            except OSError as err:
                raise PgError(f"receive failed: {err}") from None
            if not chunk:
                raise PgError("server closed the connection")
            self._buf += chunk
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _receive(self) -> tuple[bytes, bytes]:
        header = self._read_exact(5)
        kind = header[:1]
        (length,) = struct.unpack("!I", header[1:])
        if length < 4 or length > _MAX_MESSAGE:
            raise PgError(f"bad message length {length} for {kind!r}")
        return kind, self._read_exact(length - 4)

    # --- startup -----------------------------------------------------------------------

    def _startup(self, user: str, password: str | None, database: str,
                 params: dict[str, str]) -> None:
        body = struct.pack("!I", _PROTOCOL_3_0)
        for key, value in {"user": user, "database": database, **params}.items():
            body += _cstr(key) + _cstr(value)
        body += b"\0"
        try:
            self._sock.sendall(struct.pack("!I", len(body) + 4) + body)
        except OSError as err:
            raise PgError(f"send failed: {err}") from None
        scram: _ScramClient | None = None
        while True:
            kind, body = self._receive()
            if kind == b"E":
                raise _error_from_fields(body)
            if kind == b"R":
                scram = self._authenticate(body, user, password, scram)
            elif kind == b"S":
                pname, pvalue, _ = body.split(b"\0", 2)
                self.parameters[pname.decode()] = pvalue.decode("utf-8", "replace")
            elif kind == b"K":
                self.backend_key = struct.unpack("!II", body[:8])
            elif kind == b"Z":
                return
            elif kind in (b"N", b"v"):  # NoticeResponse, NegotiateProtocolVersion
                continue
            else:
                raise PgError(f"unexpected message {kind!r} during startup")

    def _authenticate(self, body: bytes, user: str, password: str | None,
                      scram: _ScramClient | None) -> _ScramClient | None:
        (code,) = struct.unpack("!I", body[:4])
        if code == _AUTH_OK:
            return scram
        if password is None and code in (_AUTH_CLEARTEXT, _AUTH_MD5, _AUTH_SASL):
            raise PgError("the server asks for a password and none was given", "28P01",
                          "FATAL")
        if code == _AUTH_CLEARTEXT:
            self._send(b"p", _cstr(password or ""))
            return scram
        if code == _AUTH_MD5:
            salt = body[4:8]
            inner = hashlib.md5((password or "").encode() + user.encode()).hexdigest()
            outer = hashlib.md5(inner.encode() + salt).hexdigest()
            self._send(b"p", _cstr("md5" + outer))
            return scram
        if code == _AUTH_SASL:
            mechanisms = [m.decode() for m in body[4:].split(b"\0") if m]
            if _SCRAM not in mechanisms:
                raise PgError(f"no supported SASL mechanism in {mechanisms}")
            import scramp  # only SASL needs it

            client: _ScramClient = scramp.ScramClient([_SCRAM], user, password or "")
            first = client.get_client_first().encode()
            self._send(b"p", _cstr(_SCRAM) + struct.pack("!i", len(first)) + first)
            return client
        if code == _AUTH_SASL_CONTINUE and scram is not None:
            scram.set_server_first(body[4:].decode())
            final: str = scram.get_client_final()
            self._send(b"p", final.encode())
            return scram
        if code == _AUTH_SASL_FINAL and scram is not None:
            scram.set_server_final(body[4:].decode())
            return scram
        raise PgError(f"unsupported authentication request {code}")

    # --- queries -----------------------------------------------------------------------

    def query(self, sql: str) -> list[QueryResult]:
        """Run a simple Query; return each statement's result, or raise its error.

        Reads through ReadyForQuery even after an ErrorResponse so that the connection stays
        usable (PostgreSQL docs §55.2.2: the server always ends with ReadyForQuery).
        """
        self._send(b"Q", _cstr(sql))
        results: list[QueryResult] = []
        current = QueryResult()
        error: PgError | None = None
        while True:
            kind, body = self._receive()
            if kind == b"T":
                current = QueryResult(columns=self._row_description(body))
            elif kind == b"D":
                current.rows.append(self._data_row(body))
            elif kind == b"C":
                current.tag = body.rstrip(b"\0").decode("utf-8", "replace")
                results.append(current)
                current = QueryResult()
            elif kind == b"I":
                results.append(QueryResult())
            elif kind == b"E":
                error = _error_from_fields(body)
            elif kind == b"Z":
                if error is not None:
                    raise error
                return results
            elif kind in (b"N", b"S"):
                continue
            else:
                raise PgError(f"unexpected message {kind!r} during a query")

    @staticmethod
    def _row_description(body: bytes) -> list[str]:
        (count,) = struct.unpack("!H", body[:2])
        names: list[str] = []
        pos = 2
        for _ in range(count):
            end = body.index(b"\0", pos)
            names.append(body[pos:end].decode("utf-8", "replace"))
            pos = end + 1 + 18
        return names

    @staticmethod
    def _data_row(body: bytes) -> tuple[str | None, ...]:
        (count,) = struct.unpack("!H", body[:2])
        values: list[str | None] = []
        pos = 2
        for _ in range(count):
            (size,) = struct.unpack("!i", body[pos:pos + 4])
            pos += 4
            if size < 0:
                values.append(None)
            else:
                values.append(body[pos:pos + size].decode("utf-8", "replace"))
                pos += size
        return tuple(values)

    def close(self) -> None:
        """Send Terminate and close the socket; never raises."""
        with contextlib.suppress(OSError):
            self._sock.sendall(b"X\0\0\0\4")
        self._sock.close()

    def __enter__(self) -> PgClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(host: str, port: int, *, user: str = "cube", password: str | None = None,
            database: str = "cube", timeout: float = 3.0,
            application_name: str = "cubequeue-client",
            deadline: float | None = None,
            params: Mapping[str, str] | None = None) -> PgClient:
    """Open a connection; each socket operation times out after ``timeout`` s.

    ``params`` are extra StartupMessage parameters, e.g. ``{"process_id": "w1"}`` (dialect
    doc §8: the connection's process id).

    With ``deadline`` (a ``time.monotonic()`` value) the whole conversation, later queries
    included, must finish by then; the healthcheck uses it to bound its total time.
    """
    if deadline is not None:
        timeout = max(0.001, min(timeout, deadline - time.monotonic()))
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as err:
        raise PgError(f"cannot connect to {host}:{port}: {err.strerror or err}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = PgClient(sock)
    client.deadline = deadline
    try:
        client._startup(user, password, database,
                        {"application_name": application_name, **(params or {})})
    except BaseException:
        sock.close()
        raise
    return client
