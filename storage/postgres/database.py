"""The command pool: one asyncpg pool, every call one statement, every failure mapped.

Each store step is one ``select … from cq_*(…)`` call, which PostgreSQL runs as one
transaction. :meth:`Database.fetch` tells a client what it can do next (see
:mod:`.errors`): a statement that was **never sent** (no connection to be had, or a
pooled connection found broken before anything was written) is 57P03, retry; a statement
that was **sent** and got no answer (its connection closed, or went silent) is 08007,
outcome unknown, and is never retried here; only a rolled-back serialisation failure or
deadlock is run again.

Connections are opened by :func:`.hosts.connect` (each host of the URL its own deadline).
A **silence watchdog** bounds a statement's wait on a host that stopped answering without
closing anything (a frozen primary, a partitioned host: TCP keepalives would not notice a
stopped process whose kernel still answers): a call unanswered for ``silence_timeout``
makes the watchdog open a new connection to that host; if the host does not answer that
either, its calls are abandoned (08007), the pool's connections are replaced and the host
is tried last for a while. The pool replaces broken connections on the next acquire,
which is how a front end follows a restart or a failover without being restarted.

Outages are logged once: one WARNING when the database becomes unreachable, one INFO
when it is reached again (asyncpg's own pool-floor retries, a traceback each, are avoided
by keeping no connection floor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg

from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.storage.capabilities import PoolHealth
from cubequeue.storage.postgres.errors import (
    IN_DOUBT_HINT,
    RETRY_HINT,
    RETRYABLE,
    StatementInDoubt,
    StoreRefused,
    StoreUnavailable,
    database_error,
    is_permanent,
    refusal,
)
from cubequeue.storage.postgres.hosts import HOST_ERRORS, StoreUrl, connect, parse_url

__all__ = ["Database"]

_log = logging.getLogger("cubequeue.store.postgres")

#: how long a statement may wait for a pooled connection (all busy) before 57P03
ACQUIRE_TIMEOUT_S = 10.0
_ATTEMPTS = 3
#: raised by asyncpg's checks *before* it writes a statement (see _never_sent)
_NOT_SENT = (asyncpg.InterfaceError, asyncpg.InternalClientError)
#: raised once a statement was written and its connection closed: sent, no answer
_LOST = (asyncpg.PostgresConnectionError, OSError)


def open_url(dsn: str) -> StoreUrl:
    """The parsed store URL; a bad budget parameter is a :class:`StoreRefused`."""
    try:
        return parse_url(dsn)
    except ValueError as exc:
        raise StoreRefused(f"invalid --store URL: {exc}") from None


class Database:
    """The pool plus error mapping; ``available`` is False while the database is away."""

    def __init__(self, dsn: str, *, max_size: int = 10, statement_cache_size: int = 256) -> None:
        self.url = open_url(dsn)
        self.dsn = self.url.dsn
        self._max = max_size
        self._statement_cache_size = statement_cache_size
        self._pool: asyncpg.Pool | None = None
        #: False while the database cannot be reached (for /readyz)
        self.available = False
        self._down_at: float | None = None
        #: statements that failed, by kind (see :class:`PoolHealth`)
        self.errors: Counter[str] = Counter()
        #: the calls running now: connection -> when it was sent
        self._calls: dict[Any, float] = {}
        #: calls the watchdog abandoned (their error says "no answer", kind ``timeout``)
        self._abandoned: set[Any] = set()
        self._watchdog: asyncio.Task[None] | None = None
        budgets = self.url.budgets
        self._acquire_timeout = max(ACQUIRE_TIMEOUT_S,
                                    budgets.connect_timeout * len(self.url.hosts) + 1)

    async def open(self) -> None:
        """Create the pool and reach the database once: 57P03 if it is away now,
        :class:`StoreRefused` if this URL can never work (no such database or role)."""
        pool = await asyncpg.create_pool(
            self.dsn, min_size=0, max_size=self._max,
            statement_cache_size=self._statement_cache_size,
            command_timeout=self.url.budgets.call_timeout, connect=self._connect,
            reset=_keep,
        )  # fmt: skip
        try:
            async with pool.acquire(timeout=self._acquire_timeout):
                pass
        except BaseException as exc:
            pool.terminate()
            if is_permanent(exc):
                raise refusal(self.dsn, exc) from exc
            if isinstance(exc, (*HOST_ERRORS, TimeoutError)):
                self.down(exc)
                raise StoreUnavailable(f"the queue database cannot be reached: {_describe(exc)}",
                                       hint=RETRY_HINT) from exc
            raise
        self._pool = pool
        self.reached()
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _connect(self, dsn: str, **kwargs: Any) -> asyncpg.Connection:
        return await connect(self.url, **kwargs)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except (TimeoutError, *HOST_ERRORS):
                pool.terminate()

    def connection(self) -> Any:
        """``async with db.connection() as conn`` (migrations, tests)."""
        if self._pool is None:
            raise StoreUnavailable("the queue store is not open")
        return self._pool.acquire(timeout=self._acquire_timeout)

    async def fetch(self, command: str, sql: str, *args: object) -> Sequence[asyncpg.Record]:
        """Run one statement (one transaction) and return its rows."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the queue store is not open")
        calls = self._calls
        for attempt in range(_ATTEMPTS):
            try:
                conn = await pool.acquire(timeout=self._acquire_timeout)
            except (TimeoutError, *HOST_ERRORS) as exc:
                raise self._unreachable(exc) from exc
            calls[conn] = time.monotonic()
            try:
                rows: Sequence[asyncpg.Record] = await conn.fetch(sql, *args)
            except (asyncpg.DataError, UnicodeEncodeError, OverflowError) as exc:
                raise InvalidParameterValue(f"{command}: a value cannot be stored: {exc}") from exc
            except _NOT_SENT as exc:
                _terminate(conn)
                if not _never_sent(exc):
                    raise self._in_doubt(command, conn, exc) from exc
                # asyncpg refused before writing: a connection the pool thought idle is
                # closed, or a FATAL that reached it while idle broke its protocol. Nothing
                # ran, so the statement is safe to run on another connection
                if attempt < _ATTEMPTS - 1:
                    continue
                raise self._unreachable(exc) from exc
            except (TimeoutError, *_LOST) as exc:
                # sent, and the connection closed (08003 and its kin) or the call timed out
                _terminate(conn)
                raise self._in_doubt(command, conn, exc) from exc
            except asyncpg.PostgresError as exc:  # the database answered: it did not commit
                if exc.sqlstate in RETRYABLE and attempt < _ATTEMPTS - 1:
                    continue
                error = database_error(command, exc.sqlstate, str(exc))
                self.errors["unreachable" if isinstance(error, StoreUnavailable) else "database"] += 1
                if isinstance(error, StoreUnavailable):
                    self.down(exc)
                    self._expire()  # a standby (25006), a shutdown: look for the primary
                raise error from exc
            finally:
                sent = calls.pop(conn)
                self._abandoned.discard(conn)
                await _release(pool, conn, self.url.budgets.silence_timeout)
            if not self.available and sent > (self._down_at or 0.0):
                self.reached()  # not an answer to a call sent before the outage began
            return rows
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def fetchrow(self, command: str, sql: str, *args: object) -> asyncpg.Record:
        rows = await self.fetch(command, sql, *args)
        assert len(rows) == 1, f"{sql} returned {len(rows)} rows"
        return rows[0]

    async def fetchval(self, command: str, sql: str, *args: object) -> Any:
        return (await self.fetchrow(command, sql, *args))[0]

    # -- failures -------------------------------------------------------------------------

    def _unreachable(self, exc: BaseException) -> StoreUnavailable:
        self.errors["unreachable"] += 1
        self.down(exc)
        return StoreUnavailable(f"the queue database cannot be reached: {_describe(exc)}",
                                hint=RETRY_HINT)

    def _in_doubt(self, command: str, conn: Any, exc: BaseException) -> StatementInDoubt:
        silent = conn in self._abandoned or isinstance(exc, TimeoutError)
        self.errors["timeout" if silent else "in_doubt"] += 1
        self.down(exc)
        self._expire()  # its siblings most likely went the same way: replace them all
        how = ("the queue database did not answer" if silent
               else "the connection to the queue database was lost")
        return StatementInDoubt(
            f"{how} during {command}; whether it took effect is unknown ({_describe(exc)})",
            hint=IN_DOUBT_HINT)

    def _expire(self) -> None:
        pool = self._pool
        if pool is not None:
            task = asyncio.get_running_loop().create_task(pool.expire_connections())
            task.add_done_callback(_ignore)

    def down(self, exc: BaseException) -> None:
        """The database was found unreachable: the outage's one WARNING."""
        if self._down_at is None:
            self._down_at = time.monotonic()
            _log.warning("queue database unavailable: %s; statements get 57P03 until it is "
                         "back (reconnecting by itself)", _describe(exc))
        self.available = False

    def reached(self) -> None:
        """The database answered: the outage's one INFO line, if there was one."""
        if self._down_at is not None:
            _log.info("queue database reachable again after %.1f s",
                      time.monotonic() - self._down_at)
            self._down_at = None
        self.available = True

    # -- the silence watchdog -------------------------------------------------------------

    async def _watch(self) -> None:
        silence = self.url.budgets.silence_timeout
        while True:
            await asyncio.sleep(silence / 4)
            now = time.monotonic()
            hosts = {getattr(conn, "cq_host", None) for conn, sent in list(self._calls.items())
                     if now - sent > silence and conn not in self._abandoned}
            for host in hosts:
                if host is None or await self._answers(host):
                    continue
                _log.debug("queue database host stopped answering: %s", _redact(host))
                self.url.mark_bad(host)
                for conn in [c for c in self._calls if getattr(c, "cq_host", None) == host]:
                    self._abandoned.add(conn)
                    _terminate(conn)
                self._expire()

    async def _answers(self, host: str) -> bool:
        """Whether ``host`` answers a new connection and a ``select 1`` in time (a refusal
        from a live server, such as too many connections, is an answer)."""
        budget = self.url.budgets.connect_timeout
        try:
            conn = await asyncpg.connect(host, timeout=budget, statement_cache_size=0)
        except (asyncpg.PostgresError, asyncpg.TargetServerAttributeNotMatched):
            return True  # it answered (full, starting, a standby now): not hung
        except (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError):
            return False
        try:
            await conn.fetchval("select 1", timeout=budget)
            return True
        except Exception:
            return False
        finally:
            conn.terminate()

    # -- health ---------------------------------------------------------------------------

    def health(self) -> PoolHealth:
        pool = self._pool
        size = pool.get_size() if pool is not None else 0
        idle = pool.get_idle_size() if pool is not None else 0
        return PoolHealth(open=size, in_use=max(size - idle, 0), max_size=self._max,
                          reachable=self.available, errors=dict(self.errors))


