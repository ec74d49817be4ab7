"""Who may open the console: ``--console-auth none|basic|off``.

The console shows payloads, so it is not open merely because the WebSocket is (Cube's
driver needs an open ``/ws``): unset, the mode is ``basic`` whenever the PostgreSQL wire
asks for passwords (``--auth`` is not ``trust``) and ``none`` otherwise. ``basic`` checks
the PostgreSQL wire's users; a refusal is a 401 carrying ``WWW-Authenticate: Basic``
(RFC 7617), which is what makes a browser ask for the user and password.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cubequeue.server.config import Config

__all__ = ["CHALLENGE", "ConsoleAuth", "console_auth_mode"]

ConsoleAuth = Literal["none", "basic", "off"]

#: RFC 7617's challenge; ``charset`` tells the browser to send the credentials as UTF-8
CHALLENGE = 'Basic realm="cubequeue console", charset="UTF-8"'


def console_auth_mode(config: Config) -> ConsoleAuth:
    """The effective mode: the option when given, else what ``--auth`` implies."""
    mode = config.console_auth
    if mode is None:
        return "none" if config.auth == "trust" else "basic"
    if mode == "none":
        return "none"
    if mode == "basic":
        return "basic"
    if mode == "off":
        return "off"
    raise ValueError(f"unknown --console-auth {mode!r}")
