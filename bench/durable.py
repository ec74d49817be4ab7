"""Durable mode over the wire: the QueryQueue cycle (``bench/cycle.py``) against cubequeue
in memory and with ``--data-dir`` under ``--fsync no|everysec|always``, beside Redis with
``appendfsync everysec`` and ``always`` and PostgreSQL with ``synchronous_commit on``, in
one run; then the recovery time at 10^6 queued items.

Usage: ``python -m bench.durable [--quick] [--reps N] [--items N] [--in-process
[--pre-parsed]]``

``--in-process``: the same QueryQueue steps (ADD, RETRIEVE, MERGE_EXTRA, HEARTBEAT, ACK,
RESULT; parsed per statement, as clients send text) run by 64 coroutines straight against
the store, memory and each ``--fsync`` alternating rep by rep: process CPU per cycle (the
loop and the writer thread), the figure the wire runs add their protocol costs to.
``--pre-parsed`` parses the statements ahead and runs them from one client: the store's
own cost per cycle, where durable mode's share is not drowned by the parser's.

Per system: server CPU per cycle (the server's whole process tree, so cubequeue's writer
thread and Redis' fsync thread count) and the p99 of a query's latency (submit to result).
Runs are interleaved across systems (drift on the shared machine hits all alike) and the
median over ``--reps`` is printed; compare ratios within one run, not absolute figures.

Each peer starts as ``bench/peers.py`` starts it; the persistence settings are then
switched on at runtime: Redis ``CONFIG SET appendonly yes`` + ``appendfsync`` (waiting out
the initial AOF rewrite), PostgreSQL ``ALTER ROLE … SET synchronous_commit = on`` (a role
setting beats the server's ``-c synchronous_commit=off`` for new sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import shutil
import statistics
import tempfile
import time

from bench import peers
from bench.adapters import Target, setup
from bench.cycle import CycleConfig, CycleRun, run_cycle
from bench.stats import pct
from cubequeue.grammar import parse
from cubequeue.grammar.commands import Command
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable import layout
from cubequeue.storage.durable.files import OsFiles
from cubequeue.storage.durable.frames import encode_frame
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.durable.progress import ProgressWatch
from cubequeue.storage.durable.segments import SegmentWriter
from cubequeue.storage.durable.store import DurableStore
from cubequeue.storage.limits import Limits
from cubequeue.storage.record_kinds import ITEM_PUT
from cubequeue.storage.store import MemoryStore

T0 = 1_700_000_000_000
PAYLOAD = "x" * 300
#: (clients, concurrency, queries) of the cycle: Cube's default concurrency, 8 clients
CYCLE = (8, 2, 600)
QUICK_CYCLE = (8, 2, 400)
CUBEQUEUE_FSYNC = ("no", "everysec", "always")
REDIS_FSYNC = ("everysec", "always")


def _log(msg: str) -> None:
    print(msg, flush=True)


def _redis_persist(peer: peers.Peer, fsync: str) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=peer.port)
    client.config_set("appendfsync", fsync)
    client.config_set("appendonly", "yes")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            break
        time.sleep(0.05)
    assert client.config_get("appendonly")["appendonly"] == "yes"
    client.close()


def _postgres_sync_on(peer: peers.Peer) -> None:
    import psycopg

    with psycopg.connect(peer.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER ROLE {peers.PG_USER} SET synchronous_commit = on")
    with psycopg.connect(peer.dsn, autocommit=True) as conn:
        row = conn.execute("SHOW synchronous_commit").fetchone()
        assert row is not None and row[0] == "on", row


def start_systems(data_root: str) -> dict[str, peers.Peer]:
    """Every system of the comparison, started and configured; labels → peers."""
    started: dict[str, peers.Peer] = {}
    try:
        started["cubequeue memory"] = peers.start_cubequeue()
        for fsync in CUBEQUEUE_FSYNC:
            data_dir = os.path.join(data_root, f"cq-{fsync}")
            started[f"cubequeue --fsync {fsync}"] = peers.start_cubequeue(
                "--data-dir", data_dir, "--fsync", fsync)
        if peers.have_redis():
            for fsync in REDIS_FSYNC:
                peer = peers.start_redis()
                started[f"redis appendfsync {fsync}"] = peer
                _redis_persist(peer, fsync)
        if peers.have_postgres():
            peer = peers.start_postgres()
            started["postgres synchronous_commit on"] = peer
            asyncio.run(setup(_target(peer)))
            _postgres_sync_on(peer)
        for peer in started.values():
            if peer.name == "redis":
                asyncio.run(setup(_target(peer)))
    except Exception:
        for peer in started.values():
            peer.stop()
        raise
    return started


def _target(peer: peers.Peer) -> Target:
    return Target(peer.name, "127.0.0.1", peer.port, peer.dsn)


def cycle_costs(systems: dict[str, peers.Peer], cycle: tuple[int, int, int],
                reps: int) -> dict[str, list[CycleRun]]:
    clients, concurrency, queries = cycle
    cfg = CycleConfig(clients, concurrency, False, queries)
    runs: dict[str, list[CycleRun]] = {label: [] for label in systems}
    for rep in range(reps):
        for n, (label, peer) in enumerate(systems.items()):  # interleaved
            run = run_cycle(_target(peer), peer.pid, cfg, f"d{rep}s{n}")
            if not run.ok:
                _log(f"  {label} #{rep + 1}: rejected: {run.errors[:2]} {run.check}")
                continue
            runs[label].append(run)
            _log(f"  {label:32s} #{rep + 1}: {run.server_cpu_us:7.0f} us/cycle server CPU, "
                 f"p99 {pct(run.latencies_ms, 99):6.1f} ms")
    return runs


def report_cycles(runs: dict[str, list[CycleRun]]) -> None:
    def median_cpu(label: str) -> float:
        got = runs.get(label) or []
        return statistics.median(r.server_cpu_us for r in got) if got else float("nan")

    base = median_cpu("cubequeue memory")
    _log("\nsystem                           server CPU/cycle  vs memory   p99 latency")
    for label, got in runs.items():
        if not got:
            _log(f"{label:32s} (no valid run)")
            continue
        cpu = median_cpu(label)
        p99 = statistics.median(pct(r.latencies_ms, 99) for r in got)
        _log(f"{label:32s} {cpu:10.0f} us    x{cpu / base:5.2f}   {p99:8.1f} ms")
    everysec = median_cpu("cubequeue --fsync everysec")
    _log(f"\neverysec over memory: +{everysec - base:.0f} us/cycle "
         f"({(everysec / base - 1) * 100:+.1f}%; target at most +15%)")


def _segment_lsn(name: str) -> int:
    parsed = layout.parse_name(name)
    assert parsed is not None, name
    return parsed[1]


async def recovery_time(items: int) -> tuple[float, float, int]:
    """Seconds to recover ``items`` queued items from the log alone (no snapshot: the
    worst case), the log's MB, and the records the progress reports counted."""
    tmp = tempfile.mkdtemp(prefix="cq-bench-")
    try:
        files = OsFiles()
        durable, _ = await open_store(MemoryStore(FakeClock(T0)), data_dir=tmp, wall_ms=lambda: T0,
                                      on_fatal=print)
        directory = durable._directory
        await durable.close()
        # close() left a snapshot and an empty segment after it: ours replaces that one
        newest = max((n for n in os.listdir(tmp) if n.startswith("log-")), key=_segment_lsn)
        first = _segment_lsn(newest)
        os.unlink(os.path.join(tmp, newest))
        writer = SegmentWriter(files, tmp, directory, 64 << 20, first)
        lsn = first
        for start in range(1, items + 1, 100):
            # a payload of its own per item: marshal writes a repeated object once, so a
            # shared one would shrink the log and the decode below what real queues see
            recs = [(ITEM_PUT, i, f"PREFIX_QO:{i % 1000}:{i}", f"{i:010d}{PAYLOAD}", i % 10,
                     T0, None, T0 + 14_400_000, None, False, None, None, None, None)
                    for i in range(start, min(start + 100, items + 1))]
            writer.write(encode_frame(lsn, recs), lsn)
            lsn += len(recs)
        writer.sync()
        writer.close()
        size = sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp))
        watch = ProgressWatch()
        started = time.perf_counter()
        durable, _ = await open_store(MemoryStore(FakeClock(T0), Limits(max_items=10**7)),
                                      data_dir=tmp, wall_ms=lambda: T0, on_fatal=print,
                                      progress=watch)
        took = time.perf_counter() - started
        assert durable.store.stats().items_total == items
        assert watch.latest is not None and watch.latest.phase == "done"
        await durable.log.close()
        return took, size / 1e6, watch.latest.records
    finally:
        shutil.rmtree(tmp)