def _never_sent(exc: BaseException) -> bool:
    """asyncpg's checks that run before anything is written (``_check_state``,
    ``_ensure_connected``, ``_set_state``); any other client error is taken as in doubt."""
    return str(exc).startswith(("cannot perform operation", "cannot switch to state",
                                "not connected"))


async def _keep(conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo. A pooled connection keeps no session state
    (every call is one ``select cq_…()`` in its own transaction; LISTEN and the session
    lock live on the session's own connection), so asyncpg's default reset query, one
    more round trip per statement, is skipped; asyncpg still rolls back an open
    transaction itself."""


async def _release(pool: asyncpg.Pool, conn: asyncpg.Connection, timeout: float) -> None:
    """Give ``conn`` back (within ``timeout``: a server that stopped answering must not
    hold a finished statement's answer); a failure here never changes that answer.

    The statement's outcome is settled before the release (its rows arrived, or its error
    did). A release that fails (the reset query on a connection the server has just
    terminated, or whose protocol a late FATAL broke) means a broken connection: the pool
    terminates it and opens another on a later acquire, so it is never handed out busy.
    """
    try:
        await pool.release(conn, timeout=timeout)
    except Exception as exc:
        _log.debug("a broken queue database connection was dropped: %s", _describe(exc))
        _terminate(conn)


def _terminate(conn: asyncpg.Connection) -> None:
    # the pool may already have taken it back (its proxy then refuses every call), and it
    # replaces a terminated connection on the next acquire either way
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()


def _ignore(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def _redact(dsn: str) -> str:
    """A host URL without its password, for a log line."""
    head, at, tail = dsn.rpartition("@")
    if not at:
        return dsn
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':')[0]}@{tail}"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
