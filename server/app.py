"""Assemble the server from its parts, serve both wires, and shut down gracefully.

The only place that reads the wall clock for the store (through an
:class:`AdjustableClock`, so ``--test-clock`` can move it) and that owns the process'
signals. Shutdown on SIGTERM/SIGINT: ``/readyz`` answers 503 at once, the PostgreSQL
listener stops accepting, every open connection is told to end (57P01 on the PostgreSQL
wire, blocked waiters included), and the process exits once they are gone. When
something has polled ``/readyz`` since start (a load balancer, an orchestrator's probe),
the HTTP listener stays up, ``/readyz`` answering 503, until ``--shutdown-grace`` has
passed, so the poller sees the drain instead of a refused connection; nobody watching,
nothing to wait for. A second signal ends the wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cubequeue.server import __version__
from cubequeue.server.config import Config
from cubequeue.server.context import ConnectionRegistry, ServerContext, load_users
from cubequeue.server.executor import Executor
from cubequeue.server.heap import process_heap_policy, run_heap_policy
from cubequeue.server.stores import StartupRefused, build_store, close_store, open_store
from cubequeue.storage.capabilities import capabilities_of
from cubequeue.storage.clock import AdjustableClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.stats import StoreStats

if TYPE_CHECKING:
    from cubequeue.storage.queue_log import Departure

__all__ = ["build_context", "open_doors", "run", "serve"]

_log = logging.getLogger("cubequeue.server")
#: the exit status when the store refuses to start (cli.py's usage status)
EXIT_REFUSED = 2
#: how long start-up waits for the store before listening anyway (then 57P03 meanwhile)
OPEN_BEFORE_LISTEN_S = 2.0
_queue_log = logging.getLogger("cubequeue.queue")


class _Closable(Protocol):
    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, as Redis does at start (each
    connection takes a descriptor, and a shell's default soft limit is often 1024):
    the limit before and after."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft, soft
    targets = [hard] if hard != resource.RLIM_INFINITY else []
    targets += [n for n in (_kernel_nr_open(), 1 << 20, 10_240) if n is not None]
    for target in targets:  # an unlimited hard limit still has the kernel's ceiling
        if soft != resource.RLIM_INFINITY and target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return soft, target
    return soft, soft


def _kernel_nr_open() -> int | None:
    try:
        with open("/proc/sys/fs/nr_open", encoding="ascii") as file:
            return int(file.read())
    except (OSError, ValueError):
        return None


def log_descriptor_room(config: Config, before: int, after: int) -> None:
    """Say at start how many connections the descriptors allow, both ports together
    (the accept loop keeps :func:`~.pgwire.acceptor.reserve` of them back)."""
    import resource

    from cubequeue.server.pgwire.acceptor import reserve

    if after == resource.RLIM_INFINITY:
        _log.info("file descriptors: no limit")
        return
    raised = f", raised from {before} to the hard limit" if after != before else ""
    used = _descriptors_in_use()
    room = after - used - reserve(after)
    _log.info("file descriptors allow %d connections on both ports (limit %d%s; %d in "
              "use, %d kept in reserve)", room, after, raised, used, reserve(after))
    wanted = config.max_connections + config.max_unauthenticated_connections
    if room < wanted:
        _log.warning("file descriptors allow only %d connections, fewer than "
                     "--max-connections (%d) plus --max-unauthenticated-connections (%d): "
                     "beyond them new connections wait; raise the hard limit (ulimit -Hn, "
                     "docker run --ulimit nofile=N)", room, config.max_connections,
                     config.max_unauthenticated_connections)


def _descriptors_in_use() -> int:
    try:
        return len(os.listdir(_FD_DIR)) - 1  # less the listing's own
    except OSError:
        probe = os.open(os.devnull, os.O_RDONLY)  # the lowest free number
        os.close(probe)
        return probe


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


#: a bulk removal of at most this many items names each one; a larger one is only its
#: summary line (the store writes it), so purging 10⁶ items is one line, not 10⁶
BULK_ITEM_LINES = 10


def _log_departure(departure: Departure) -> None:
    """Every departure but an ACK is worth a line: why an item left without a result."""
    if departure.reason != "acked" and departure.bulk <= BULK_ITEM_LINES:
        _queue_log.info(
            "queue item %d left the queue: %s (%s)", departure.id, departure.reason,
            departure.path, extra={"queue_id": departure.id, "reason": departure.reason},
        )


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name or a wildcard: reachable from elsewhere, say so


def open_doors(config: Config) -> list[str]:
    """One WARNING line for every listener that takes unauthenticated clients on an
    address other hosts can reach (the image's default is all of them)."""
    if _is_loopback(config.host):
        return []
    where = f"{config.host}"
    doors: list[str] = []
    if config.auth == "trust":
        doors.append(f"the PostgreSQL wire on {where}:{config.port} accepts every client "
                     "without a password (--auth trust)")
    if config.ws_auth == "none":
        limited = (f", limited to {config.ws_allow} (--ws-allow)"
                   if config.ws_allow else " from any network (see --ws-allow)")
        doors.append(f"/ws on {where}:{config.http_port} accepts every client without "
                     f"credentials (--ws-auth none){limited}")
    console = config.console_auth or ("basic" if config.auth != "trust" else "none")
    if console == "none":
        doors.append(f"the web console on {where}:{config.http_port} is open "
                     "(--console-auth none)")
    metrics = config.metrics_auth or ("basic" if config.auth != "trust" else "none")
    if metrics == "none":
        doors.append(f"/metrics on {where}:{config.http_port} is open (--metrics-auth none)")
    return doors


class _DescriptorAlarm:
    """Running out of file descriptors, logged at ERROR at most once a minute with a
    count. The PostgreSQL accept loop reports a shortage itself (:meth:`alarm`, and it
    waits); for the HTTP port asyncio reports a failed accept (EMFILE, ENFILE) to the
    loop's exception handler, retrying every second, while uvloop (libuv) reports nothing
    and drops the connection, so :meth:`watch` also compares the open descriptors with the
    limit once a second. Any other exception goes to asyncio's default handler."""

    INTERVAL_S = 60.0
    WATCH_S = 1.0
    #: descriptors kept free for the store, logs and the listeners' own work
    MARGIN = 4

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._last: float | None = None
        self._missed = 0

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)):
            loop.default_exception_handler(context)
            return
        self.alarm(exc.strerror or "too many open files")

    def alarm(self, reason: str) -> None:
        now = self._now()
        if self._last is not None and now - self._last < self.INTERVAL_S:
            self._missed += 1
            return
        more = f" ({self._missed} more since the last line)" if self._missed else ""
        _log.error("out of file descriptors: %s%s; new PostgreSQL connections wait in the "
                   "listen backlog (silent ones are closed first), HTTP ones are refused; "
                   "raise the limit (ulimit -n) or lower --max-connections and "
                   "--max-unauthenticated-connections", reason, more)
        self._last, self._missed = now, 0

    async def watch(self) -> None:
        """Where ``/proc/self/fd`` exists (Linux), check the count against the limit."""
        from cubequeue.server.pgwire.acceptor import descriptor_limit

        if not os.path.isdir(_FD_DIR):
            return
        while True:
            await asyncio.sleep(self.WATCH_S)
            soft = descriptor_limit()
            if soft is None:
                continue
            try:
                used = len(os.listdir(_FD_DIR))
            except OSError as exc:  # listing needs a descriptor of its own
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self.alarm(f"all {soft} descriptors in use")
                continue
            if used >= soft - self.MARGIN:
                self.alarm(f"{used} of {soft} descriptors in use")


