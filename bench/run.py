"""``python -m bench.run [--quick]``: cubequeue, PostgreSQL 15 and Redis 7, one run.

Starts all three servers on loopback, and the floor server (bench/floor.py: the least a
Python asyncio server can spend on a ``SELECT 1`` round trip), runs the QueryQueue cycle
matrix (C ∈ {1, 8, 64}, concurrency ∈ {2, 64}, normal and fast track), Cube's own
QueryQueue from npm against Redis and over cubequeue's WebSocket (bench/cube_queue.py,
10 s per run), the steady-state pgbench wire floor (``SELECT 1`` against cubequeue, the
floor and PostgreSQL alternated run by run, with Redis's ``PING`` beside them), the
blocking wake latency, profiles the cubequeue server, runs the storage and grammar
micro-benchmarks, writes bench/RESULTS.md and prints the ratio lines.
``--quick`` (``make bench-quick``, about two minutes): C=8 and C=1 at concurrency 2, both
modes, all three systems, Cube's QueryQueue for 3 s per configuration, SELECT 1 at 1 and
64 clients (and the floor's, and Redis's PING) and idle wake latency, one run each; prints
the ratio lines and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from bench import peers
from bench.adapters import Target, setup
from bench.cube_queue import CONFIGS as QQ_CONFIGS
from bench.cube_queue import QQConfig, QQRun, deps_missing, run_queryqueue
from bench.cycle import CycleConfig, CycleRun, run_cycle
from bench.profile import profile_cycle
from bench.redis_ping import have_redis_benchmark, run_redis_ping
from bench.results import Report, machine_info, ratio_lines, write_results
from bench.wake import WakeRun, measure_wake, start_busy
from bench.wire import (
    CLIENTS,
    MODES,
    SELECT1_CLIENTS,
    WireRun,
    Workload,
    cubequeue_workloads,
    postgres_workloads,
    run_pgbench,
)

ROOT = Path(__file__).resolve().parent
QUERIES = {1: 200, 8: 600, 64: 1024}
MAX_ATTEMPTS = 3
#: pgbench -T per run (bench/wire.py measures from 1 s in to 0.25 s before the end)
WIRE_SELECT1_S = 5
WIRE_STATEMENT_S = 3
WIRE_QUICK_S = 3
#: Cube QueryQueue window per run (bench/cube_queue.py)
QQ_SECONDS = 10.0
QQ_QUICK_S = 3.0
QQ_CONCURRENCY = (2, 64)
R = TypeVar("R", CycleRun, WireRun, WakeRun, QQRun)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _valid(make: Callable[[int], R], label: str, rejected: list[str]) -> R | None:
    """A run with errors is not a result: record why, and run it again (a few times)."""
    for attempt in range(MAX_ATTEMPTS):
        run = make(attempt)
        if run.ok:
            return run
        errs = list(getattr(getattr(run, "check", None), "errors", ())) + run.errors
        rejected.append(f"{label} (attempt {attempt + 1}): {'; '.join(errs)[:400]}")
        _log(f"  rejected {label}: {'; '.join(errs)[:200]}")
    return None


def _start_all(systems: tuple[str, ...]) -> dict[str, peers.Peer]:
    started: dict[str, peers.Peer] = {}
    starters = {"cubequeue": peers.start_cubequeue, "postgres": peers.start_postgres,
                "redis": peers.start_redis, "floor": peers.start_floor}  # fmt: skip
    try:
        for name in systems:
            started[name] = starters[name]()
    except Exception:
        for p in started.values():
            p.stop()
        raise
    return started


def _target(peer: peers.Peer) -> Target:
    return Target(peer.name, "127.0.0.1", peer.port, peer.dsn)


def _cycles(report: Report, ps: dict[str, peers.Peer], configs: list[tuple[int, int]]) -> None:
    for clients, conc in configs:
        for mode in ("normal", "fast"):
            cfg = CycleConfig(clients, conc, mode == "fast", QUERIES[clients])
            for rep in range(report.reps):
                for system in report.systems:  # interleaved: drift hits all alike
                    key = (system, clients, conc, mode)
                    label = f"cycle {system} C={clients} conc={conc} {mode} #{rep + 1}"
                    peer = ps[system]

                    base = f"c{clients}x{conc}{mode[0]}r{rep}"

                    def make(attempt: int, peer: peers.Peer = peer, base: str = base,
                             cfg: CycleConfig = cfg) -> CycleRun:  # fmt: skip
                        return run_cycle(_target(peer), peer.pid, cfg, f"{base}a{attempt}")

                    run = _valid(make, label, report.rejected)
                    if run is not None:
                        report.cycle.setdefault(key, []).append(run)
            for system in report.systems:
                runs = report.cycle.get((system, clients, conc, mode), [])
                if runs:
                    r = runs[0]
                    _log(f"cycle C={clients} conc={conc} {mode:6} {system:9} "
                         f"{r.cycles_per_s:7.0f}/s server {r.server_cpu_us:6.0f} µs/cycle "
                         f"RT {r.rt_per_cycle:.2f}")  # fmt: skip


def _select1_plan(quick: bool) -> tuple[tuple[str, ...], tuple[int, ...], int]:
    """(modes, clients, seconds) of the ``SELECT 1`` round trip, which carries the
    targets: every mode, 1/16/64 clients, the longest runs, every repetition."""
    if quick:
        return ("extended",), (1, 64), WIRE_QUICK_S
    return MODES, SELECT1_CLIENTS, WIRE_SELECT1_S


def _record(report: Report, label: str, make: Callable[[], WireRun]) -> None:
    run = _valid(lambda _attempt: make(), label, report.rejected)
    if run is not None:
        report.wire.setdefault((run.system, run.name, run.mode, run.clients), []).append(run)
        _log(f"{label:60} {run.tps:8.0f}/s {run.us_per_statement:6.1f} µs/round trip")


def _round_trips(report: Report, ps: dict[str, peers.Peer], quick: bool) -> None:
    """``SELECT 1`` against cubequeue, the floor and PostgreSQL, and Redis's ``PING``:
    within each (mode, clients) the systems alternate run by run (the order reversed on
    every other repetition), so drift on a shared machine hits all of them alike and each
    ratio to the floor comes from neighbouring runs."""
    systems = [s for s in ("cubequeue", "floor", "postgres") if s in ps]
    ping = "redis" in ps and have_redis_benchmark()
    if "redis" in ps and not ping:
        report.rejected.append("Redis PING round trip not run: redis-benchmark is missing "
                               "(Debian's redis-tools; make bench-deps)")  # fmt: skip
    modes, clients, seconds = _select1_plan(quick)
    reps = 1 if quick else report.reps
    for c in clients:
        for mode in modes:
            for rep in range(reps):
                for system in systems if rep % 2 == 0 else systems[::-1]:
                    peer = ps[system]
                    w = Workload(system, "SELECT 1", "SELECT 1", "SELECT 1")
                    _record(report, f"pgbench {system} SELECT 1 -M {mode} -c {c} #{rep + 1}",
                            partial(run_pgbench, peer, w, mode, c, seconds))  # fmt: skip
        if ping:
            for rep in range(reps):
                _record(report, f"redis-benchmark PING -c {c} #{rep + 1}",
                        partial(run_redis_ping, ps["redis"], c, seconds))  # fmt: skip


def _wire(report: Report, ps: dict[str, peers.Peer], quick: bool) -> None:
    """The round trips, then (full runs) the other statements, once per configuration
    for 3 s (a 1.75 s steady window)."""
    _round_trips(report, ps, quick)
    if quick:
        return
    for system in ("cubequeue", "postgres"):
        if system not in ps:
            continue
        peer = ps[system]
        maker = cubequeue_workloads if system == "cubequeue" else postgres_workloads
        for w in [w for w in maker(peer.dsn) if w.name != "SELECT 1"]:
            for mode in MODES:
                for c in CLIENTS:
                    _record(report, f"pgbench {peer.name} {w.name} -M {mode} -c {c}",
                            partial(run_pgbench, peer, w, mode, c, WIRE_STATEMENT_S))


def _queryqueue(report: Report, ps: dict[str, peers.Peer], quick: bool) -> None:
    """Cube's QueryQueue from npm over the WebSocket (bench/cube_queue.py), interleaved."""
    missing = deps_missing()
    if missing:
        report.rejected.append(f"Cube QueryQueue bench not run: {missing}")
        _log(f"  skipped the Cube QueryQueue bench: {missing}")
        return
    seconds = QQ_QUICK_S if quick else QQ_SECONDS
    for conc in QQ_CONCURRENCY:
        for rep in range(1 if quick else report.reps):
            for system, line, fast in QQ_CONFIGS:
                if system not in ps:
                    continue
                cfg = QQConfig(system, line, fast, conc)
                base = f"{system[0]}{line.replace('.', '')}{'f' if fast else 'n'}c{conc}r{rep}"

                def make(attempt: int, peer: peers.Peer = ps[system], cfg: QQConfig = cfg,
                         base: str = base) -> QQRun:  # fmt: skip
                    return run_queryqueue(peer, cfg, seconds, f"{base}a{attempt}")

                run = _valid(make, f"QueryQueue {cfg.label} conc={conc} #{rep + 1}",
                             report.rejected)  # fmt: skip
                if run is not None:
                    report.queryqueue.setdefault((cfg.label, conc), []).append(run)
                    _log(f"QueryQueue conc={conc:2} {cfg.label:22} {run.qps:6.0f} q/s server "
                         f"{run.server_us_per_query:6.0f} µs/q nodes "
                         f"{run.client_us_per_query:6.0f} µs/q p50 {run.p50_ms:.1f} ms")  # fmt: skip


