"""The QueryQueue cycle, normal and fast track, over any adapter.

Load is spread over ``procs`` processes (fork), each an event loop holding its share of
the C clients plus what Cube's QueryQueue runs beside them: one debounced reconciler
(concurrent triggers share one in-flight reconcile, a trigger during a reconcile runs it
once more) and a pool of background workers (``processQuery``). Every client and worker
has its own connection, opened, prepared and warmed up (one cycle per client on a
scratch prefix) before the measured window starts.

Per query: result lookup (a miss), ADD with a priority and a ~300 B payload (or the fast
track's add-and-claim), reconcile (triggered after each ADD and each ACK, in whichever
process), then a worker's MERGE_EXTRA ×2, HEARTBEAT, execute (``exec_ms``) and ACK with
a ~1 KB result; the client waits with a blocking wait (5 s timeout, retried after a
timeout as Cube's ContinueWaitError would be). The window closes when every client has
its results; all processes keep reconciling and working until then, since an item may be
claimed by any process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing as mp
import random
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.adapters import Adapter, Claim, Target, connect
from bench.check import Check, check_run
from bench.cpu import self_cpu_s, tree_cpu_s

__all__ = ["CycleConfig", "CycleRun", "run_cycle"]

WAIT_TIMEOUT_MS = 5000
WAIT_ATTEMPTS = 3
RUN_DEADLINE_S = 180.0
_FILLER = "x" * 1024


@dataclass(frozen=True, slots=True)
class CycleConfig:
    clients: int
    concurrency: int
    fast: bool
    queries: int
    procs: int = 0  # 0 = min(clients, 2)
    workers: int = 0  # per process; 0 = min(concurrency, 8)
    exec_ms: float = 0.0

    @property
    def mode(self) -> str:
        return "fast" if self.fast else "normal"

    def n_procs(self) -> int:
        return self.procs or min(self.clients, 2)

    def n_workers(self) -> int:
        return self.workers or min(self.concurrency, 8)


@dataclass(slots=True)
class CycleRun:
    system: str
    config: CycleConfig
    wall_s: float
    queries: int
    latencies_ms: list[float]
    add_to_claim_ms: list[float]
    rt: Counter[str]
    server_cpu_s: float
    client_cpu_s: float
    fast_claimed: int
    timeouts: int
    check: Check
    errors: list[str] = field(default_factory=list)
    #: mean round trips on the critical path from "add" to "execution starts"
    rt_add_to_exec: float = 0.0

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.errors

    @property
    def cycles_per_s(self) -> float:
        return self.queries / self.wall_s

    @property
    def rt_per_cycle(self) -> float:
        return sum(self.rt.values()) / self.queries

    @property
    def rt_enqueue_per_cycle(self) -> float:
        """All round trips spent enqueueing and claiming (every reconcile included)."""
        steps = ("add", "add_and_claim", "list", "retrieve", "claim")
        return sum(self.rt[s] for s in steps) / self.queries

    @property
    def server_cpu_us(self) -> float:
        return self.server_cpu_s / self.queries * 1e6

    @property
    def client_cpu_us(self) -> float:
        return self.client_cpu_s / self.queries * 1e6


def payload_for(path: str, priority: int) -> str:
    """~300 B, like a QueryDef: the query key, its SQL and options."""
    body = {"queryKey": [path, []], "priority": priority, "requestId": path,
            "query": "SELECT sum(amount) FROM orders WHERE created_at >= $1 GROUP BY 1 " * 3}  # fmt: skip
    return json.dumps(body)[:300]


def result_for(path: str) -> str:
    """~1 KB, carrying the path so the client can tell its result from another's."""
    return json.dumps({"path": path, "data": _FILLER[: 1024 - len(path) - 30]})


