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

``--ab BASE [--reps 3]`` is an alternated A/B of the PostgreSQL store (one front end):
each repetition runs the hand-written queue, BASE's front end and the work tree's, each in
a fresh database of one cluster (reversed order every other repetition), and reports each
side's CPU per cycle over the hand-written queue's *of the same repetition* (BASE is a git
revision or a source tree, as for :mod:`bench.ab`). ``--stats`` loads pg_stat_statements
(nested statements too) and ``track_functions=all`` into the cluster and prints, after a
one-front-end run of the work tree, what the database ran per cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import signal
import statistics
import time
from pathlib import Path
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


def _hand_written(cluster: Cluster, cfg: CycleConfig, name: str) -> dict[str, Any]:
    """The cycle against the hand-written queue in a new database ``name``."""
    target = Target("postgres", "127.0.0.1", cluster.port, cluster.create_database(name))
    asyncio.run(setup(target))
    pid = cluster.postmaster_pid()
    assert pid is not None
    run = run_cycle(target, pid, cfg, "hw")
    return {"cycles_s": run.queries / run.wall_s, "p50": pct(run.latencies_ms, 50),
            "p99": pct(run.latencies_ms, 99), "cpu_us": run.server_cpu_s / run.queries * 1e6,
            "db_us": run.server_cpu_s / run.queries * 1e6, "ok": run.check.ok,
            "errors": run.errors[:3]}


def _front_end(cluster: Cluster, cfg: CycleConfig, name: str, tree: Path | None = None,
               n: int = 1) -> dict[str, Any]:
    """The cycle against ``n`` front ends (imported from ``tree``) over a new database."""
    dsn = cluster.create_database(name)
    peers = [start_cubequeue("--store", dsn, tree=tree) for _ in range(n)]
    try:
        time.sleep(0.5)  # let the front ends finish their start (migration, LISTEN)
        return _cycle(peers, cfg, name, cluster)
    finally:
        for p in peers:
            p.stop()


def _with_stats(cluster: Cluster) -> None:
    """Restart ``cluster`` with pg_stat_statements (nested statements) and function timing."""
    with open(cluster.data / "postgresql.conf", "a") as conf:
        conf.write("shared_preload_libraries = 'pg_stat_statements'\n"
                   "pg_stat_statements.track = 'all'\ntrack_functions = 'all'\n")
    proc = cluster.proc
    assert proc is not None
    cluster._signal(signal.SIGINT)  # the bench's own cluster, restarted in place
    proc.wait(timeout=60)
    cluster._start()


def _print_stats(cluster: Cluster, db: str, queries: int) -> None:
    cluster.run_psql("create extension if not exists pg_stat_statements", db)
    print(f"database {db}: per cycle ({queries} cycles), statements by total time")
    print(cluster.run_psql(
        f"select round(calls::numeric / {queries}, 2) as per_cycle, "
        f"round((total_exec_time * 1000 / {queries})::numeric, 1) as us_per_cycle, "
        "round((total_exec_time * 1000 / greatest(calls, 1))::numeric, 1) as us_per_call, "
        "rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) as query "
        "from pg_stat_statements s join pg_database d on d.oid = s.dbid "
        f"where d.datname = '{db}' order by total_exec_time desc limit 40", db))
    print(cluster.run_psql(
        f"select funcname, round(calls::numeric / {queries}, 2) as per_cycle, "
        f"round((self_time * 1000 / {queries})::numeric, 1) as self_us_per_cycle, "
        f"round((total_time * 1000 / {queries})::numeric, 1) as total_us_per_cycle "
        "from pg_stat_user_functions order by self_time desc", db))
    print(cluster.run_psql(
        "select relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, seq_scan, idx_scan "
        "from pg_stat_user_tables order by relname", db))


