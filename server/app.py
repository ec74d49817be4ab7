"""Assemble the server from its parts, serve both wires, and shut down gracefully.

The only place that reads the wall clock for the store (through an
:class:`AdjustableClock`, so ``--test-clock`` can move it) and that owns the process'
signals. Shutdown on SIGTERM/SIGINT: ``/readyz`` answers 503 at once, the PostgreSQL
listener stops accepting, every open connection is told to end (57P01 on the PostgreSQL
wire, blocked waiters included), and the process exits once they are gone or
``--shutdown-grace`` has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cubequeue.server import __version__
from cubequeue.server.config import Config
from cubequeue.server.context import ConnectionRegistry, ServerContext, load_users
from cubequeue.server.executor import Executor
from cubequeue.storage.clock import AdjustableClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import Store

if TYPE_CHECKING:
    from cubequeue.storage.queue_log import Departure

__all__ = ["build_context", "run", "serve"]

_log = logging.getLogger("cubequeue.server")
_queue_log = logging.getLogger("cubequeue.queue")


class _Closable(Protocol):
    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _log_departure(departure: Departure) -> None:
    """Every departure but an ACK is worth a line: why an item left without a result."""
    if departure.reason != "acked":
        _queue_log.info(
            "queue item %d left the queue: %s (%s)", departure.id, departure.reason,
            departure.path, extra={"queue_id": departure.id, "reason": departure.reason},
        )


def limits_from(config: Config) -> Limits:
    return Limits(
        results_expire_ms=config.results_expire * 1000,
        cache_max_entry_bytes=config.cache_max_entry_bytes,
        cache_max_keys=config.cache_max_keys,
        cache_max_bytes=config.cache_max_bytes,
        max_items=config.max_items,
        max_payload_bytes=config.max_payload_bytes,
        queue_log_size=config.queue_log_size,
        clock_control=config.test_clock,
    )


def build_context(config: Config) -> ServerContext:
    from cubequeue.server.metrics import Metrics

    clock = AdjustableClock(_wall_clock_ms)
    store = Store(clock, limits_from(config), on_departure=_log_departure)
    metrics = Metrics(store)
    executor = Executor(
        store,
        max_blocking_timeout_ms=config.max_blocking_timeout,
        slow_command_ms=config.slow_command_ms,
        observe=metrics.observe_command,
    )
    connections = ConnectionRegistry(
        max_connections=config.max_connections,
        max_per_user=config.max_connections_per_user,
        metrics=metrics,
    )
    return ServerContext(
        config=config,
        store=store,
        clock=clock,
        executor=executor,
        metrics=metrics,
        connections=connections,
        users=load_users(config),
        version=__version__,
    )


async def serve(config: Config, *, on_ready: Callable[[ServerContext], None] | None = None) -> None:
    from cubequeue.server.http import start_http_server
    from cubequeue.server.pgwire.listener import start_pg_server

    ctx = build_context(config)
    pg_server = await start_pg_server(ctx)
    http_server = await start_http_server(ctx)
    # Everything built so far lives as long as the process: keep it out of the cyclic
    # collector's generations so each collection walks only what commands allocate.
    gc.collect()
    gc.freeze()
    _log.info(
        "cubequeue %s listening: postgres on %s:%d, http/ws on %s:%d%s",
        ctx.version, config.host, config.port, config.host, config.http_port,
        " (test clock enabled)" if config.test_clock else "",
    )
    if on_ready is not None:
        on_ready(ctx)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await _shutdown(ctx, pg_server, http_server)


async def _shutdown(
    ctx: ServerContext, pg_server: asyncio.AbstractServer, http_server: _Closable
) -> None:
    _log.info("shutting down (grace %d s)", ctx.config.shutdown_grace)
    ctx.shutting_down = True
    pg_server.close()
    ctx.connections.shutdown_all()
    deadline = time.monotonic() + ctx.config.shutdown_grace
    while len(ctx.connections) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if len(ctx.connections):
        _log.warning("%d connection(s) still open after the grace period", len(ctx.connections))
    http_server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(http_server.wait_closed(), 2)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(pg_server.wait_closed(), 2)
    _log.info("stopped")


def run(config: Config) -> None:
    """Serve until SIGTERM/SIGINT, on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:  # uvloop is not built for every platform
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
