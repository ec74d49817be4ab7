"""Server side of PostgreSQL authentication: trust, md5 and SCRAM-SHA-256.

``--auth`` picks the method (config.md); passwords come from ``--users-file`` or
``--password`` through :meth:`ServerContext.password_for`. The exchanges are PostgreSQL
15's ("Message Flow", "SASL Authentication"): md5 sends a 4-byte salt and expects
``"md5" + md5(md5(password + user) + salt)``; SCRAM-SHA-256 is delegated to ``scramp``
(postgres-wire.md §5), without channel binding.

An unknown user goes through the whole exchange and fails at its end with the same
28P01 message as a wrong password, as PostgreSQL does, so user names cannot be probed.
Each exchange is a small sans-I/O object: :meth:`start` gives the first request,
:meth:`step` consumes one ``p`` message and returns the message to send (if any) and
whether the client is now authenticated.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Protocol

import scramp

from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.codec import decode_sasl_initial_response
from cubequeue.storage.errors import InvalidPassword, ProtocolViolation

__all__ = ["AUTH_METHODS", "Exchange", "Md5Exchange", "ScramExchange", "make_exchange"]

AUTH_METHODS = ("trust", "md5", "scram-sha-256")
_SCRAM = "SCRAM-SHA-256"
_MECHANISM = scramp.ScramMechanism(_SCRAM)


def _failed(user: str) -> InvalidPassword:
    return InvalidPassword(f'password authentication failed for user "{user}"')


class Exchange(Protocol):
    def start(self) -> m.BackendMessage: ...

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        """(message to send or None, authenticated?). Raises 28P01 / 08P01."""
        ...


class Md5Exchange:
    def __init__(self, user: str, password: str | None) -> None:
        self.user = user
        self.password = password
        self.salt = secrets.token_bytes(4)

    def start(self) -> m.BackendMessage:
        return m.AuthenticationMD5Password(self.salt)

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        if not payload.endswith(b"\0"):
            raise ProtocolViolation("invalid password packet")
        answer = payload[:-1]
        if self.password is None:
            raise _failed(self.user)
        inner = hashlib.md5((self.password + self.user).encode()).hexdigest()
        expected = b"md5" + hashlib.md5(inner.encode() + self.salt).hexdigest().encode()
        if not hmac.compare_digest(answer, expected):
            raise _failed(self.user)
        return None, True


class ScramExchange:
    def __init__(self, user: str, password: str | None) -> None:
        self.user = user
        # An unknown user gets keys from a random password: the exchange runs to its end.
        self._known = password is not None
        secret = password if password is not None else secrets.token_hex(16)
        self._auth_info = _MECHANISM.make_auth_info(secret, iteration_count=4096)
        self._server = _MECHANISM.make_server(lambda _username: self._auth_info)
        self._stage = 0

    def start(self) -> m.BackendMessage:
        return m.AuthenticationSASL((_SCRAM,))

    def step(self, payload: bytes) -> tuple[m.BackendMessage | None, bool]:
        try:
            if self._stage == 0:
                initial = decode_sasl_initial_response(payload)
                if initial.mechanism != _SCRAM:
                    raise ProtocolViolation(
                        "client selected an invalid SASL authentication mechanism"
                    )
                if initial.data is None:
                    raise ProtocolViolation("malformed SCRAM message (no client-first-message)")
                self._server.set_client_first(initial.data.decode("utf-8"))
                self._stage = 1
                first = self._server.get_server_first().encode("utf-8")
                return m.AuthenticationSASLContinue(first), False
            if self._stage == 1:
                self._stage = 2
                self._server.set_client_final(payload.decode("utf-8"))
                if not self._known:
                    raise _failed(self.user)
                final = self._server.get_server_final().encode("utf-8")
                return m.AuthenticationSASLFinal(final), True
        except scramp.ScramException:
            raise _failed(self.user) from None
        except UnicodeDecodeError:
            raise ProtocolViolation("malformed SCRAM message") from None
        raise ProtocolViolation("unexpected SASL message after the exchange ended")


def make_exchange(method: str, user: str, password: str | None) -> Exchange | None:
    """The exchange for ``--auth method``; None for trust."""
    if method == "trust":
        return None
    if method == "md5":
        return Md5Exchange(user, password)
    if method == "scram-sha-256":
        return ScramExchange(user, password)
    raise ValueError(f"unknown --auth method {method!r}")