def _ab(base_spec: str, new_spec: str | None, reps: int, cfg: CycleConfig,
        stats: bool) -> None:
    """Alternated A/B of one front end, each side over the hand-written queue (module doc)."""
    from bench.ab import prepared_tree

    ratios: dict[str, list[float]] = {"base": [], "new": []}
    cpu: dict[str, list[float]] = {"hand": [], "base": [], "new": []}
    with prepared_tree(base_spec) as base, prepared_tree(new_spec) as new:
        cluster = start_cluster()
        try:
            if stats:
                _with_stats(cluster)
            for rep in range(reps):
                order = ["hand", "base", "new"] if rep % 2 == 0 else ["new", "base", "hand"]
                got: dict[str, dict[str, Any]] = {}
                for side in order:
                    name = f"ab{rep}{side}"
                    got[side] = (_hand_written(cluster, cfg, name) if side == "hand" else
                                 _front_end(cluster, cfg, name, base if side == "base" else new))
                    c = got[side]
                    flag = "" if c["ok"] and not c["errors"] else f"  CHECK FAILED {c['errors'][:1]}"
                    print(f"#{rep + 1} {side:5s} {c['cpu_us']:8.0f} us/cycle (db {c['db_us']:6.0f})"
                          f" {c['cycles_s']:6.0f} cycles/s{flag}", flush=True)
                    cpu[side].append(c["cpu_us"])
                for side in ("base", "new"):
                    ratios[side].append(got[side]["cpu_us"] / got["hand"]["cpu_us"])
                print(f"#{rep + 1} base {ratios['base'][-1]:.2f}x, new {ratios['new'][-1]:.2f}x "
                      "the hand-written queue", flush=True)
        finally:
            cluster.stop()
    print(f"A/B over {reps} repetitions ({cfg.clients} clients, {cfg.queries} queries)")
    for side in ("hand", "base", "new"):
        print(f"{side:5s} CPU us/cycle: median {statistics.median(cpu[side]):.0f} "
              f"({min(cpu[side]):.0f}-{max(cpu[side]):.0f})")
    for side in ("base", "new"):
        r = ratios[side]
        print(f"{side:5s} / hand-written: median {statistics.median(r):.2f}x "
              f"({min(r):.2f}-{max(r):.2f})")
    pair = [n / b for n, b in zip(cpu["new"], cpu["base"], strict=True)]
    print(f"new / base: median {statistics.median(pair):.2f} ({min(pair):.2f}-{max(pair):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--queries", type=int, default=1500)
    ap.add_argument("--quick", action="store_true",
                    help="300 queries; memory and one PostgreSQL front end only")
    ap.add_argument("--ab", metavar="BASE", help="alternated A/B of BASE against the work tree")
    ap.add_argument("--new", metavar="NEW", help="the A/B's other side (default: the work tree)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--stats", action="store_true",
                    help="print the database's statements per cycle (pg_stat_statements)")
    args = ap.parse_args()
    if args.quick:
        args.queries = min(args.queries, 300)
    cfg = CycleConfig(args.clients, args.clients, False, args.queries)
    if args.ab:
        _ab(args.ab, args.new, args.reps, cfg, args.stats)
        return
    if args.stats:
        cluster = start_cluster()
        try:
            _with_stats(cluster)
            hw = _hand_written(cluster, cfg, "handwritten")
            print(f"hand-written {hw['cpu_us']:.0f} us/cycle", flush=True)
            _print_stats(cluster, "handwritten", args.queries)
            one = _front_end(cluster, cfg, "bench1")
            print(f"1 front end {one['cpu_us']:.0f} us/cycle (db {one['db_us']:.0f}), "
                  f"{one['cpu_us'] / hw['cpu_us']:.2f}x", flush=True)
            _print_stats(cluster, "bench1", args.queries)
        finally:
            cluster.stop()
        return
    cluster = start_cluster()
    rows: list[tuple[str, dict[str, Any], float]] = []
    try:
        setups: list[tuple[str, list[str], bool]] = [
            ("memory", [], False),
            ("postgresql, 1 front end", [cluster.create_database("bench1")], True),
            ("postgresql, 2 front ends", [cluster.create_database("bench2")], True),
        ][: 2 if args.quick else 3]
        rows.append(("hand-written pg queue", _hand_written(cluster, cfg, "handwritten"),
                     float("nan")))
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
