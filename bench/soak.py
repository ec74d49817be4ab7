"""Soak benchmark: does the server's memory stay flat under a steady Cube load?

The load of cube-js/cube#7545: several API nodes (``--nodes``, default 4), each with its
own QueryQueue clients (``--clients`` per node) issuing ``--rate`` queries a second each
(10-50 in that report), plus the node's reconciler and workers, all running Cube's cycle
through ``bench/cycle.py``'s :class:`~bench.cycle.Sim` and the cubequeue adapter (result
lookup, ADD, reconcile/claim, MERGE_EXTRA x2, HEARTBEAT, ACK, blocking wait). Every query
has a fresh key, as Cube's query keys do. The run is bounded (``--seconds``, default 600;
``--quick``: 60). The server's RSS is read from ``/proc`` every ``--sample`` seconds (10);
the report gives the slope (least squares, MiB per minute) and max - min over the second
half, where a leak shows and start-up growth does not. Flat: |slope| < 1 MiB/min.

Acknowledged results live ``--results-expire`` (60 s) and system.queue_log keeps 10,000
rows, so memory rightly grows for the first minute or two; a 10-minute run is past that
by its second half. ``--quick`` shortens both (5 s, 1,000 rows) so that 60 s suffice.

The machine is shared, so throughput figures are noisy; RSS is what this measures.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from bench.adapters import Adapter, Target, connect
from bench.cycle import CycleConfig, Sim
from cubequeue.server.pytest_plugin import start_cubequeue

FLAT_MIB_PER_MIN = 1.0


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points, in MiB per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return 0.0 if den == 0 else 60 * sum((t - mx) * (v - my) for t, v in points) / den


async def _paced(sim: Sim, a: Adapter, node: int, client: int, rate: float, until: float,
                 done: list[int]) -> None:
    rnd = random.Random(node * 1000 + client)
    period = 1 / rate
    tick = time.monotonic() + rnd.random() * period
    n = 0
    while tick < until:
        delay = tick - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await sim.client(a, [f"{sim.prefix}:c{client}q{n}"], rnd)
        n += 1
        done[0] += 1
        tick = max(tick + period, time.monotonic() - period)  # no burst after a slow one


async def _node(target: Target, node: int, clients: int, rate: float, until: float,
                done: list[int]) -> list[str]:
    cfg = CycleConfig(clients=clients, concurrency=4, fast=False, queries=0, workers=4)
    recon = await connect(target)
    workers = [await connect(target) for _ in range(cfg.n_workers())]
    users = [await connect(target) for _ in range(clients)]
    sim = Sim(recon, workers, cfg)
    sim.prefix = f"soak{node}"
    background = sim.start_background()
    try:
        await asyncio.gather(*(_paced(sim, a, node, i, rate, until, done)
                               for i, a in enumerate(users)))
    finally:
        for task in background:
            task.cancel()
        for a in (recon, *workers, *users):
            await a.close()
    return sim.errors


async def _sample(pid: int, every: float, until: float, start: float,
                  out: list[tuple[float, float]], done: list[int]) -> None:
    while True:
        now = time.monotonic()
        out.append((now - start, rss_mib(pid)))
        print(f"  t={now - start:6.0f} s  RSS {out[-1][1]:7.1f} MiB  queries {done[0]}", flush=True)
        if now + every > until:
            return
        await asyncio.sleep(every)


async def _run(args: argparse.Namespace) -> bool:
    extra = ["--results-expire", str(args.results_expire)] if args.results_expire else []
    if args.quick:
        extra += ["--queue-log-size", "1000"]
    server = start_cubequeue("--log-level", "warning", *extra)
    try:
        target = Target("cubequeue", server.host, server.port, server.dsn)
        start = time.monotonic()
        until = start + args.seconds
        done = [0]
        samples: list[tuple[float, float]] = []
        print(f"soak: {args.nodes} API nodes x {args.clients} clients x {args.rate:g} q/s "
              f"for {args.seconds:g} s; server RSS every {args.sample:g} s")
        sampler = asyncio.create_task(_sample(server.process.pid, args.sample, until, start,
                                              samples, done))
        errors = await asyncio.gather(*(_node(target, i, args.clients, args.rate, until, done)
                                        for i in range(args.nodes)))
        await sampler
        samples.append((time.monotonic() - start, rss_mib(server.process.pid)))
    finally:
        server.stop()
    wall = samples[-1][0]
    half = [p for p in samples if p[0] >= wall / 2]
    values = [v for _, v in half]
    slope = slope_per_min(half)
    flat = abs(slope) < FLAT_MIB_PER_MIN
    failures = [e for node in errors for e in node]
    print(f"queries: {done[0]} in {wall:.0f} s ({done[0] / wall:.0f}/s), errors: {len(failures)}")
    for e in failures[:5]:
        print(f"  error: {e}")
    print(f"second half RSS: slope {slope:+.2f} MiB/min, max-min {max(values) - min(values):.1f} "
          f"MiB ({min(values):.1f}..{max(values):.1f}) over {len(half)} samples: "
          f"{'flat' if flat else 'NOT FLAT'} (|slope| < {FLAT_MIB_PER_MIN:g} MiB/min)")
    return flat and not failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="60 s instead of 600 s")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--clients", type=int, default=3, help="QueryQueue clients per node")
    parser.add_argument("--rate", type=float, default=10.0, help="queries per second per client")
    parser.add_argument("--sample", type=float, default=10.0, help="RSS sampling period, s")
    parser.add_argument("--results-expire", type=int, default=None,
                        help="server --results-expire, s (default: the server's 60; --quick: 5)")
    args = parser.parse_args()
    if args.quick and args.results_expire is None:
        args.results_expire = 5
    args.seconds = args.seconds or (60.0 if args.quick else 600.0)
    ok = asyncio.run(_run(args))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
