"""Durable mode, in process: CPU per QueryQueue cycle with --fsync no|everysec|always
beside the in-memory store, and recovery time at N queued items.

Usage: python -m bench.durable [--cycles 3000] [--clients 64] [--items 1000000]
CPU is process time (the loop and the writer thread together), so it is what the server
would spend; figures on a shared machine are noisy: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import shutil
import tempfile
import time

from cubequeue.grammar import parse
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable import layout
from cubequeue.storage.durable.files import OsFiles
from cubequeue.storage.durable.frames import encode_frame
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.durable.segments import SegmentWriter
from cubequeue.storage.limits import Limits
from cubequeue.storage.record_kinds import ITEM_PUT
from cubequeue.storage.store import Store

T0 = 1_700_000_000_000
PAYLOAD = "x" * 300


async def _run(store, sql):
    out = store.execute(parse(sql))
    if inspect.isawaitable(out):
        out = await out
    return out.rows


async def _cycles(store, clients: int, cycles: int) -> float:
    counter = iter(range(10**9))

    async def client() -> None:
        for _ in range(cycles // clients):
            n = next(counter)
            path = f"q:{n}"
            id_ = (await _run(store, f"QUEUE ADD PRIORITY 1 '{path}' '{PAYLOAD}'"))[0][0]
            await _run(store, f"QUEUE RETRIEVE CONCURRENCY 1000 '{path}'")
            await _run(store, f"QUEUE MERGE_EXTRA {id_} '{{\"startQueryTime\":{n}}}'")
            await _run(store, f"QUEUE HEARTBEAT {id_}")
            await _run(store, f"QUEUE ACK {id_} '{{\"result\":{n}}}'")
            await _run(store, f"QUEUE RESULT '{path}'")

    started = time.process_time()
    await asyncio.gather(*(client() for _ in range(clients)))
    return (time.process_time() - started) / (cycles // clients * clients)


async def cycle_costs(clients: int, cycles: int) -> dict[str, float]:
    out = {"memory": await _cycles(Store(FakeClock(T0), Limits(max_items=10**7)), clients, cycles)}
    for fsync in ("no", "everysec", "always"):
        tmp = tempfile.mkdtemp(prefix="cq-bench-")
        try:
            durable, _ = await open_store(
                Store(FakeClock(T0), Limits(max_items=10**7)), data_dir=tmp, fsync=fsync,
                wall_ms=lambda: T0, on_fatal=print)
            out[fsync] = await _cycles(durable, clients, cycles)
            await durable.close()
        finally:
            shutil.rmtree(tmp)
    return out


async def recovery_time(items: int) -> tuple[float, float]:
    tmp = tempfile.mkdtemp(prefix="cq-bench-")
    try:
        files = OsFiles()
        durable, _ = await open_store(Store(FakeClock(T0)), data_dir=tmp, wall_ms=lambda: T0,
                                      on_fatal=print)
        directory = durable._directory
        await durable.close()
        first = max(layout.parse_name(n)[1] for n in os.listdir(tmp) if n.startswith("log-"))
        writer = SegmentWriter(files, tmp, directory, 64 << 20, first + 1)
        lsn = first + 1
        for start in range(1, items + 1, 100):
            recs = [(ITEM_PUT, i, f"PREFIX_QO:{i % 1000}:{i}", PAYLOAD, i % 10, T0, None,
                     T0 + 14_400_000, None, False, None, None, None, None)
                    for i in range(start, min(start + 100, items + 1))]
            writer.write(encode_frame(lsn, recs), lsn)
            lsn += len(recs)
        writer.sync()
        writer.close()
        size = sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp))
        started = time.perf_counter()
        durable, _ = await open_store(Store(FakeClock(T0), Limits(max_items=10**7)),
                                           data_dir=tmp, wall_ms=lambda: T0, on_fatal=print)
        took = time.perf_counter() - started
        assert durable.store.stats().items_total == items
        await durable.log.close()
        return took, size / 1e6
    finally:
        shutil.rmtree(tmp)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args()
    costs = asyncio.run(cycle_costs(args.clients, args.cycles))
    base = costs["memory"]
    for name, cost in costs.items():
        print(f"cycle cpu {name:9s} {cost * 1e6:8.1f} us/cycle  x{cost / base:.2f} vs memory")
    took, mb = asyncio.run(recovery_time(args.items))
    print(f"recovery of {args.items} items ({mb:.0f} MB of log): {took:.2f} s (target < 5 s)")


if __name__ == "__main__":
    main()