def _wake(report: Report, ps: dict[str, peers.Peer], quick: bool) -> None:
    n = 100 if quick else 150
    for busy in (False,) if quick else (False, True):
        for system in report.systems:
            peer = ps[system]
            target = _target(peer)
            load = start_busy(target, peer.pid) if busy else None
            try:
                for rep in range(report.reps):
                    label = f"wake {system} {'busy' if busy else 'idle'} #{rep + 1}"
                    run = _valid(lambda a, t=target, r=rep, b=busy:
                                 measure_wake(t, n, f"wake{int(b)}r{r}a{a}", b),
                                 label, report.rejected)  # fmt: skip
                    if run is not None:
                        report.wake.setdefault((system, busy), []).append(run)
            finally:
                if load is not None:
                    proc, stop = load
                    stop.set()
                    proc.join(120)
                    if proc.is_alive():
                        proc.kill()
            runs = report.wake.get((system, busy), [])
            if runs:
                s = sorted(runs[0].samples_ms)
                _log(f"wake {system:9} {'busy' if busy else 'idle'}: p50 {s[len(s) // 2]:.3f} ms "
                     f"p99 {s[int(len(s) * 0.99)]:.3f} ms")  # fmt: skip


def _extra(name: str, args: list[str], timeout: int) -> str:
    script = ROOT / name
    if not script.exists():
        return f"({name} does not exist yet)"
    try:
        proc = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT.parent)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"({name} did not finish within {timeout} s)"
    out = proc.stdout + (f"\n[stderr]\n{proc.stderr}" if proc.returncode else "")
    return f"$ python bench/{name} {' '.join(args)}\n{out}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=0, help="runs per configuration (default 3)")
    ap.add_argument("--out", type=Path, default=None, help="default bench/RESULTS.md (full)")
    ap.add_argument("--no-extras", action="store_true", help="skip storage/grammar benches")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    systems = tuple(s for s, ok in (("cubequeue", True), ("postgres", peers.have_postgres()),
                                    ("redis", peers.have_redis())) if ok)  # fmt: skip
    reps = args.reps or 3
    _log(f"starting {', '.join(systems)} and the floor server")
    ps = _start_all((*systems, "floor"))
    try:
        versions = {f"{p.name} version": p.version for p in ps.values()}
        report = Report(dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), args.quick,
                        reps, systems, machine_info(versions))  # fmt: skip
        import asyncio

        for system in systems:  # the floor answers SELECT 1 only: no queue to set up
            asyncio.run(setup(_target(ps[system])))
        configs = [(8, 2), (1, 2)] if args.quick else [(c, k) for c in (1, 8, 64) for k in (2, 64)]
        _cycles(report, ps, configs)
        _queryqueue(report, ps, args.quick)
        _wire(report, ps, args.quick)
        _wake(report, ps, args.quick)
        if not args.quick:
            cfg = CycleConfig(8, 2, False, QUERIES[8])
            report.profile_config = "the cycle at C=8, concurrency 2, normal path"
            _log("profiling the cubequeue server (py-spy)")
            report.profile = profile_cycle(_target(ps["cubequeue"]), ps["cubequeue"].pid, cfg)
    finally:
        for p in ps.values():
            p.stop()
    if not args.quick and not args.no_extras:
        _log("storage_scale.py --quick")
        report.extras["Storage scale (bench/storage_scale.py)"] = _extra(
            "storage_scale.py", ["--quick"], 400)
        _log("grammar.py")
        report.extras["Grammar (bench/grammar.py)"] = _extra("grammar.py", [], 200)
        _log("startup.py")
        report.extras["Start-up (bench/startup.py: < 1 s)"] = _extra(
            "startup.py", ["--runs", "5"], 200)
    report.duration_s = time.perf_counter() - started
    out = args.out or (None if args.quick else ROOT / "RESULTS.md")
    if out is not None:
        notes = ROOT / "RESULTS-notes.md"
        if notes.exists():
            report.notes.append(notes.read_text())
        write_results(report, out)
        _log(f"wrote {out}")
    print("\n".join(ratio_lines(report)))
    if report.rejected:
        print(f"{len(report.rejected)} runs rejected by the correctness check (see RESULTS.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
