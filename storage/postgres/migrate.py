"""Schema migrations: versioned, idempotent, and run once however many front ends start.

The migrations are the package's ``migrations/NNNN_name.sql`` files, applied in version
order. :func:`migrate` runs them in one transaction that first takes a transaction-scoped
advisory lock, so front ends starting at the same moment queue up behind the first one and
then find nothing left to do (the pattern BullMQ's PostgreSQL backend uses, per the design
in docs/topology.md). ``cq_schema_version`` records what was applied; every
file is also written to be re-runnable (``if not exists``, ``create or replace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Protocol

import asyncpg

from cubequeue.storage.postgres.errors import (
    UNAVAILABLE,
    StoreRefused,
    StoreUnavailable,
    is_permanent,
)

__all__ = ["MIGRATION_LOCK", "Migration", "migrate", "migrations"]

#: the advisory lock key all front ends serialise their migrations on
MIGRATION_LOCK = 0x6375_6265_7175_0001  # "cubequ" + 1


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


class _Conn(Protocol):
    async def execute(self, query: str, *args: object) -> str: ...

    async def fetch(self, query: str, *args: object) -> list[object]: ...

    def transaction(self) -> object: ...


def migrations() -> list[Migration]:
    """Every migration file of the package, in version order."""
    found: list[Migration] = []
    for entry in resources.files("cubequeue.storage.postgres.migrations").iterdir():
        name = entry.name
        if not name.endswith(".sql"):
            continue
        number, _, rest = name.partition("_")
        found.append(Migration(int(number), rest.removesuffix(".sql"), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


async def migrate(conn: _Conn) -> list[int]:
    """Apply what is missing (in one transaction, under the lock); the versions applied.

    A role that may not create the schema is :class:`StoreRefused` (no retry cures it);
    a connection lost meanwhile is 57P03 (the transaction rolled back: start again)."""
    try:
        return await _migrate(conn)
    except asyncpg.PostgresError as exc:
        if is_permanent(exc):
            raise StoreRefused(
                f"the queue database refuses the schema migration (SQLSTATE {exc.sqlstate}: "
                f"{exc}): let the role create tables in its schema (grant create on schema "
                "public to <role>), or start one front end as the database's owner") from exc
        if isinstance(exc, asyncpg.PostgresConnectionError) or exc.sqlstate in UNAVAILABLE:
            raise StoreUnavailable(f"the queue database cannot be reached: {exc}") from exc
        raise
    except (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError) as exc:
        raise StoreUnavailable(f"the queue database cannot be reached: {exc}") from exc


async def _migrate(conn: _Conn) -> list[int]:
    applied: list[int] = []
    async with conn.transaction():  # type: ignore[attr-defined]  # asyncpg's Transaction
        await conn.execute("select pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(
            "create table if not exists cq_schema_version ("
            " version int primary key, name text not null,"
            " applied_at timestamptz not null default now())"
        )
        rows = await conn.fetch("select version from cq_schema_version")
        done = {row["version"] for row in rows}  # type: ignore[index]  # asyncpg Record
        for migration in migrations():
            if migration.version in done:
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "insert into cq_schema_version (version, name) values ($1, $2)",
                migration.version, migration.name,
            )
            applied.append(migration.version)
    return applied
