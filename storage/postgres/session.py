"""The front end's one session connection: LISTEN for ACK events and the housekeeping lock.

* **Listening.** One connection (``--store-session-dsn`` or the store's DSN; it must be a
  direct connection, not a transaction pooler) LISTENs on ``cq_ack`` (RESULT_BLOCKING
  wake-ups) and ``cq_clock`` (another front end moved the test clock). At start a
  self-probe notifies a random channel and waits for it; no delivery (a transaction
  pooler, a replica) switches the front end to **polling** the ack markers. The listener
  never opens a transaction, so it never holds back the notification queue.
* **Re-checks.** After a reconnect, every poll interval in polling mode and every
  ``recheck_s`` otherwise, the waiters' ack markers are read: a notification lost while
  the session was down costs latency, never a wrong answer.
* **Liveness.** Every ``housekeeping_s`` the session asks its server
  ``pg_is_in_recovery()`` under the URL's ``silence_timeout``: no answer (a frozen or
  partitioned host, which closes nothing) or a server that became a standby while
  ``target_session_attrs`` asks for a writable one makes the session reconnect, through
  the same per-host connect as the pool (:func:`.hosts.connect`).
* **Leadership.** Every ``housekeeping_s`` the session tries ``pg_try_advisory_lock``;
  the holder (released when its session dies, so any front end may die at any time) runs
  the expiry sweep, result and marker cleanup, log trimming and cache eviction through
  the command pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta

import asyncpg

from cubequeue.grammar.errors import QueueError
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.database import Database, open_url
from cubequeue.storage.postgres.errors import (
    RETRY_HINT,
    StatementInDoubt,
    StoreRefused,
    StoreUnavailable,
    is_permanent,
    refusal,
)
from cubequeue.storage.postgres.hosts import connect
from cubequeue.storage.postgres.waiters import AckEvent, WaiterHub

__all__ = ["LEADER_LOCK", "Session"]

_log = logging.getLogger("cubequeue.store.postgres")

#: the session advisory lock the housekeeping leader holds
LEADER_LOCK = 0x6375_6265_7175_0002
_PROBE_TIMEOUT_S = 2.0
#: the longest a statement waits for a session that is reconnecting
_READY_TIMEOUT_S = 10.0
_SWEEP_BATCH = 1000
#: ack markers older than this (real time) are removed: far beyond any blocking wait
_MARKER_AGE = timedelta(minutes=15)
_MARKERS = """
select m.id, m.has_result, m.path::text, m.seq from cq_ack_marker m
where m.seq > $1 and (m.id = any($2::bigint[]) or m.path = any($3::text[])) order by m.seq
"""


class Session:
    def __init__(
        self,
        dsn: str,
        db: Database,
        hub: WaiterHub,
        limits: Limits,
        *,
        on_event: Callable[[AckEvent], None],
        on_clock: Callable[[], Coroutine[object, object, None]],
        poll_s: float = 0.2,
        recheck_s: float = 5.0,
        housekeeping_s: float = 1.0,
        housekeeping: bool = True,
        listen: bool = True,
    ) -> None:
        self._url = open_url(dsn)
        self._db = db
        self._hub = hub
        self._limits = limits
        self._on_event = on_event
        self._on_clock = on_clock
        self._poll_s = poll_s
        self._recheck_s = recheck_s
        self._housekeeping_s = housekeeping_s
        self._housekeeping = housekeeping
        #: False: never LISTEN for ACKs, poll the markers (what the probe falls back to)
        self._listen = listen
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._up = asyncio.Event()
        self._lost = asyncio.Event()
        self._closing = False
        #: True when LISTEN was found not to deliver: waiters are polled
        self.polling = False
        self.leader = False
        self._led = False
        #: bumped at each (re)connect of the session
        self.generation = 0
        #: why the last reconnect failed, while the session is down (None when up)
        self.unreachable: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (57P03 if the database is away, :class:`StoreRefused` if it never
        will be) and start the loop."""
        try:
            await self._connect()
        except (StoreUnavailable, StoreRefused):
            await self._drop()
            raise
        except Exception as exc:
            await self._drop()
            if is_permanent(exc):
                raise refusal(self._url.dsn, exc) from exc
            raise StoreUnavailable(
                f"the queue database cannot be reached: {_describe(exc)}", hint=RETRY_HINT
            ) from exc
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._drop()

    async def ready(self, timeout: float | None = None) -> int:
        """Wait until the session listens (or polls); its generation, or 57P03: at once
        while its database cannot be reached, else after ``timeout`` seconds (at most
        10 s; a statement passes its own deadline)."""
        if not self._up.is_set():
            if self.unreachable is not None:
                raise StoreUnavailable(
                    f"the queue database cannot be reached: {_describe(self.unreachable)}",
                    hint=RETRY_HINT)
            budget = _READY_TIMEOUT_S if timeout is None else min(timeout, _READY_TIMEOUT_S)
            try:
                await asyncio.wait_for(self._up.wait(), budget)
            except TimeoutError:
                raise StoreUnavailable(
                    "the queue database's notification session is down; reconnecting",
                    hint=RETRY_HINT) from None
        return self.generation

    @property
    def listening(self) -> bool:
        return self._up.is_set()

    # -- connection -----------------------------------------------------------------------

    async def _connect(self) -> None:
        conn = await connect(self._url, statement_cache_size=0)
        try:
            conn.add_termination_listener(self._terminated)
            if self._listen:
                await conn.add_listener("cq_ack", self._notified)
            await conn.add_listener("cq_clock", self._clock_notified)
            self._conn = conn
            self.polling = not self._listen or not await self._probe(conn)
        except BaseException:
            self._conn = None
            conn.terminate()
            raise
        if self.polling and self._listen:
            _log.warning("LISTEN/NOTIFY does not reach this front end (a transaction pooler?): "
                         "RESULT_BLOCKING polls the ack markers every %.0f ms", self._poll_s * 1000)
        self.leader = False
        self.generation += 1
        self._lost.clear()
        self.unreachable = None
        self._db.reached()
        self._up.set()

    async def _probe(self, conn: asyncpg.Connection) -> bool:
        """LISTEN on a random channel, NOTIFY it through the command pool, wait for it."""
        channel = f"cq_probe_{secrets.token_hex(8)}"
        got = asyncio.get_running_loop().create_future()

        def heard(*_: object) -> None:
            if not got.done():
                got.set_result(True)

        await conn.add_listener(channel, heard)
        try:
            await self._db.fetch("probe", "select pg_notify($1, 'probe')", channel)
            await asyncio.wait_for(got, _PROBE_TIMEOUT_S)
            return True
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(Exception):
                await conn.remove_listener(channel, heard)

    def _terminated(self, conn: object) -> None:
        if conn is self._conn:  # not the old connection's late callback after a reconnect
            self._up.clear()
            self._lost.set()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._up.clear()
        self.leader = False
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)
            conn.terminate()

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        event = AckEvent.parse(payload)
        if event is not None:
            self._on_event(event)

    def _clock_notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        asyncio.get_running_loop().create_task(self._on_clock())

    # -- the loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.1
        next_housekeeping = 0.0
        next_recheck = time.monotonic() + self._recheck_s
        while not self._closing:
            if self._conn is None or self._lost.is_set() or self._conn.is_closed():
                await self._drop()
                try:
                    await self._connect()
                except Exception as exc:  # whatever the driver raises, the loop must live on
                    _log.debug("session reconnect failed: %s", exc)
                    self.unreachable = exc
                    self._db.down(exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
                backoff = 0.1
                _log.debug("queue database session connected (generation %d)", self.generation)
                await self._recheck()
            now = time.monotonic()
            try:
                if self.polling or now >= next_recheck:
                    next_recheck = now + self._recheck_s
                    await self._recheck()
                if now >= next_housekeeping:
                    next_housekeeping = now + self._housekeeping_s
                    await self._check()
                    if self._housekeeping:
                        await self._lead()
            except (StoreUnavailable, StatementInDoubt) as exc:
                _log.debug("session step failed: %s", exc)
            except (asyncpg.PostgresError, QueueError) as exc:
                _log.warning("queue database housekeeping failed: %s", exc)
            except Exception as exc:  # a broken session connection: start it again
                _log.debug("session connection broken: %s", exc)
                self._up.clear()
                self._lost.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), self._poll_s)

    async def _check(self) -> None:
        """Is the session's server still there, and still what the URL asks for?"""
        conn = self._conn
        if conn is None:
            return
        try:
            standby = await conn.fetchval("select pg_is_in_recovery()",
                                          timeout=self._url.budgets.silence_timeout)
        except TimeoutError:
            self._url.mark_bad(getattr(conn, "cq_host", ""))
            raise ConnectionError("the session's server stopped answering") from None
        if standby and self._url.needs_primary:
            raise ConnectionError("the session's server is a standby now")

    async def _recheck(self) -> None:
        """Deliver every ACK a waiter may have missed, from the committed ack markers."""
        waiters = [w for w in self._hub.all() if not w.looking]
        if not waiters:
            return
        ids = [w.key for w in waiters if isinstance(w.key, int)]
        paths = [w.key for w in waiters if isinstance(w.key, str)]
        floor = min(w.watermark for w in waiters)
        rows = await self._db.fetch("RESULT_BLOCKING", _MARKERS, floor, ids, paths)
        for id_, has_result, path, seq in rows:
            self._on_event(AckEvent(id_, has_result, path, seq=seq))

    async def _lead(self) -> None:
        conn = self._conn
        if conn is None:
            return
        if not self.leader:
            self.leader = bool(await conn.fetchval(
                "select pg_try_advisory_lock($1)", LEADER_LOCK,
                timeout=self._url.budgets.silence_timeout))
            if self.leader:  # INFO the first time; after a reconnect it is the usual
                _log.log(logging.DEBUG if self._led else logging.INFO,
                         "this front end now runs the queue database's housekeeping")
                self._led = True
        if self.leader:
            await self.housekeep()

    async def housekeep(self) -> None:
        """One round: sweep in batches, then evict the cache down to its limits."""
        limits = self._limits
        while True:
            removed = await self._db.fetchval(
                "housekeeping", "select cq_sweep($1, $2, $3::interval)", _SWEEP_BATCH,
                limits.queue_log_size, _MARKER_AGE,
            )
            if removed < _SWEEP_BATCH:
                break
        await self._db.fetch("housekeeping", "select cq_cache_evict($1, $2)",
                             limits.cache_max_keys, limits.cache_max_bytes)  # fmt: skip


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
