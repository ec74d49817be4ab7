"""The PostgreSQL store beside the in-memory one: the QueryQueue cycle and hot-prefix claims.

Runs, back to back on one machine (figures are noisy on a shared 2-core VM: read the
ratios):

* the QueryQueue cycle (:mod:`bench.cycle`, normal track) against one server with the
  in-memory store, one front end with ``--store postgresql://…`` and two front ends over
  the same database (each front end gets half the clients, from its own load processes);
  server CPU per cycle counts the front ends' process trees plus the database's;
* the same cycle against the **hand-written PostgreSQL queue** of
  :mod:`bench.adapters.postgres` (the clients talk to PostgreSQL directly, no front end),
  in its own database of the same cluster: its server CPU is the database's alone. The
  last line is the PostgreSQL store's CPU per cycle over the hand-written queue's (the
  issue's target: at most 1.2x);
* claims/s on one hot prefix: clients race ``QUEUE RETRIEVE`` on distinct keys of one
  prefix (CONCURRENCY far above the load, so every call claims) for ``HOT_S`` seconds.

The database is :mod:`tests.support.pgcluster`'s throwaway cluster (loopback,
``fsync=off``: the disk's flush is not what is compared here).

Usage: ``python -m bench.pgstore [--clients 16] [--queries 1500] [--quick]`` (``--quick``:
300 queries and the PostgreSQL store with one front end only).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from typing import Any

import psycopg

from bench.adapters import Target, setup
from bench.cpu import tree_cpu_s
from bench.cycle import CycleConfig, CycleRun, run_cycle
from bench.peers import Peer, start_cubequeue
from bench.stats import pct
from tests.support.pgcluster import Cluster, start_cluster

HOT_S = 2.0
HOT_CLIENTS = 16
HOT_ITEMS = 20_000
#: ADDs per simple-query message while filling the hot prefix
_BATCH = 100


def _target(peer: Peer) -> Target:
    return Target("cubequeue", "127.0.0.1", peer.port, peer.dsn)


def _summary(run: CycleRun) -> dict[str, Any]:
    return {"wall": run.wall_s, "queries": run.queries, "cpu": run.server_cpu_s,
            "lat": run.latencies_ms, "errors": run.errors[:3], "ok": run.check.ok}


def _one(peer_port: int, peer_dsn: str, pid: int, cfg: CycleConfig, prefix: str,
         out: Any) -> None:
    run = run_cycle(Target("cubequeue", "127.0.0.1", peer_port, peer_dsn), pid, cfg, prefix)
    out.put(_summary(run))


def _cycle(peers: list[Peer], cfg: CycleConfig, prefix: str, db: Cluster | None) -> dict[str, Any]:
    """One cycle run spread over ``peers``; server CPU includes the database's."""
    db_pid = db.postmaster_pid() if db is not None else None
    db0 = tree_cpu_s(db_pid) if db_pid else 0.0
    if len(peers) == 1:
        parts = [_summary(run_cycle(_target(peers[0]), peers[0].pid, cfg, prefix))]
    else:
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        share = CycleConfig(cfg.clients // len(peers), cfg.concurrency // len(peers),
                            cfg.fast, cfg.queries // len(peers))
        procs = [ctx.Process(target=_one, args=(p.port, p.dsn, p.pid, share, f"{prefix}f{i}", out))
                 for i, p in enumerate(peers)]
        for p in procs:
            p.start()
        parts = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(30)
    db_cpu = (tree_cpu_s(db_pid) - db0) if db_pid else 0.0
    queries = sum(p["queries"] for p in parts)
    wall = max(p["wall"] for p in parts)
    lat = [x for p in parts for x in p["lat"]]
    cpu = sum(p["cpu"] for p in parts) + db_cpu
    return {"cycles_s": queries / wall, "p50": pct(lat, 50), "p99": pct(lat, 99),
            "cpu_us": cpu / queries * 1e6, "db_us": db_cpu / queries * 1e6,
            "ok": all(p["ok"] for p in parts), "errors": [e for p in parts for e in p["errors"]]}


async def _hot_claims(dsns: list[str], prefix: str) -> float:
    conns = [await psycopg.AsyncConnection.connect(dsns[i % len(dsns)], autocommit=True)
             for i in range(HOT_CLIENTS)]
    try:
        first = conns[0]
        for start in range(0, HOT_ITEMS, _BATCH):
            batch = "; ".join(f"QUEUE ADD PRIORITY 1 '{prefix}:k{i}' 'p'"
                              for i in range(start, start + _BATCH))
            await first.execute(batch)
        counter = iter(range(HOT_ITEMS))
        claims = 0
        stop = time.perf_counter() + HOT_S

        async def worker(conn: psycopg.AsyncConnection[Any]) -> None:
            nonlocal claims
            while time.perf_counter() < stop:
                key = next(counter, None)
                if key is None:  # every item claimed before the window closed
                    return
                cur = await conn.execute(f"QUEUE RETRIEVE CONCURRENCY 1000000 '{prefix}:k{key}'")
                rows = await cur.fetchall()
                claims += bool(rows and rows[0][0] is not None)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in conns))
        return claims / (time.perf_counter() - t0)
    finally:
        for c in conns:
            await c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--queries", type=int, default=1500)
    ap.add_argument("--quick", action="store_true",
                    help="300 queries; memory and one PostgreSQL front end only")
    args = ap.parse_args()
    if args.quick:
        args.queries = min(args.queries, 300)
    cfg = CycleConfig(args.clients, args.clients, False, args.queries)
    cluster = start_cluster()
    rows: list[tuple[str, dict[str, Any], float]] = []
    try:
        setups: list[tuple[str, list[str], bool]] = [
            ("memory", [], False),
            ("postgresql, 1 front end", [cluster.create_database("bench1")], True),
            ("postgresql, 2 front ends", [cluster.create_database("bench2")], True),
        ][: 2 if args.quick else 3]
        hand = cluster.create_database("handwritten")
        target = Target("postgres", "127.0.0.1", cluster.port, hand)
        asyncio.run(setup(target))
        pid = cluster.postmaster_pid()
        assert pid is not None
        run = run_cycle(target, pid, cfg, "hw")
        rows.append(("hand-written pg queue", {
            "cycles_s": run.queries / run.wall_s, "p50": pct(run.latencies_ms, 50),
            "p99": pct(run.latencies_ms, 99), "cpu_us": run.server_cpu_s / run.queries * 1e6,
            "db_us": run.server_cpu_s / run.queries * 1e6, "ok": run.check.ok,
            "errors": run.errors[:3]}, float("nan")))
        for name, dsns, over_pg in setups:
            n = 2 if "2 front" in name else 1
            peers = [start_cubequeue(*(["--store", dsns[0]] if over_pg else [])) for _ in range(n)]
            try:
                time.sleep(0.5)  # let the front ends finish their start (migration, LISTEN)
                cycle = _cycle(peers, cfg, f"b{len(rows)}", cluster if over_pg else None)
                claims = asyncio.run(_hot_claims([p.dsn for p in peers], f"hot{len(rows)}"))
                rows.append((name, cycle, claims))
            finally:
                for p in peers:
                    p.stop()
    finally:
        cluster.stop()
    print(f"QueryQueue cycle, {args.clients} clients, concurrency {args.clients}, "
          f"{args.queries} queries; hot prefix: {HOT_CLIENTS} clients for {HOT_S:.0f} s")
    print(f"{'store':26s} {'cycles/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} "
          f"{'CPU us/cycle':>13s} {'(db)':>7s} {'claims/s':>9s}")
    for name, c, claims in rows:
        flag = "" if c["ok"] and not c["errors"] else f"  CHECK FAILED {c['errors'][:1]}"
        print(f"{name:26s} {c['cycles_s']:9.0f} {c['p50']:8.1f} {c['p99']:8.1f} "
              f"{c['cpu_us']:13.0f} {c['db_us']:7.0f} {claims:9.0f}{flag}")
    cpu = {name: c["cpu_us"] for name, c, _ in rows}
    base = cpu["hand-written pg queue"]
    for name in ("postgresql, 1 front end", "postgresql, 2 front ends"):
        if name in cpu:
            print(f"{name}: {cpu[name] / base:.2f}x the hand-written queue's server CPU per "
                  "cycle (target <= 1.2x)")


if __name__ == "__main__":
    main()
