"""How the command pool answers a failed call (no database needed: a stand-in pool whose
connection raises what asyncpg raises): never sent is 57P03 (retry), sent without an
answer is 08007 (outcome unknown), and the counts ``pool_health`` reports."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from cubequeue.grammar.errors import InternalError
from cubequeue.storage.postgres.database import Database
from cubequeue.storage.postgres.errors import (
    StatementInDoubt,
    StoreRefused,
    StoreUnavailable,
    refusal,
)
from cubequeue.storage.postgres.hosts import parse_url


class FakeConnection:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error
        self.terminated = False
        self.cq_host = "postgresql://cq@127.0.0.1:1/x"

    async def fetch(self, sql: str, *args: object) -> list[Any]:
        await asyncio.sleep(0)
        if self.error is not None:
            raise self.error
        return [(1,)]

    def terminate(self) -> None:
        self.terminated = True


class FakePool:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn
        self.expired = 0

    async def acquire(self, timeout: float) -> FakeConnection:
        return self.conn

    async def release(self, conn: FakeConnection) -> None:
        pass

    async def expire_connections(self) -> None:
        self.expired += 1

    def get_size(self) -> int:
        return 1

    def get_idle_size(self) -> int:
        return 1


def _run(error: BaseException | None, command: str = "QUEUE ACK") -> tuple[Database, Any]:
    async def body() -> tuple[Database, Any]:
        db = Database("postgresql://cq@127.0.0.1:1/x")
        pool = FakePool(FakeConnection(error))
        db._pool = pool  # type: ignore[assignment]
        try:
            return db, await db.fetch(command, "select 1")
        except Exception as exc:
            await asyncio.sleep(0)  # let the pool's expiry run
            return db, exc

    return asyncio.run(body())


def test_a_connection_closed_mid_call_is_in_doubt_not_retry() -> None:
    """asyncpg's ConnectionDoesNotExistError (08003) after the statement was written: it
    may have committed. It used to be caught as a database error and answered 57P03
    "retry the statement"."""
    lost = asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    db, answer = _run(lost)
    assert isinstance(answer, StatementInDoubt)
    assert answer.sqlstate == "08007"
    assert "whether it took effect is unknown" in answer.message
    assert answer.hint == "check the statement's effect before repeating it"
    assert "QUEUE ACK" in answer.message
    assert db._pool.conn.terminated and db._pool.expired == 1  # type: ignore[union-attr]
    assert db.health().errors == {"in_doubt": 1}
    assert not db.health().reachable


def test_a_fatal_attached_to_the_close_is_still_in_doubt() -> None:
    """A server's FATAL reported with the close (asyncpg chains it as the cause) may
    follow a local commit (a backend killed while it waited for its standby)."""
    lost = asyncpg.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation: terminating connection due to "
        "administrator command")
    lost.__cause__ = asyncpg.AdminShutdownError("terminating connection")
    _, answer = _run(lost)
    assert isinstance(answer, StatementInDoubt)


def test_a_call_timeout_is_in_doubt_counted_as_timeout() -> None:
    db, answer = _run(TimeoutError())
    assert isinstance(answer, StatementInDoubt)
    assert "did not answer" in answer.message
    assert db.health().errors == {"timeout": 1}


@pytest.mark.parametrize("error", [
    asyncpg.InterfaceError("cannot perform operation: connection is closed"),
    asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
])
def test_refused_before_sending_is_57p03_retry(error: BaseException) -> None:
    """Never sent: run again on another connection; when none works either, 57P03."""
    db, answer = _run(error, "CACHE SET")
    assert type(answer) is StoreUnavailable
    assert answer.sqlstate == "57P03"
    assert answer.hint == "the store reconnects by itself; retry the statement"
    assert db.health().errors == {"unreachable": 1}


def test_another_client_error_is_in_doubt() -> None:
    _, answer = _run(asyncpg.InternalClientError("unexpected message after the reply"))
    assert isinstance(answer, StatementInDoubt)


def test_a_standby_answer_is_57p03_and_the_pool_looks_for_the_primary() -> None:
    db, answer = _run(asyncpg.ReadOnlySQLTransactionError("cannot execute in a read-only transaction"))
    assert type(answer) is StoreUnavailable and answer.sqlstate == "57P03"
    assert db._pool.expired == 1  # type: ignore[union-attr]


def test_another_database_error_is_internal() -> None:
    db, answer = _run(asyncpg.UndefinedFunctionError("function cq_x() does not exist"))
    assert isinstance(answer, InternalError)
    assert db.health().errors == {"database": 1}


def test_success_after_an_outage_is_reachable_again(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> Database:
        db = Database("postgresql://cq@127.0.0.1:1/x")
        conn = FakeConnection(asyncpg.InterfaceError("connection is closed"))
        db._pool = FakePool(conn)  # type: ignore[assignment]
        for _ in range(3):
            with pytest.raises(StoreUnavailable):
                await db.fetch("CACHE GET", "select 1")
        conn.error = None
        assert await db.fetch("CACHE GET", "select 1") == [(1,)]
        return db

    with caplog.at_level("INFO", logger="cubequeue.store.postgres"):
        db = asyncio.run(body())
    assert db.available and db.health().reachable
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    # one WARNING for the outage, one INFO when it is over, no traceback
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert all(r.exc_info is None for r in caplog.records)


def test_url_budgets_and_hosts() -> None:
    url = parse_url("postgresql://u:pw@h1:5432,[::1]:5433/db?target_session_attrs=read-write"
                    "&connect_timeout=1.5&silence_timeout=3")
    assert url.hosts == ["postgresql://u:pw@h1:5432/db?target_session_attrs=read-write",
                         "postgresql://u:pw@[::1]:5433/db?target_session_attrs=read-write"]
    assert url.budgets.connect_timeout == 1.5 and url.budgets.silence_timeout == 3
    assert url.budgets.call_timeout == 30
    assert url.needs_primary
    assert "connect_timeout" not in url.dsn
    url.mark_bad(url.hosts[0])
    assert url.in_order() == url.hosts[::-1]
    with pytest.raises(StoreRefused, match="connect_timeout"):
        Database("postgresql://u@h/db?connect_timeout=0")


def test_permanent_errors_name_the_fix() -> None:
    dsn = "postgresql://cq:secret@db1:5432,db2:5432/nosuchdb"
    missing_db = refusal(dsn, asyncpg.InvalidCatalogNameError('database "nosuchdb" does not exist'))
    assert "3D000" in str(missing_db) and "createdb -h db1 -p 5432" in str(missing_db)
    assert "nosuchdb" in str(missing_db) and "secret" not in str(missing_db)
    role = refusal(dsn, asyncpg.InvalidAuthorizationSpecificationError('role "cq" does not exist'))
    assert "createuser" in str(role)
    password = refusal(dsn, asyncpg.InvalidPasswordError("password authentication failed"))
    assert "password" in str(password) and "secret" not in str(password)