_FD_DIR = "/proc/self/fd"


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
    store = build_store(config, clock=clock, limits=limits_from(config),
                        on_departure=_log_departure, wall_ms=_wall_clock_ms)
    metrics = Metrics(store, max_label_bytes=config.max_metrics_label_bytes)
    heap = process_heap_policy()
    executor = Executor(
        store,
        max_blocking_timeout_ms=config.max_blocking_timeout,
        slow_command_ms=config.slow_command_ms,
        max_sql_statement_bytes=config.max_sql_statement_bytes,
        max_sql_rows=config.max_sql_rows,
        observe=metrics.observe_command,
        on_stream=heap.after_stream,
    )
    connections = ConnectionRegistry(
        max_connections=config.max_connections,
        max_per_user=config.max_connections_per_user,
        max_unauthenticated=config.max_unauthenticated_connections,
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
        heap=heap,
    )


async def serve(config: Config, *, on_ready: Callable[[ServerContext], None] | None = None) -> None:
    from cubequeue.server.http import start_http_server
    from cubequeue.server.pgwire.listener import start_pg_server

    limits = raise_descriptor_limit()
    ctx = build_context(config)
    loop = asyncio.get_running_loop()
    descriptors = _DescriptorAlarm(loop.time)
    loop.set_exception_handler(descriptors.handle)
    watcher = loop.create_task(descriptors.watch())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before listening: a client may signal at once
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    # Recovery or the first connection to PostgreSQL: a quick one finishes before the
    # listeners bind, so no client ever sees the store starting; a slow one goes on while
    # both ports answer (commands 57P03, /readyz 503) until the store is attached.
    opening = loop.create_task(open_store(ctx.store))
    stopped = loop.create_task(stop.wait())
    await asyncio.wait({opening, stopped}, timeout=OPEN_BEFORE_LISTEN_S,
                       return_when=asyncio.FIRST_COMPLETED)
    if opening.done() and opening.exception() is not None:
        stopped.cancel()
        watcher.cancel()
        opening.result()  # StartupRefused: one line and exit 2 (run), nothing was bound
    pg_server = await start_pg_server(ctx, on_shortage=descriptors.alarm)
    try:
        http_server = await start_http_server(ctx)
    except BaseException:
        pg_server.close()
        raise
    log_descriptor_room(config, *limits)
    for warning in open_doors(config):
        _log.warning("%s", warning)
    if not opening.done():
        _log.info("listening while the %s store starts (57P03 until it is ready)", ctx.store.kind)
        await asyncio.wait({opening, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not opening.done() or opening.exception() is not None:
        opening.cancel()
        watcher.cancel()
        await _shutdown(ctx, pg_server, http_server, None)
        if opening.done() and not opening.cancelled():
            opening.result()  # raises StartupRefused: one line and exit 2 (run)
        return
    # Everything built so far lives as long as the process: keep it out of the cyclic
    # collector's generations so each collection walks only what commands allocate.
    gc.collect()
    gc.freeze()
    heap_task = loop.create_task(run_heap_policy(_row_counter(ctx), ctx.heap))
    unix = f" and {pg_server.unix_path}" if pg_server.unix_path else ""
    _log.info(
        "cubequeue %s listening: postgres on %s:%d%s, http/ws on %s:%d%s",
        ctx.version, config.host, config.port, unix, config.host, config.http_port,
        " (test clock enabled)" if config.test_clock else "",
    )
    if on_ready is not None:
        on_ready(ctx)

    try:
        await stop.wait()
        stop.clear()  # a second signal cuts the grace period short
    finally:
        watcher.cancel()
        heap_task.cancel()
        await _shutdown(ctx, pg_server, http_server, stop)


def _row_counter(ctx: ServerContext) -> Callable[[], int | None]:
    """What the heap policy ticks over, chosen once the store is attached: a store that
    reaches its rows through a database pool (``ReportsPoolHealth``: the PostgreSQL
    store) keeps none in this process (None)."""
    if capabilities_of(ctx.store).pool_health is not None:
        return lambda: None
    return lambda: _store_rows(ctx)


def _store_rows(ctx: ServerContext) -> int | None:
    """Rows the store keeps in this process (items, results, cache keys), for the heap
    policy; None while the store cannot say (starting up, failed)."""
    try:
        stats = ctx.store.stats()
    except Exception:  # still recovering (57P03), or a store that failed: skip the tick
        return None
    if not isinstance(stats, StoreStats):
        return None
    return stats.items_total + stats.results_total + stats.cache_keys


async def _shutdown(
    ctx: ServerContext, pg_server: _Closable, http_server: _Closable,
    again: asyncio.Event | None = None,
) -> None:
    grace = ctx.config.shutdown_grace
    _log.info("shutting down (grace %d s, /readyz answers 503 until then)", grace)
    ctx.shutting_down = True
    pg_server.close()
    ctx.connections.shutdown_all()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while len(ctx.connections) and loop.time() < deadline:
        if again is not None and again.is_set():
            break
        await asyncio.sleep(0.05)
    if len(ctx.connections):
        _log.warning("%d connection(s) still open after the grace period", len(ctx.connections))
    remaining = deadline - loop.time()
    if again is not None and remaining > 0 and ctx.readiness_watched:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(again.wait(), remaining)
    try:
        await close_store(ctx.store)
    except Exception:  # the process ends anyway; say what was not closed cleanly
        _log.exception("closing the store failed")
    http_server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(http_server.wait_closed(), 2)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(pg_server.wait_closed(), 2)
    _log.info("stopped")


def run(config: Config) -> None:
    """Serve until SIGTERM/SIGINT, on uvloop where it is installed."""
    try:
        try:
            import uvloop
        except ImportError:  # uvloop is not built for every platform
            asyncio.run(serve(config))
        else:
            uvloop.run(serve(config))
    except StartupRefused as err:
        print(f"cubequeue: {err}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED) from None