class Sim:
    """One process's share: clients, the debounced reconciler, the workers."""

    def __init__(self, recon: Adapter, workers: list[Adapter], cfg: CycleConfig) -> None:
        self.recon = recon
        self.workers = workers
        self.cfg = cfg
        self.prefix = ""
        self.trigger = asyncio.Event()
        self.work: asyncio.Queue[Claim] = asyncio.Queue()
        self.reset()

    def reset(self) -> None:
        self.latencies: list[float] = []
        self.added_at: dict[str, float] = {}
        self.claimed: list[tuple[str, float, int]] = []
        self.results: list[tuple[str, bool]] = []
        self.errors: list[str] = []
        self.fast_claimed = 0
        self.timeouts = 0

    def start_background(self) -> list[asyncio.Task[None]]:
        tasks = [asyncio.create_task(self._reconciler())]
        tasks += [asyncio.create_task(self._worker(w)) for w in self.workers]
        return tasks

    def _hand_over(self, claim: Claim) -> None:
        # critical path from add to execution start: the add itself + the claiming step
        self.claimed.append((claim.path, time.perf_counter(), 1 + claim.rts))
        self.work.put_nowait(claim)

    async def _reconciler(self) -> None:
        while True:
            await self.trigger.wait()
            self.trigger.clear()
            try:
                for claim in await self.recon.reconcile(self.prefix, self.cfg.concurrency):
                    self._hand_over(claim)
            except Exception as exc:  # a failing server command is a reportable error
                self.errors.append(f"reconcile: {exc!r}")

    async def _worker(self, a: Adapter) -> None:
        while True:
            claim = await self.work.get()
            try:
                await a.merge_extra(claim, json.dumps({"startQueryTime": int(time.time() * 1000)}))
                await a.merge_extra(claim, json.dumps({"cancelHandler": "queryCancel"}))
                await a.heartbeat(claim)
                if self.cfg.exec_ms:
                    await asyncio.sleep(self.cfg.exec_ms / 1000)
                if not await a.ack(claim, result_for(claim.path)):
                    self.errors.append(f"ACK of {claim.path} found no item")
            except Exception as exc:
                self.errors.append(f"worker on {claim.path}: {exc!r}")
            self.trigger.set()

    async def client(self, a: Adapter, paths: list[str], rnd: random.Random) -> None:
        cfg = self.cfg
        for path in paths:
            t0 = time.perf_counter()
            try:
                if await a.lookup(path) is not None:
                    self.errors.append(f"result lookup hit before ADD: {path}")
                priority = rnd.randint(0, 10)
                payload = payload_for(path, priority)
                self.added_at[path] = time.perf_counter()
                if cfg.fast:
                    qid, added, claim = await a.add_and_claim(
                        path, priority, payload, cfg.concurrency
                    )
                    if claim is not None:
                        self.fast_claimed += 1
                        self._hand_over(claim)
                    else:
                        self.trigger.set()
                else:
                    qid, added = await a.add(path, priority, payload)
                    self.trigger.set()
                if not added:
                    self.errors.append(f"ADD of a new key deduplicated: {path}")
                result = None
                for _ in range(WAIT_ATTEMPTS):
                    result = await a.wait(qid, path, WAIT_TIMEOUT_MS)
                    if result is not None:
                        break
                    self.timeouts += 1
                    self.trigger.set()
                    late = await a.lookup(path)
                    if late is not None:  # acked, yet the blocked client was never woken
                        self.errors.append(f"lost wake-up: {path} had its result stored")
                        result = late
                        break
            except Exception as exc:
                self.errors.append(f"client on {path}: {exc!r}")
                continue
            self.latencies.append((time.perf_counter() - t0) * 1000)
            if result is not None:
                self.results.append((path, f'"{path}"' in result))

    async def phase(self, prefix: str, clients: list[Adapter], paths: list[list[str]],
                    seed: int) -> None:  # fmt: skip
        self.prefix = prefix
        await asyncio.gather(
            *(self.client(a, p, random.Random(seed + i)) for i, (a, p) in
              enumerate(zip(clients, paths, strict=True)))
        )  # fmt: skip


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def _child_main(target: Target, cfg: CycleConfig, index: int, n_clients: int,
                      queries: list[int], prefix: str, sync: dict[str, Any]) -> None:  # fmt: skip
    out = sync["out"]
    clients = [await connect(target) for _ in range(n_clients)]
    recon = await connect(target)
    workers = [await connect(target) for _ in range(cfg.n_workers())]
    sim = Sim(recon, workers, cfg)
    background = sim.start_background()
    loop = asyncio.get_running_loop()
    try:
        warm_prefix = f"{prefix}-warm{index}"
        warm = [[f"{warm_prefix}:c{c}"] for c in range(n_clients)]
        await sim.phase(warm_prefix, clients, warm, seed=index)
        if sim.errors:
            raise RuntimeError(f"warm-up failed: {sim.errors[:3]}")
        await asyncio.sleep(0.05)  # let the last reconcile of the warm-up finish
        for a in (*clients, recon, *workers):
            a.rt.clear()
        sim.reset()
        paths = [[f"{prefix}:p{index}c{c}q{i}" for i in range(queries[c])] for c in range(n_clients)]
        await loop.run_in_executor(None, sync["ready"].wait)
        await loop.run_in_executor(None, sync["go"].wait)
        cpu0 = self_cpu_s()
        await sim.phase(prefix, clients, paths, seed=1000 * (index + 1))
        cpu1 = self_cpu_s()
        out.put(("done", index, cpu1 - cpu0))
        await loop.run_in_executor(None, sync["release"].wait)
        rt: Counter[str] = Counter()
        for a in (*clients, recon, *workers):
            rt.update(a.rt)
        out.put(("records", index, {
            "submitted": [p for ps in paths for p in ps],
            "latencies": sim.latencies, "added_at": sim.added_at, "claimed": sim.claimed,
            "results": sim.results, "errors": sim.errors, "rt": dict(rt),
            "fast_claimed": sim.fast_claimed, "timeouts": sim.timeouts,
        }))  # fmt: skip
    finally:
        for t in background:
            t.cancel()
        for a in (*clients, recon, *workers):
            with contextlib.suppress(Exception):
                await a.close()


