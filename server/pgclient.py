"""Blocking PostgreSQL v3 clients over the standard library and cubequeue's client codec.

:class:`PgClient` exists so that ``cubequeue healthcheck`` and the pytest fixture's
``advance(ms)`` need no driver: the Docker image ships only cubequeue's own dependencies,
and a project using the fixture may have no PostgreSQL driver at all. It speaks exactly
what those two need (PostgreSQL docs, "Frontend/Backend Protocol", "Message Flow"):
StartupMessage, the trust, cleartext, MD5 and SCRAM-SHA-256 authentication exchanges, and
simple Query with text results. ``scramp`` is imported only when the server asks for
SASL, to keep start-up fast.

:class:`RawClient` sends and receives whole messages and nothing more, for tests that need
exact control. Both frame through :mod:`cubequeue.server.pgwire.client`, the one
client-side codec; this module only moves its bytes over a socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import (
    BackendDecoder,
    NotPostgresError,
    PgError,
    encode_frontend,
)

__all__ = ["NotPostgresError", "PgClient", "PgError", "QueryResult", "RawClient", "connect"]

_SCRAM = "SCRAM-SHA-256"


class _ScramClient(Protocol):
    """The part of ``scramp.ScramClient`` used here (scramp ships no type stubs)."""

    def get_client_first(self) -> str: ...
    def set_server_first(self, message: str) -> None: ...
    def get_client_final(self) -> str: ...
    def set_server_final(self, message: str) -> None: ...


@dataclass(slots=True)
class QueryResult:
    """One statement's outcome: column names, text rows (None = NULL) and the tag."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    tag: str = ""


def _cstr(value: str) -> bytes:
    return value.encode("utf-8") + b"\0"


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


_AUTH_TYPES = (
    m.AuthenticationOk, m.AuthenticationCleartextPassword, m.AuthenticationMD5Password,
    m.AuthenticationSASL, m.AuthenticationSASLContinue, m.AuthenticationSASLFinal,
)
_PASSWORD_REQUESTS = (
    m.AuthenticationCleartextPassword, m.AuthenticationMD5Password, m.AuthenticationSASL,
)


