"""The command pool: one asyncpg pool, every call one statement, every failure mapped.

Each store step is one ``select … from cq_*(…)`` call, which PostgreSQL runs as one
transaction. :meth:`Database.fetch` maps what can go wrong (see :mod:`.errors`): no
connection to be had is :class:`~.errors.StoreUnavailable` (57P03); a connection lost
during the call is 57P03 too, saying the outcome is unknown, and is not retried; only a
rolled-back serialisation failure or deadlock is run again. The pool replaces broken
connections by itself on the next acquire, which is how a front end reconnects after a
restart or a failover without being restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import asyncpg

from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.storage.postgres.errors import RETRYABLE, StoreUnavailable, database_error

__all__ = ["Database"]

_log = logging.getLogger("cubequeue.store.postgres")

#: how long a statement may wait for a pooled connection before 57P03
ACQUIRE_TIMEOUT_S = 10.0
#: a call still running after this is abandoned (its outcome unknown)
COMMAND_TIMEOUT_S = 60.0
_ATTEMPTS = 3
_CONNECTION_ERRORS = (OSError, asyncpg.InterfaceError, asyncio.TimeoutError,
                      asyncpg.exceptions.ConnectionFailureError)  # fmt: skip


class Database:
    """The pool plus error mapping; ``available`` is False after a failed connection."""

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10,
                 statement_cache_size: int = 256) -> None:
        self.dsn = dsn
        self._min = min_size
        self._max = max_size
        self._statement_cache_size = statement_cache_size
        self._pool: asyncpg.Pool | None = None
        #: False while the database cannot be reached (for /readyz)
        self.available = False

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=self._min, max_size=self._max,
                statement_cache_size=self._statement_cache_size,
                command_timeout=COMMAND_TIMEOUT_S,
            )
        except (*_CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(f"the queue database cannot be reached: {exc}") from exc
        self.available = True

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except (TimeoutError, *_CONNECTION_ERRORS):
                pool.terminate()

    def connection(self) -> Any:
        """``async with db.connection() as conn`` (migrations, tests)."""
        if self._pool is None:
            raise StoreUnavailable("the queue store is not open")
        return self._pool.acquire(timeout=ACQUIRE_TIMEOUT_S)

    async def fetch(self, command: str, sql: str, *args: object) -> Sequence[asyncpg.Record]:
        """Run one statement (one transaction) and return its rows."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the queue store is not open")
        for attempt in range(_ATTEMPTS):
            try:
                conn = await pool.acquire(timeout=ACQUIRE_TIMEOUT_S)
            except (*_CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
                self._down(exc)
                raise StoreUnavailable(
                    f"the queue database cannot be reached: {_describe(exc)}",
                    hint="the store reconnects by itself; retry the statement",
                ) from exc
            try:
                rows: Sequence[asyncpg.Record] = await conn.fetch(sql, *args)
            except asyncpg.PostgresError as exc:
                if exc.sqlstate in RETRYABLE and attempt < _ATTEMPTS - 1:
                    continue
                error = database_error(command, exc.sqlstate, str(exc))
                if isinstance(error, StoreUnavailable):
                    self._down(exc)
                raise error from exc
            except (*_CONNECTION_ERRORS, asyncpg.InternalClientError) as exc:
                # InternalClientError: the driver's protocol state is broken, typically by a
                # server's FATAL that reached the connection while it was idle in the pool
                # (a dying primary) just before its socket closed: the connection is gone
                _terminate(conn)
                self._down(exc)
                raise StoreUnavailable(
                    f"the connection to the queue database was lost during {command}; "
                    f"whether it took effect is unknown ({_describe(exc)})",
                    hint="check the statement's effect before repeating it",
                ) from exc
            except (asyncpg.DataError, UnicodeEncodeError, OverflowError) as exc:
                raise InvalidParameterValue(f"{command}: a value cannot be stored: {exc}") from exc
            finally:
                await _release(pool, conn)
            self.available = True
            return rows
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def fetchrow(self, command: str, sql: str, *args: object) -> asyncpg.Record:
        rows = await self.fetch(command, sql, *args)
        assert len(rows) == 1, f"{sql} returned {len(rows)} rows"
        return rows[0]

    async def fetchval(self, command: str, sql: str, *args: object) -> Any:
        return (await self.fetchrow(command, sql, *args))[0]

    def _down(self, exc: BaseException) -> None:
        if self.available:
            _log.warning("queue database unavailable: %s", _describe(exc))
        self.available = False


async def _release(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    """Give ``conn`` back; a failure here never changes the statement's answer.

    The statement's outcome is settled before the release (its rows arrived, or its error
    did). A release that fails (the reset query on a connection the server has just
    terminated, or whose protocol a late FATAL broke) means a broken connection: the pool
    terminates it and opens another on a later acquire, so it is never handed out busy.
    """
    try:
        await pool.release(conn)
    except Exception as exc:
        _log.debug("a broken queue database connection was dropped: %s", _describe(exc))
        _terminate(conn)


def _terminate(conn: asyncpg.Connection) -> None:
    # the pool may already have taken it back (its proxy then refuses every call), and it
    # replaces a terminated connection on the next acquire either way
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