def _child(target: Target, cfg: CycleConfig, index: int, n_clients: int, queries: list[int],
           prefix: str, sync: dict[str, Any]) -> None:  # fmt: skip
    try:
        import uvloop

        uvloop.run(_child_main(target, cfg, index, n_clients, queries, prefix, sync))
    except BaseException:
        sync["out"].put(("error", index, traceback.format_exc()))
        # unblock the parent's barrier so it can report instead of hanging
        with contextlib.suppress(Exception):
            sync["ready"].abort()


def run_cycle(target: Target, server_pid: int, cfg: CycleConfig, prefix: str) -> CycleRun:
    """One measured run: ``cfg.queries`` queries from ``cfg.clients`` clients."""
    ctx = mp.get_context("fork")
    n_procs = cfg.n_procs()
    clients_per = _split(cfg.clients, n_procs)
    queries_per_client = _split(cfg.queries, cfg.clients)
    sync: dict[str, Any] = {
        "ready": ctx.Barrier(n_procs + 1), "go": ctx.Event(), "release": ctx.Event(),
        "out": ctx.Queue(),
    }  # fmt: skip
    procs, start = [], 0
    for i, n in enumerate(clients_per):
        args = (target, cfg, i, n, queries_per_client[start : start + n], prefix, sync)
        procs.append(ctx.Process(target=_child, args=args, daemon=True))
        start += n
    for p in procs:
        p.start()
    out = sync["out"]
    errors: list[str] = []
    try:
        sync["ready"].wait(timeout=120)
    except Exception:
        errors.append("a load process failed before the start")
        for _ in procs:
            try:
                kind, index, data = out.get(timeout=5)
            except Exception:
                break
            if kind == "error":
                errors.append(f"load process {index}: {data}")
    cpu0, t0 = tree_cpu_s(server_pid), time.perf_counter()
    sync["go"].set()
    client_cpu, done, records = 0.0, 0, {}
    deadline = time.monotonic() + RUN_DEADLINE_S
    while done < n_procs and not errors:
        try:
            kind, index, data = out.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            errors.append(f"run did not finish within {RUN_DEADLINE_S:.0f} s")
            break
        if kind == "done":
            done += 1
            client_cpu += data
        elif kind == "error":
            errors.append(f"load process {index}: {data.strip().splitlines()[-1]}\n{data}")
    t1, cpu1 = time.perf_counter(), tree_cpu_s(server_pid)
    sync["release"].set()
    while len(records) < n_procs and not errors:
        try:
            kind, index, data = out.get(timeout=30)
        except Exception:
            errors.append("load process did not report")
            break
        if kind == "records":
            records[index] = data
        elif kind == "error":
            errors.append(f"load process {index}: {data}")
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    return _assemble(target.system, cfg, t1 - t0, cpu1 - cpu0, client_cpu, records, errors)


