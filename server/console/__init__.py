"""The read-only web console on the HTTP port: a page at ``/`` and JSON under ``/api/v1``.

:func:`build_console` wires it from a server's parts; the HTTP server routes to
:meth:`Console.respond` and starts and stops the depth sampler with itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cubequeue.server.console.auth import CHALLENGE, ConsoleAuth, console_auth_mode
from cubequeue.server.console.counters import read_counters
from cubequeue.server.console.ring import DepthRing
from cubequeue.server.console.routes import API_PREFIX, Console
from cubequeue.server.console.sampler import Sampler
from cubequeue.server.console.source import StoreReader
from cubequeue.server.stores import StoreSlot

if TYPE_CHECKING:
    from cubequeue.server.context import ServerContext

__all__ = [
    "API_PREFIX",
    "CHALLENGE",
    "Console",
    "ConsoleAuth",
    "DepthRing",
    "Sampler",
    "StoreReader",
    "build_console",
    "console_auth_mode",
]


def build_console(ctx: ServerContext, authorize: Callable[[str | None], bool]) -> Console:
    """The console of ``ctx``'s server (its sampler not yet started)."""
    registry = ctx.metrics.registry
    reader = StoreReader(ctx.store, ctx.clock)
    sampler = Sampler(reader, DepthRing(),
                      commands_total=lambda: read_counters(registry).commands_total)
    return Console(
        reader=reader,
        sampler=sampler,
        registry=registry,
        mode=console_auth_mode(ctx.config),
        authorize=authorize,
        started_at=ctx.started_at,
        version=ctx.version,
        # a durable store's recovery progress (the slot's), None for the others
        recovery=ctx.store.recovery_progress if isinstance(ctx.store, StoreSlot) else None,
    )