async def _step(store: MemoryStore | DurableStore, sql: str) -> list[Row]:
    out = store.execute(parse(sql))
    if inspect.isawaitable(out):
        out = await out
    assert isinstance(out, ResultSet)
    return out.rows


async def _in_process_cycles(store: MemoryStore | DurableStore, clients: int, cycles: int) -> float:
    """Process CPU seconds per QueryQueue cycle, ``clients`` coroutines at once."""
    counter = iter(range(10**9))

    async def client() -> None:
        for _ in range(cycles // clients):
            n = next(counter)
            path = f"q:{n}"
            id_ = (await _step(store, f"QUEUE ADD PRIORITY 1 '{path}' '{n}{PAYLOAD}'"))[0][0]
            await _step(store, f"QUEUE RETRIEVE CONCURRENCY 1000 '{path}'")
            await _step(store, f"QUEUE MERGE_EXTRA {id_} '{{\"startQueryTime\":{n}}}'")
            await _step(store, f"QUEUE HEARTBEAT {id_}")
            await _step(store, f"QUEUE ACK {id_} '{{\"result\":{n}}}'")
            await _step(store, f"QUEUE RESULT '{path}'")

    started = time.process_time()
    await asyncio.gather(*(client() for _ in range(clients)))
    return (time.process_time() - started) / (cycles // clients * clients)


def _parsed_cycles(cycles: int) -> list[Command]:
    """The QueryQueue steps of ``cycles`` cycles, parsed ahead (keys by path, so no reply
    is needed to build the next statement)."""
    out: list[Command] = []
    for n in range(cycles):
        path = f"q:{n}"
        for sql in (f"QUEUE ADD PRIORITY 1 '{path}' '{n}{PAYLOAD}'",
                    f"QUEUE RETRIEVE CONCURRENCY 1000 '{path}'",
                    f"QUEUE MERGE_EXTRA '{path}' '{{\"startQueryTime\":{n}}}'",
                    f"QUEUE HEARTBEAT '{path}'", f"QUEUE ACK '{path}' '{{\"result\":{n}}}'",
                    f"QUEUE RESULT '{path}'"):
            out.append(parse(sql))
    return out


async def _pre_parsed_cycles(store: MemoryStore | DurableStore, cycles: int) -> float:
    """Process CPU seconds per cycle of pre-parsed steps, one client: the store's own
    cost, the part durable mode adds to, without the parser's (most of a cycle)."""
    steps = _parsed_cycles(cycles)
    execute = store.execute
    started = time.process_time()
    for cmd in steps:
        out = execute(cmd)
        if inspect.isawaitable(out):
            await out
    return (time.process_time() - started) / cycles


async def in_process_costs(reps: int, clients: int = 64, cycles: int = 3200, *,
                           pre_parsed: bool = False) -> dict[str, list[float]]:
    """µs per cycle for memory and each --fsync, the modes alternating within each rep."""
    modes = ("memory", *CUBEQUEUE_FSYNC)
    out: dict[str, list[float]] = {mode: [] for mode in modes}
    limits = Limits(max_items=10**7)

    async def measure(store: MemoryStore | DurableStore) -> float:
        if pre_parsed:
            return await _pre_parsed_cycles(store, cycles)
        return await _in_process_cycles(store, clients, cycles)

    await _in_process_cycles(MemoryStore(FakeClock(T0), limits), clients, clients * 10)  # warm up
    for _ in range(reps):
        for mode in modes:
            if mode == "memory":
                out[mode].append(1e6 * await measure(MemoryStore(FakeClock(T0), limits)))
                continue
            tmp = tempfile.mkdtemp(prefix="cq-bench-")
            try:
                durable, _ = await open_store(MemoryStore(FakeClock(T0), limits), data_dir=tmp,
                                              fsync=mode, wall_ms=lambda: T0, on_fatal=print)  # type: ignore[arg-type]  # a FsyncPolicy
                await asyncio.sleep(0.05)  # the id reservation's first fsync
                out[mode].append(1e6 * await measure(durable))
                await durable.close()
            finally:
                shutil.rmtree(tmp)
    return out


def report_in_process(costs: dict[str, list[float]], *, pre_parsed: bool = False) -> None:
    base = statistics.median(costs["memory"])
    what = "pre-parsed steps, one client" if pre_parsed else "64 clients"
    _log(f"in-process QueryQueue cycle ({what}), process CPU per cycle, median of "
         f"{len(costs['memory'])} alternating reps")
    for mode, got in costs.items():
        cpu = statistics.median(got)
        label = "memory" if mode == "memory" else f"--fsync {mode}"
        _log(f"  {label:16s} {cpu:7.0f} us   x{cpu / base:5.2f}   "
             f"({' '.join(f'{x:.0f}' for x in got)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=0, help="runs per system (3; quick 2)")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--no-cycle", action="store_true", help="recovery time only")
    parser.add_argument("--in-process", action="store_true",
                        help="the cycle in process instead of over the wire (no peers)")
    parser.add_argument("--pre-parsed", action="store_true",
                        help="with --in-process: statements parsed ahead, one client")
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 3)
    if args.in_process:
        cycles = 2000 if args.pre_parsed else 3200
        report_in_process(asyncio.run(in_process_costs(reps * 2, cycles=cycles,
                                                       pre_parsed=args.pre_parsed)),
                          pre_parsed=args.pre_parsed)
        return
    cycle = QUICK_CYCLE if args.quick else CYCLE
    if not args.no_cycle:
        data_root = tempfile.mkdtemp(prefix="cq-bench-durable-")
        systems = start_systems(data_root)
        try:
            _log(f"QueryQueue cycle, C={cycle[0]} concurrency {cycle[1]}, {cycle[2]} queries "
                 f"per run, {reps} runs each, interleaved")
            report_cycles(cycle_costs(systems, cycle, reps))
        finally:
            for peer in systems.values():
                peer.stop()
            shutil.rmtree(data_root, ignore_errors=True)
    took, mb, records = asyncio.run(recovery_time(args.items))
    _log(f"\nrecovery of {args.items} queued items ({mb:.0f} MB of log, {records} records "
         f"replayed): {took:.2f} s (target < 5 s)")


if __name__ == "__main__":
    main()
