"""The synchronous face both stores get in the conformance suite (see conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.clock import AdjustableClock
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.store import PostgresStore
from cubequeue.storage.store import MemoryStore

START = 1_700_000_000_000

RESET = f"""
truncate cq_item, cq_result, cq_ack_marker, cq_log, cq_prefix, cq_cache;
alter sequence cq_id restart; alter sequence cq_marker_seq restart;
alter sequence cq_cache_id restart; alter sequence cq_cache_use restart;
update cq_clock set offset_ms = 0, frozen_ms = {START};
update cq_stats set evicted_keys = 0, evicted_bytes = 0;
"""


class Backend:
    """One store behind a synchronous face: ``run`` awaits when the store returns an
    awaitable, so one test body drives either store."""

    def __init__(self, kind: str, limits: Limits, dsn: str | None) -> None:
        self.kind = kind
        self.limits = limits
        self.loop = asyncio.new_event_loop()
        # a clock SYS CLOCK may move (the memory store refuses clock control otherwise)
        self.clock = AdjustableClock(lambda: START)
        self.store: Any
        if kind == "memory":
            self.store = MemoryStore(self.clock, limits)
        else:
            assert dsn is not None
            self.store = PostgresStore(dsn, limits, housekeeping=False, pool_size=2)
            self.wait(self.store.start())
            self.wait(self._sql(RESET))
            self.wait(self.store.refresh_clock())

    async def _sql(self, sql: str) -> None:
        async with self.store.db.connection() as conn:
            await conn.execute(sql)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of plain SQL on the PostgreSQL store's database (its internal checks)."""
        async def rows() -> list[tuple[Any, ...]]:
            async with self.store.db.connection() as conn:
                return [tuple(r) for r in await conn.fetch(sql)]

        return list(self.wait(rows()))

    def wait(self, value: Any) -> Any:
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            return self.loop.run_until_complete(value)
        return value

    def frame(self, cmd: Command, pid: str | None = None) -> ResultSet:
        result = self.wait(self.store.execute(cmd, pid))
        if isinstance(result, RowStream):
            result = result.collect()
        assert isinstance(result, ResultSet)
        return result

    def run(self, cmd: Command, pid: str | None = None) -> list[Row]:
        return self.frame(cmd, pid).rows

    def outcome(self, cmd: Command, pid: str | None = None) -> object:
        """Rows, or (error class, SQLSTATE, message): what a comparison needs."""
        try:
            return ("rows", self.frame(cmd, pid))
        except QueueError as exc:
            return ("error", type(exc).__name__, exc.sqlstate, exc.message)

    def table(self, name: str) -> list[Row]:
        result = self.wait(self.store.system_table(name))
        if isinstance(result, RowStream):
            result = result.collect()
        return list(result.rows)

    def advance(self, ms: int) -> None:
        if self.kind == "memory":
            self.clock.advance(ms)
        else:
            self.wait(self._sql(f"update cq_clock set frozen_ms = frozen_ms + {int(ms)}"))

    def blocking(self, key: int | str, got: list[ResultSet]) -> object:
        return self.wait(
            self.store.result_blocking(QueueResultBlocking(key=key, timeout=5000), got.append)
        )

    def settle(self, got: list[ResultSet], want: int = 1, timeout: float = 10.0) -> None:
        """Let the PostgreSQL store's notifications arrive (no-op in memory)."""
        if self.kind == "memory":
            return

        async def until() -> None:
            deadline = self.loop.time() + timeout
            while len(got) < want and self.loop.time() < deadline:
                await asyncio.sleep(0.005)

        self.wait(until())

    def close(self) -> None:
        if self.kind != "memory":
            self.wait(self.store.close())
        self.loop.close()


BackendFactory = Callable[..., Backend]