def _assemble(system: str, cfg: CycleConfig, wall: float, server_cpu: float,
              client_cpu: float, records: dict[int, Any], errors: list[str]) -> CycleRun:  # fmt: skip
    submitted: list[str] = []
    latencies: list[float] = []
    added_at: dict[str, float] = {}
    claimed: list[tuple[str, float, int]] = []
    results: list[tuple[str, bool]] = []
    rt: Counter[str] = Counter()
    fast_claimed = timeouts = 0
    for rec in records.values():
        submitted += rec["submitted"]
        latencies += rec["latencies"]
        added_at.update(rec["added_at"])
        claimed += rec["claimed"]
        results += rec["results"]
        errors += rec["errors"]
        rt.update(rec["rt"])
        fast_claimed += rec["fast_claimed"]
        timeouts += rec["timeouts"]
    add_to_claim = [(t - added_at[p]) * 1000 for p, t, _ in claimed if p in added_at]
    chain = [n for _, _, n in claimed]
    check = check_run(submitted, (p for p, _, _ in claimed), results)
    return CycleRun(
        system, cfg, wall, len(submitted) or cfg.queries, latencies, add_to_claim, rt,
        server_cpu, client_cpu, fast_claimed, timeouts, check, errors,
        sum(chain) / len(chain) if chain else 0.0,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.cycle [-c 1 8] [--mode normal fast] [--systems cubequeue redis]
    [--ab BASE]``: short cycle runs, the systems alternated per repetition on fresh
    servers; prints server CPU µs per cycle, medians and ratios. ``--ab BASE`` is
    ``python -m bench.ab BASE`` with these cycle options and no round-trip runs."""
    import argparse
    import asyncio
    import statistics

    from bench import peers
    from bench.adapters import setup

    ap = argparse.ArgumentParser(prog="python -m bench.cycle")
    ap.add_argument("-c", "--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--mode", nargs="+", choices=("normal", "fast"), default=["normal", "fast"])
    ap.add_argument("--systems", nargs="+", default=["cubequeue", "redis"])
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ab", metavar="BASE", help="bench.ab: BASE against the installed tree")
    args = ap.parse_args(argv)
    if args.ab:
        from bench import ab

        ab.main([args.ab, "--reps", str(args.reps), "--concurrency", str(args.concurrency),
                 "--queries", str(args.queries), "-c", *map(str, args.clients),
                 "--mode", *args.mode, "--wire-modes"])  # fmt: skip
        return
    starters = {"cubequeue": peers.start_cubequeue, "redis": peers.start_redis,
                "postgres": peers.start_postgres}  # fmt: skip
    sides = list(args.systems)
    for clients in args.clients:
        for mode in args.mode:
            cfg = CycleConfig(clients, args.concurrency, mode == "fast", args.queries)
            figures: dict[str, list[float]] = {s: [] for s in sides}
            for rep in range(args.reps):
                order = sides if rep % 2 == 0 else sides[::-1]
                for side in order:
                    peer = starters[side]()
                    try:
                        target = Target(side, "127.0.0.1", peer.port, peer.dsn)
                        asyncio.run(setup(target))
                        run = run_cycle(target, peer.pid, cfg, f"cli{rep}{side}")
                    finally:
                        peer.stop()
                    if run.ok:
                        figures[side].append(run.server_cpu_us)
                    print(f"C={clients} {mode:6} {side:9} {run.server_cpu_us:7.0f} µs/cycle "
                          f"{run.cycles_per_s:6.0f}/s RT {run.rt_per_cycle:.2f}"
                          f"{'' if run.ok else ' REJECTED ' + repr(run.errors[:2])}", flush=True)
            med = {s: statistics.median(v) if v else float("nan") for s, v in figures.items()}
            first = med[sides[0]]
            ratios = " ".join(f"{s} {med[s]:.0f} ({med[s] / first:.2f}x)" for s in sides)
            print(f"== C={clients} conc={args.concurrency} {mode}: median server µs/cycle "
                  f"{ratios} [ratios to {sides[0]}]", flush=True)


if __name__ == "__main__":
    main()
