"""The adapter contract: the QueryQueue cycle's steps, one method per step.

Every method is exactly one round trip to the server (``rt`` counts them per step) except
``reconcile``, whose cost is the system's own: cubequeue sends ``QUEUE LIST`` and one
``QUEUE RETRIEVE`` per claim (Cube 1.7.43's QueryQueue), PostgreSQL one PL/pgSQL call,
Redis one Lua script. ``wait`` is one request plus the server's push (RESULT_BLOCKING's
row, a NOTIFY, BLPOP's reply): never a poll.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

__all__ = ["Adapter", "Claim", "PreparedAdapter", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a system listens. ``dsn`` for the PostgreSQL wire, ``port`` for Redis."""

    system: str
    host: str
    port: int
    dsn: str = ""


@dataclass(frozen=True, slots=True)
class Claim:
    """An item this worker now owns (moved to active by the server, race-free)."""

    qid: int
    path: str
    payload: str
    #: round trips of the claiming step on this item's critical path (cubequeue's
    #: reconcile: LIST + the RETRIEVEs up to this one; one script/function call: 1)
    rts: int = 1


class Adapter(Protocol):
    #: round trips per step name (``lookup``, ``add``, ``list``, ``retrieve`` …)
    rt: Counter[str]

    async def lookup(self, path: str) -> str | None:
        """Result lookup by path (QUEUE RESULT): None on a miss."""

    async def add(self, path: str, priority: int, payload: str) -> tuple[int, bool]:
        """Enqueue with dedup by path: (queue id, added)."""

    async def add_and_claim(
        self, path: str, priority: int, payload: str, concurrency: int
    ) -> tuple[int, bool, Claim | None]:
        """The fast track: enqueue and claim at once while active + pending < concurrency."""

    async def reconcile(self, prefix: str, concurrency: int) -> list[Claim]:
        """Claim pending items, highest priority first, while active < concurrency."""

    async def merge_extra(self, claim: Claim, extra_json: str) -> None: ...

    async def heartbeat(self, claim: Claim) -> None: ...

    async def ack(self, claim: Claim, result: str) -> bool:
        """Store the result, remove the item, wake every waiter."""

    async def wait(self, qid: int, path: str, timeout_ms: int) -> str | None:
        """Block until the item's result arrives (None on timeout); no polling."""

    async def close(self) -> None: ...


class PreparedAdapter:
    """The PostgreSQL-wire adapters' shared part: one asyncpg connection whose statements
    are prepared once, by name (an unnamed statement would be re-parsed on every call),
    and the steps that are one prepared call on either system."""

    def __init__(self, conn: asyncpg.Connection, stmts: dict[str, Any]) -> None:
        self.conn = conn
        self.s = stmts
        self.rt: Counter[str] = Counter()

    @staticmethod
    async def connect(
        target: Target, sql: Mapping[str, str]
    ) -> tuple[asyncpg.Connection, dict[str, Any]]:
        conn = await asyncpg.connect(target.dsn, statement_cache_size=0)
        stmts = {name: await conn.prepare(text, name=f"bench_{name}") for name, text in sql.items()}
        return conn, stmts

    async def merge_extra(self, claim: Claim, extra_json: str) -> None:
        self.rt["merge_extra"] += 1
        await self.s["merge_extra"].fetch(claim.qid, extra_json)

    async def heartbeat(self, claim: Claim) -> None:
        self.rt["heartbeat"] += 1
        await self.s["heartbeat"].fetch(claim.qid)

    async def close(self) -> None:
        await self.conn.close()
