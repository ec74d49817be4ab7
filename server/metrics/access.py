"""Who may scrape ``GET /metrics`` (``--metrics-auth``): anyone, loopback peers only, or
the PostgreSQL wire's users by HTTP Basic authentication."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cubequeue.server.config import Config

#: RFC 7617's challenge for a scraper without credentials
METRICS_CHALLENGE = 'Basic realm="cubequeue metrics", charset="UTF-8"'


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a scrape that may not see the metrics."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def metrics_auth_mode(config: Config) -> str:
    """``--metrics-auth`` when given, else ``basic`` when the PostgreSQL wire asks for
    passwords and ``none`` otherwise (as the console decides): prefix names and counts
    are not for anyone who can reach the HTTP port of a protected server."""
    if config.metrics_auth is not None:
        return config.metrics_auth
    return "none" if config.auth == "trust" else "basic"


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def scrape_refusal(mode: str, peer_host: str | None,
                   authorized: Callable[[], bool]) -> Refusal | None:
    """None when the scrape may proceed; else the 401 or 403 to answer.

    ``authorized`` checks the request's Basic credentials against the PostgreSQL wire's
    users; it is called only in ``basic`` mode."""
    if mode == "none":
        return None
    if mode == "loopback":
        if _is_loopback(peer_host):
            return None
        return Refusal(403, (("Content-Type", "text/plain; charset=utf-8"),),
                       b"metrics are served to loopback addresses only "
                       b"(--metrics-auth loopback)\n")
    if mode == "basic":
        if authorized():
            return None
        return Refusal(401, (("WWW-Authenticate", METRICS_CHALLENGE),
                             ("Content-Type", "text/plain; charset=utf-8")),
                       b"metrics need the user and password of the PostgreSQL wire "
                       b"(--metrics-auth basic)\n")
    raise ValueError(f"unknown --metrics-auth {mode!r}")
