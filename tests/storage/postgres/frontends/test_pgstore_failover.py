"""Failover under load: a primary with a synchronous streaming standby, two cubequeue front
ends whose ``--store`` names both hosts with ``target_session_attrs=read-write``, Cube-like
cycles through both; the primary is killed (SIGKILL) and the standby promoted.

Afterwards every write a client saw acknowledged is there (an ADD's item or its ACK's
result, a CACHE SET's value), the front ends serve again without a restart, and the time
without service (the longest gap any client saw between two successful statements) is
printed. A statement that failed during the failover is not checked: its outcome is
unknown, which is what the front end said (57P03 naming it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

import psycopg
import pytest
from pgcluster import find_bin, start_cluster
from pgstore_servers import front_ends

CLIENTS = 8
LOAD_BEFORE_S = 1.5
LOAD_AFTER_S = 1.5
RECOVERY_TIMEOUT_S = 45.0


@dataclass
class Ledger:
    """What the clients saw acknowledged."""

    added: dict[str, int] = field(default_factory=dict)  # path -> id
    acked: dict[int, str] = field(default_factory=dict)  # id -> result
    unknown_ack: set[int] = field(default_factory=set)
    cached: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: per client: the successes' times
    ok_at: list[list[float]] = field(default_factory=list)


async def client(n: int, dsn: str, ledger: Ledger, stop: asyncio.Event) -> None:
    times: list[float] = []
    ledger.ok_at.append(times)
    conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
    cycle = 0
    while not stop.is_set():
        cycle += 1
        path, key = f"fo{n}:c{cycle}", f"fo{n}:k{cycle}"
        qid: int | None = None
        try:
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            rows = await (await conn.execute(f"QUEUE ADD PRIORITY 1 '{path}' 'p{cycle}'")).fetchall()
            qid = int(rows[0][0])  # type: ignore[call-overload]
            ledger.added[path] = qid
            times.append(time.monotonic())
            await conn.execute(f"QUEUE RETRIEVE CONCURRENCY 100 '{path}'")
            try:
                rows = await (await conn.execute(f"QUEUE ACK {qid} 'r{cycle}'")).fetchall()
            except psycopg.Error:
                ledger.unknown_ack.add(qid)
                raise
            if rows == [(True,)]:
                ledger.acked[qid] = f"r{cycle}"
            await conn.execute(f"CACHE SET '{key}' 'v{cycle}'")
            ledger.cached[key] = f"v{cycle}"
            times.append(time.monotonic())
        except psycopg.OperationalError as exc:
            if exc.sqlstate != "57P03" and not (conn is None or conn.closed):
                ledger.errors.append(f"{exc.sqlstate}: {exc}")
            await asyncio.sleep(0.02)  # a client's retry pause, not a test wait
        except psycopg.Error as exc:
            ledger.errors.append(f"{exc.sqlstate}: {exc}")
            await asyncio.sleep(0.02)
    if conn is not None:
        await conn.close()


async def verify(dsn: str, ledger: Ledger) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for qid, result in ledger.acked.items():
            rows = await (await conn.execute(f"QUEUE RESULT {qid}")).fetchall()
            assert rows and rows[0][0] == result, f"acknowledged ACK of {qid} lost: {rows}"
        for path, qid in ledger.added.items():
            if qid in ledger.acked or qid in ledger.unknown_ack:
                continue
            rows = await (await conn.execute(f"QUEUE GET '{path}'")).fetchall()
            assert rows, f"acknowledged ADD of {path} (id {qid}) lost"
        for key, value in ledger.cached.items():
            rows = await (await conn.execute(f"CACHE GET '{key}'")).fetchall()
            assert rows == [(value,)], f"acknowledged CACHE SET of {key} lost: {rows}"


@pytest.mark.skipif(find_bin() is None, reason="PostgreSQL is not installed")
def test_failover_to_a_synchronous_standby_keeps_every_acknowledged_write() -> None:
    primary = start_cluster()
    try:
        primary.create_database("failover")
        standby = primary.start_standby(synchronous=True)
        store = (f"postgresql://cq@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/failover"
                 "?target_session_attrs=read-write")
        with front_ends(store, 2, "--results-expire", "300") as servers:

            async def body() -> float:
                ledger = Ledger()
                stop = asyncio.Event()
                tasks = [asyncio.ensure_future(client(n, servers[n % 2].dsn, ledger, stop))
                         for n in range(CLIENTS)]
                await asyncio.sleep(LOAD_BEFORE_S)  # load runs this long before the kill
                before = len(ledger.acked)
                killed = time.monotonic()
                await asyncio.to_thread(primary.kill)
                await asyncio.to_thread(standby.promote)
                promoted = time.monotonic()
                deadline = killed + RECOVERY_TIMEOUT_S
                while any(not t or t[-1] < promoted for t in ledger.ok_at):
                    assert time.monotonic() < deadline, "the front ends did not serve again"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(LOAD_AFTER_S)
                stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks), 30)
                assert not ledger.errors, ledger.errors[:5]
                assert before > 0 and len(ledger.acked) > before, "load before and after"
                gap = max(
                    max((b - a for a, b in itertools.pairwise(t) if b > killed - 1),
                        default=0.0)
                    for t in ledger.ok_at)
                await verify(servers[0].dsn, ledger)
                await verify(servers[1].dsn, ledger)
                print(f"\nfailover: {len(ledger.acked)} acknowledged cycles, promote took "
                      f"{promoted - killed:.2f} s, longest gap without service {gap:.2f} s")
                return gap

            gap = asyncio.run(asyncio.wait_for(body(), 120))
            assert gap < RECOVERY_TIMEOUT_S
    finally:
        primary.stop()
