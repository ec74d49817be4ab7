"""Startup and authentication: the StartupMessage, the ``--auth`` exchange
(:mod:`.auth`), and the greeting once it succeeds (PostgreSQL's protocol docs, "Start-up")."""

from __future__ import annotations

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.server.executor import Origin
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.auth import AUTH_METHODS, make_exchange
from cubequeue.server.pgwire.errors import InvalidAuthorizationSpecification
from cubequeue.server.pgwire.session_core import SessionCore
from cubequeue.server.pgwire.states import SessionState
from cubequeue.server.sql import PlainSession

__all__ = ["Startup"]


class Startup(SessionCore):
    """The STARTUP and AUTH states' actions."""

    def _startup(self, msg: m.StartupMessage) -> None:
        major, minor = msg.protocol >> 16, msg.protocol & 0xFFFF
        if major != 3:
            raise FeatureNotSupported(
                f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0"
            )
        params = dict(msg.parameters)
        unknown = tuple(k for k, _v in msg.parameters if k.startswith("_pq_."))
        if minor > 0 or unknown:
            self.send(m.NegotiateProtocolVersion(0, unknown))
        user = params.get("user")
        if not user:
            raise InvalidAuthorizationSpecification(
                "no PostgreSQL user name specified in startup packet"
            )
        self.user = user
        self.plain = PlainSession(
            server_version=self.ctx.server_version, user=user,
            # the server's default first, as postgresql.conf's: the client may override it
            startup_params={"statement_timeout": str(self.ctx.config.statement_timeout),
                            **params},
        )
        self.backend_key = self.hooks.admit(user)
        # the listener's hooks know the peer (and may know the connection id); tests'
        # hooks need not
        peer: str | None = getattr(self.hooks, "peer", None)
        self.origin = Origin("pg", getattr(self.hooks, "conn_id", None), peer, user)
        method = self.ctx.config.auth
        assert method in AUTH_METHODS, f"unchecked --auth {method}"
        self._exchange = make_exchange(method, user, self.ctx.password_for(user), peer=peer)
        if self._exchange is None:
            self._authenticated()
        else:
            self.state = SessionState.AUTH
            self.send(self._exchange.start())

    def _password(self, msg: m.PasswordMessage) -> None:
        assert self._exchange is not None
        reply, done = self._exchange.step(msg.payload)
        if reply is not None:
            self.send(reply)
        if done:
            self._authenticated()

    def _authenticated(self) -> None:
        assert self.plain is not None and self.backend_key is not None
        self._exchange = None
        self.send(m.AuthenticationOk())
        for name, value in self.plain.reported().items():
            self.send(m.ParameterStatus(name, value))
        self.send(m.BackendKeyData(*self.backend_key))
        self._tz = self.plain.zone
        self.state = SessionState.READY
        self._ready()