class PgClient:
    """One connection; use :func:`connect` to open it. Not thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        # a startup decoder: an HTTP server or any other foreign service on the port is
        # reported as such, not as a garbled PostgreSQL message
        self._decoder = BackendDecoder(startup=True)
        self._pending: deque[m.BackendMessage] = deque()
        #: time.monotonic() after which every read fails; None = only the socket timeout
        self.deadline: float | None = None
        self.parameters: dict[str, str] = {}
        self.backend_key: tuple[int, int] | None = None

    # --- moving bytes ------------------------------------------------------------------

    def _send(self, *msgs: m.FrontendMessage | m.SASLInitialResponse) -> None:
        try:
            self._sock.sendall(b"".join(encode_frontend(msg) for msg in msgs))
        except OSError as err:
            raise PgError(f"send failed: {err}") from None

    def _receive(self) -> m.BackendMessage:
        while not self._pending:
            if self.deadline is not None:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise PgError("timed out waiting for the server")
                self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise PgError("timed out waiting for the server") from None
            except OSError as err:
                raise PgError(f"receive failed: {err}") from None
            if not chunk:
                raise PgError("server closed the connection")
            self._pending.extend(self._decoder.feed(chunk))
        return self._pending.popleft()

    # --- startup -----------------------------------------------------------------------

    def _startup(self, user: str, password: str | None, database: str,
                 params: dict[str, str]) -> None:
        pairs = {"user": user, "database": database, **params}
        self._send(m.StartupMessage(m.PROTOCOL_3_0, tuple(pairs.items())))
        scram: _ScramClient | None = None
        while True:
            msg = self._receive()
            if isinstance(msg, m.ErrorResponse):
                raise PgError.from_response(msg)
            if isinstance(msg, m.ParameterStatus):
                self.parameters[msg.name] = msg.value
            elif isinstance(msg, m.BackendKeyData):
                self.backend_key = (msg.process_id, msg.secret_key)
            elif isinstance(msg, m.ReadyForQuery):
                return
            elif isinstance(msg, m.NoticeResponse | m.NegotiateProtocolVersion):
                continue
            elif isinstance(msg, _AUTH_TYPES):
                scram = self._authenticate(msg, user, password, scram)
            else:
                raise PgError(f"unexpected message {type(msg).__name__} during startup")

    def _authenticate(self, msg: m.BackendMessage, user: str, password: str | None,
                      scram: _ScramClient | None) -> _ScramClient | None:
        if isinstance(msg, m.AuthenticationOk):
            return scram
        if password is None and isinstance(msg, _PASSWORD_REQUESTS):
            raise PgError("the server asks for a password and none was given", "28P01",
                          "FATAL")
        if isinstance(msg, m.AuthenticationCleartextPassword):
            self._send(m.PasswordMessage(_cstr(password or "")))
            return scram
        if isinstance(msg, m.AuthenticationMD5Password):
            inner = hashlib.md5((password or "").encode() + user.encode()).hexdigest()
            outer = hashlib.md5(inner.encode() + msg.salt).hexdigest()
            self._send(m.PasswordMessage(_cstr("md5" + outer)))
            return scram
        if isinstance(msg, m.AuthenticationSASL):
            if _SCRAM not in msg.mechanisms:
                raise PgError(f"no supported SASL mechanism in {list(msg.mechanisms)}")
            import scramp  # only SASL needs it

            client: _ScramClient = scramp.ScramClient([_SCRAM], user, password or "")
            self._send(m.SASLInitialResponse(_SCRAM, client.get_client_first().encode()))
            return client
        if isinstance(msg, m.AuthenticationSASLContinue) and scram is not None:
            scram.set_server_first(msg.data.decode())
            final: str = scram.get_client_final()
            self._send(m.PasswordMessage(final.encode()))
            return scram
        if isinstance(msg, m.AuthenticationSASLFinal) and scram is not None:
            scram.set_server_final(msg.data.decode())
            return scram
        raise PgError(f"unexpected {type(msg).__name__} during authentication")

    # --- queries -----------------------------------------------------------------------

    def query(self, sql: str) -> list[QueryResult]:
        """Run a simple Query; return each statement's result, or raise its error.

        Reads through ReadyForQuery even after an ErrorResponse so that the connection stays
        usable (PostgreSQL docs, "Simple Query": the server always ends with ReadyForQuery).
        """
        self._send(m.Query(sql))
        results: list[QueryResult] = []
        current = QueryResult()
        error: PgError | None = None
        while True:
            msg = self._receive()
            if isinstance(msg, m.RowDescription):
                current = QueryResult(columns=[f.name for f in msg.fields])
            elif isinstance(msg, m.DataRow):
                current.rows.append(tuple(_text(value) for value in msg.values))
            elif isinstance(msg, m.CommandComplete):
                current.tag = msg.tag
                results.append(current)
                current = QueryResult()
            elif isinstance(msg, m.EmptyQueryResponse):
                results.append(QueryResult())
            elif isinstance(msg, m.ErrorResponse):
                error = PgError.from_response(msg)
            elif isinstance(msg, m.ReadyForQuery):
                if error is not None:
                    raise error
                return results
            elif isinstance(msg, m.NoticeResponse | m.ParameterStatus):
                continue
            else:
                raise PgError(f"unexpected message {type(msg).__name__} during a query")

    def close(self) -> None:
        """Send Terminate and close the socket; never raises."""
        with contextlib.suppress(OSError):
            self._sock.sendall(encode_frontend(m.Terminate()))
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

    ``params`` are extra StartupMessage parameters, e.g. ``{"process_id": "w1"}`` (the
    connection's process id, ``docs/dialect.md`` §8 rule 7).

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
    except NotPostgresError as err:
        sock.close()
        raise NotPostgresError(err.answer, f"{host}:{port}") from None
    except BaseException:
        sock.close()
        raise
    return client


class RawClient:
    """A blocking socket speaking raw messages, for tests that need exact control."""

    def __init__(self, host: str, port: int, *, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.decoder = BackendDecoder()
        self._ready: deque[m.BackendMessage] = deque()

    def send(self, *msgs: m.FrontendMessage | m.SASLInitialResponse) -> None:
        self.sock.sendall(b"".join(encode_frontend(msg) for msg in msgs))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_byte(self) -> bytes:
        """One unframed byte: the server's answer to an SSLRequest or GSSENCRequest."""
        return self.sock.recv(1)

    def receive(self) -> m.BackendMessage | None:
        """The next message; None when the server closed the connection."""
        while not self._ready:
            data = self.sock.recv(65536)
            if not data:
                return None
            self._ready.extend(self.decoder.feed(data))
        return self._ready.popleft()

    def until(self, kind: type, count: int = 1) -> list[m.BackendMessage]:
        """Every message up to and including the ``count``-th of type ``kind``."""
        out: list[m.BackendMessage] = []
        seen = 0
        while seen < count:
            msg = self.receive()
            if msg is None:
                raise ConnectionError(f"closed while waiting for {kind.__name__}: got {out!r}")
            out.append(msg)
            if isinstance(msg, kind):
                seen += 1
        return out

    def startup(self, user: str = "cube", **params: str) -> list[m.BackendMessage]:
        pairs = (("user", user), *params.items())
        self.send(m.StartupMessage(m.PROTOCOL_3_0, tuple(pairs)))
        return self.until(m.ReadyForQuery)

    def query(self, sql: str) -> list[m.BackendMessage]:
        self.send(m.Query(sql))
        return self.until(m.ReadyForQuery)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
