"""What a web page may reach on the HTTP port: the ``Origin`` rule and the ``Host`` rule.

Browsers apply no CORS to WebSockets, so any page could open ``ws://127.0.0.1:3030/ws``
and run ``CACHE SET``; but a browser always sends ``Origin`` on a WebSocket upgrade, and
Cube's driver (Node's ``ws``) sends none. So an upgrade that carries an ``Origin`` not
listed in ``--ws-allowed-origins`` (exact origins, ``*`` for any; default: none) is
refused with 403 before it upgrades; an upgrade without ``Origin`` is served.

A DNS-rebinding page (``http://evil.example:3030`` whose name now points at 127.0.0.1)
reads the console as its own origin; the browser still sends ``Host: evil.example:3030``.
So the console and ``/metrics`` answer only a ``Host`` the server is reached by, as
Jupyter does: ``localhost``, any IP address (rebinding needs a name: a page
whose origin is an address is that address's own page, and Kubernetes probes and
Prometheus' pod discovery send the pod's address), the ``--host`` name, and the names in
``--allowed-hosts`` (``.example.com`` for it and its subdomains, ``*`` for any). Names
that no attacker's DNS can answer for a victim's browser are allowed too: a name of one
label (``cubequeue``, a compose service or a Kubernetes short service name, found only
through local search domains or hosts files) and names under the special-use domains
nobody can register publicly (:data:`PRIVATE_SUFFIXES`: ``.localhost``, ``.local``, which
holds Kubernetes' ``.svc.cluster.local``, ``.internal``, ``.home.arpa``), so a Prometheus
that scrapes by service name needs no option. The port is not compared. ``/healthz`` and ``/readyz`` show nothing a page could use and are
probed by orchestrators under any name, so they take any ``Host``; ``/ws`` has the
``Origin`` rule (Cube's driver sends ``Host`` as whatever name it was given).

This module reads only the standard library: :mod:`.options` uses its parsers.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from logging import Logger

__all__ = [
    "HostRule",
    "OriginRule",
    "RefusalLog",
    "normalize_hosts",
    "normalize_origins",
]

ANY = "*"
#: names that always mean this machine (an attacker cannot point them elsewhere)
LOOPBACK_NAMES = frozenset({"localhost"})
#: special-use domains (RFC 6761, RFC 6762, RFC 8375, ICANN's .internal) no public DNS
#: serves, so a rebinding page cannot have a name under them
PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")
#: the ports a browser leaves out of an ``Origin``
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ORIGIN = re.compile(r"([a-z][a-z0-9+.-]*)://(\[[0-9a-f:.]+\]|[^\s/:?#@\[\]]+)(?::([0-9]{1,5}))?/?")
#: a DNS name or an IPv4 address (labels of letters, digits, ``-`` and ``_``)
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_PORT = re.compile(r"[0-9]{1,5}")


# --- the option values ------------------------------------------------------------------


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def normalize_origins(text: str) -> str:
    """``--ws-allowed-origins``: comma-separated origins (``https://app.example.com``,
    ``http://localhost:4000``) or ``*``, lower-cased and without a default port, as a
    browser writes them; ValueError naming a value that is not an origin."""
    found: list[str] = []
    for word in _items(text):
        if word == ANY:
            return ANY
        if word.lower() == "null":
            raise ValueError("has 'null', the origin of sandboxed and file: pages, which "
                             "any site can produce")
        match = _ORIGIN.fullmatch(word.lower())
        if match is None:
            raise ValueError(f"has {word!r}, which is not an origin such as "
                             "https://app.example.com or http://localhost:4000")
        scheme, host, port = match.groups()
        if port is not None:
            number = int(port)
            if not 0 < number < 65536:
                raise ValueError(f"has {word!r}, whose port is not a port")
            if number != _DEFAULT_PORTS.get(scheme):
                host = f"{host}:{number}"
        found.append(f"{scheme}://{host}")
    if not found:
        raise ValueError("names no origin")
    return ",".join(dict.fromkeys(found))


def normalize_hosts(text: str) -> str:
    """``--allowed-hosts``: comma-separated host names (``cubequeue``, ``.example.com``
    for it and every subdomain) or ``*``, lower-cased, without ports; ValueError naming a
    value that is not a host name."""
    found: list[str] = []
    for word in _items(text):
        if word == ANY:
            return ANY
        name = word.lower().rstrip(".")
        bare = name[1:] if name.startswith(".") else name
        if _NAME.fullmatch(bare) is None:
            raise ValueError(f"has {word!r}, which is not a host name (give names without "
                             "ports; IP addresses are always allowed)")
        found.append(name)
    if not found:
        raise ValueError("names no host")
    return ",".join(dict.fromkeys(found))


# --- the rules ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OriginRule:
    """Which ``Origin`` may open ``/ws``: none listed (the default), some, or any."""

    origins: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def of(cls, option: str | None) -> OriginRule:
        """From ``--ws-allowed-origins`` as :func:`normalize_origins` left it."""
        if option is None:
            return cls()
        if option == ANY:
            return cls(any_origin=True)
        return cls(frozenset(option.split(",")))

    def allows(self, origin: str | None) -> bool:
        """No ``Origin`` (not a browser: Cube's driver) is allowed; a browser's only when
        listed."""
        if origin is None or self.any_origin:
            return True
        return origin.strip().lower() in self.origins


def host_name(header: str) -> str | None:
    """The name or address of a ``Host`` header without its port (``[::1]:3030`` →
    ``::1``), lower-cased, or None when it is not one."""
    value = header.strip().lower()
    if value.startswith("["):
        address, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:]))):
            return None
        try:
            return str(ipaddress.IPv6Address(address))
        except ValueError:
            return None
    name, sep, port = value.rpartition(":")
    if not sep:
        name = value
    elif _PORT.fullmatch(port) is None:
        return None
    name = name.rstrip(".")
    return name if _NAME.fullmatch(name) is not None else None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HostRule:
    """Which ``Host`` the console and ``/metrics`` answer (see the module docstring)."""

    names: frozenset[str] = LOOPBACK_NAMES
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    @classmethod
    def of(cls, option: str | None, listen: str) -> HostRule:
        """From ``--allowed-hosts`` (as :func:`normalize_hosts` left it) and ``--host``."""
        if option == ANY:
            return cls(any_host=True)
        listed = option.split(",") if option else []
        names = {*LOOPBACK_NAMES, *(n for n in listed if not n.startswith("."))}
        names.update(h.strip().lower().rstrip(".") for h in listen.split(",") if h.strip())
        return cls(frozenset(names), tuple(n for n in listed if n.startswith(".")))

    def allows(self, header: str | None) -> bool:
        if self.any_host:
            return True
        if header is None:
            return False  # HTTP/1.1 requires Host; every browser sends it
        name = host_name(header)
        if name is None:
            return False
        if name in self.names or _is_address(name) or _private_name(name):
            return True
        return any(name.endswith(s) or name == s[1:] for s in self.suffixes)


def _private_name(name: str) -> bool:
    """A name a rebinding page cannot have: one label, or under a special-use domain."""
    return "." not in name or name.endswith(PRIVATE_SUFFIXES)


# --- telling the operator -------------------------------------------------------------


class RefusalLog:
    """One WARNING per refusal, at most one per ``interval_s`` per kind; the next line
    says how many were not logged meanwhile (a page retrying cannot flood the log)."""

    def __init__(self, logger: Logger, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def refused(self, kind: str, message: str) -> None:
        now = self._clock()
        if now < self._next.get(kind, float("-inf")):
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        self._next[kind] = now + self._interval_s
        held = self._held.pop(kind, 0)
        more = f" ({held} more refused since the last such line)" if held else ""
        self._logger.warning("%s%s", message, more)
