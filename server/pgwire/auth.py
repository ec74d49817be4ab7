"""Server side of PostgreSQL authentication: trust, md5 and SCRAM-SHA-256.

``--auth`` picks the method (the option table); passwords come from ``--users-file`` or
``--password`` through :meth:`ServerContext.password_for`. The exchanges are PostgreSQL
15's ("Message Flow", "SASL Authentication"): md5 sends a 4-byte salt and expects
``"md5" + md5(md5(password + user) + salt)``; SCRAM-SHA-256 follows RFC 5802/7677 without
channel binding, using ``scramp`` (PostgreSQL's protocol docs) only for SASLprep: scramp's server
refuses the empty SCRAM user name that libpq sends (see :class:`ScramExchange`).

An unknown user goes through the whole exchange and fails at its end with the same
28P01 message as a wrong password, as PostgreSQL does, so user names cannot be probed.
Each exchange is a small sans-I/O object: :meth:`start` gives the first request,
:meth:`step` consumes one ``p`` message and returns the message to send (if any) and
whether the client is now authenticated. A refused login is logged once, where it is
decided, with the user, the peer and the reason the client is not told
(:func:`cubequeue.server.logs.log_auth_failure`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import secrets
from typing import Protocol

from scramp.core import saslprep
from scramp.utils import ScramException

from cubequeue.server.errors import InvalidPassword, ProtocolViolation
from cubequeue.server.logs import log_auth_failure
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.decoder import decode_sasl_initial_response

__all__ = ["AUTH_METHODS", "Exchange", "Md5Exchange", "ScramExchange", "make_exchange"]

AUTH_METHODS = ("trust", "md5", "scram-sha-256")
_SCRAM = "SCRAM-SHA-256"
#: PostgreSQL's default ``scram_iterations``
SCRAM_ITERATIONS = 4096


#: the reasons a refused login is logged with (never sent to the client)
NO_SUCH_USER = "no password is set for this user"
WRONG_PASSWORD = "the password does not match"
BAD_PROOF = "the SCRAM exchange does not match (wrong nonce or channel binding)"


def _failed(method: str, user: str, peer: str | None, reason: str) -> InvalidPassword:
    log_auth_failure(user, peer, method, reason)
    return InvalidPassword(f'password authentication failed for user "{user}"')


class Exchange(Protocol):
    def start(self) -> m.BackendMessage: ...

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        """(message to send or None, authenticated?). Raises 28P01 / 08P01."""
        ...


class Md5Exchange:
    def __init__(self, user: str, password: str | None, peer: str | None = None) -> None:
        self.user = user
        self.password = password
        self.peer = peer
        self.salt = secrets.token_bytes(4)

    def start(self) -> m.BackendMessage:
        return m.AuthenticationMD5Password(self.salt)

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        if not payload.endswith(b"\0"):
            raise ProtocolViolation("invalid password packet")
        answer = payload[:-1]
        if self.password is None:
            raise _failed("md5", self.user, self.peer, NO_SUCH_USER)
        inner = hashlib.md5((self.password + self.user).encode()).hexdigest()
        expected = b"md5" + hashlib.md5(inner.encode() + self.salt).hexdigest().encode()
        if not hmac.compare_digest(answer, expected):
            raise _failed("md5", self.user, self.peer, WRONG_PASSWORD)
        return None, True


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ProtocolViolation("malformed SCRAM message")
        out.setdefault(name, value)
    return out


class ScramExchange:
    """SCRAM-SHA-256 (RFC 5802 / RFC 7677) without channel binding, as PostgreSQL runs it.

    The SCRAM user name is ignored (libpq sends an empty ``n=``; the startup packet names
    the user), which is why this is not ``scramp``'s server: it refuses empty attribute
    values. Passwords are SASLprep'd with scramp's ``saslprep``, as libpq does.
    """

    def __init__(self, user: str, password: str | None, peer: str | None = None) -> None:
        self.user = user
        self.peer = peer
        # An unknown user gets keys from a random password: the exchange runs to its end.
        self._known = password is not None
        secret = password if password is not None else secrets.token_hex(16)
        with contextlib.suppress(ScramException):  # libpq falls back to the raw bytes too
            secret = saslprep(secret)
        self._salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac("sha256", secret.encode(), self._salt, SCRAM_ITERATIONS)
        self._stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        self._server_key = _hmac(salted, b"Server Key")
        self._nonce = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._stage = 0

    def _failed(self, reason: str) -> InvalidPassword:
        return _failed("scram-sha-256", self.user, self.peer, reason)

    def start(self) -> m.BackendMessage:
        return m.AuthenticationSASL((_SCRAM,))

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        try:
            if self._stage == 0:
                self._stage = 1
                return self._client_first(payload), False
            if self._stage == 1:
                self._stage = 2
                return self._client_final(payload.decode("utf-8")), True
        except UnicodeDecodeError:
            raise ProtocolViolation("malformed SCRAM message") from None
        raise ProtocolViolation("unexpected SASL message after the exchange ended")

    def _client_first(self, payload: bytes) -> m.BackendMessage:
        initial = decode_sasl_initial_response(payload)
        if initial.mechanism != _SCRAM:
            raise ProtocolViolation("client selected an invalid SASL authentication mechanism")
        if initial.data is None:
            raise ProtocolViolation("malformed SCRAM message (no client-first-message)")
        first = initial.data.decode("utf-8")
        parts = first.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ProtocolViolation("malformed SCRAM message (channel binding is not supported)")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        client_nonce = _attributes(parts[2]).get("r")
        if not client_nonce:
            raise ProtocolViolation("malformed SCRAM message (no nonce)")
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self._salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={SCRAM_ITERATIONS}"
        return m.AuthenticationSASLContinue(self._server_first.encode())

    def _client_final(self, final: str) -> m.BackendMessage:
        without_proof, sep, proof_b64 = final.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attrs.get("c") != binding or attrs.get("r") != self._nonce:
            raise self._failed(BAD_PROOF)
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise self._failed(BAD_PROOF) from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._failed(BAD_PROOF)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        valid = hmac.compare_digest(hashlib.sha256(client_key).digest(), self._stored_key)
        if not self._known:
            raise self._failed(NO_SUCH_USER)
        if not valid:
            raise self._failed(WRONG_PASSWORD)
        server_signature = base64.b64encode(_hmac(self._server_key, auth_message)).decode()
        return m.AuthenticationSASLFinal(f"v={server_signature}".encode())


def make_exchange(method: str, user: str, password: str | None,
                  peer: str | None = None) -> Exchange | None:
    """The exchange for ``--auth method``; None for trust. ``peer`` (``host:port``) is
    only logged."""
    if method == "trust":
        return None
    if method == "md5":
        return Md5Exchange(user, password, peer)
    if method == "scram-sha-256":
        return ScramExchange(user, password, peer)
    raise ValueError(f"unknown --auth method {method!r}")
