"""cubequeue over the PostgreSQL wire: exactly the command sequence of Cube's QueryQueue.

One asyncpg connection per adapter; every statement is prepared once at connect (Parse
and Describe happen outside the measured window), so each step is one Bind/Execute/Sync
round trip, like Cube's driver reusing its statements. Ids go in key slots as
``$n::int8`` (dialect doc §8 rule 5: an integer cast makes the slot an id).

Reconcile is Cube 1.7.43's: ``QUEUE LIST prefix`` (active and pending, highest priority
first), then ``QUEUE RETRIEVE EXTENDED CONCURRENCY n path`` for each pending item while
``active < concurrency``. A RETRIEVE that loses a race (another process claimed the item
or the slot) returns a NULL payload and costs nothing else.
"""

from __future__ import annotations

from bench.adapters.base import Claim, PreparedAdapter, Target

__all__ = ["SQL", "CubequeueAdapter"]

SQL = {
    "lookup": "QUEUE RESULT $1",
    "add": "QUEUE ADD PRIORITY $1 $2 $3",
    "add_and_claim": "QUEUE ADD_AND_RETRIEVE PRIORITY $1 $2 $3 $4",
    "list": "QUEUE LIST $1",
    "retrieve": "QUEUE RETRIEVE EXTENDED CONCURRENCY $1 $2",
    "merge_extra": "QUEUE MERGE_EXTRA $1::int8 $2",
    "heartbeat": "QUEUE HEARTBEAT $1::int8",
    "ack": "QUEUE ACK $1::int8 $2",
    "wait": "QUEUE RESULT_BLOCKING $1 $2::int8",
}


class CubequeueAdapter(PreparedAdapter):
    @classmethod
    async def open(cls, target: Target) -> CubequeueAdapter:
        return cls(*await cls.connect(target, SQL))

    async def lookup(self, path: str) -> str | None:
        self.rt["lookup"] += 1
        row = await self.s["lookup"].fetchrow(path)
        return None if row is None else row[0]

    async def add(self, path: str, priority: int, payload: str) -> tuple[int, bool]:
        self.rt["add"] += 1
        row = await self.s["add"].fetchrow(priority, path, payload)
        return int(row[0]), bool(row[1])

    async def add_and_claim(
        self, path: str, priority: int, payload: str, concurrency: int
    ) -> tuple[int, bool, Claim | None]:
        self.rt["add_and_claim"] += 1
        row = await self.s["add_and_claim"].fetchrow(priority, path, payload, concurrency)
        qid = int(row["id"])
        claim = None if row["payload"] is None else Claim(qid, path, row["payload"], 0)
        return qid, bool(row["added"]), claim

    async def reconcile(self, prefix: str, concurrency: int) -> list[Claim]:
        before = self.rt["list"] + self.rt["retrieve"]
        self.rt["list"] += 1
        rows = await self.s["list"].fetch(prefix)
        active = sum(1 for r in rows if r["status"] == "active")
        claims: list[Claim] = []
        for r in rows:
            if active >= concurrency:
                break
            if r["status"] != "pending":
                continue
            path = f"{prefix}:{r['id']}"
            self.rt["retrieve"] += 1
            got = await self.s["retrieve"].fetchrow(concurrency, path)
            if got is None or got["payload"] is None:
                if got is not None and got["active"] is not None:
                    active = len(got["active"].split(","))
                continue  # lost the race: another process holds the item or the slot
            rts = self.rt["list"] + self.rt["retrieve"] - before
            claims.append(Claim(int(got["id"]), path, got["payload"], rts))
            active += 1
        return claims

    async def ack(self, claim: Claim, result: str) -> bool:
        self.rt["ack"] += 1
        row = await self.s["ack"].fetchrow(claim.qid, result)
        return bool(row[0])

    async def wait(self, qid: int, path: str, timeout_ms: int) -> str | None:
        self.rt["wait"] += 1
        row = await self.s["wait"].fetchrow(timeout_ms, qid)
        return None if row is None else row[0]
