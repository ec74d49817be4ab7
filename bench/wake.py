"""Blocking wake latency: from the ACK being sent to the waiting client receiving its row.

One waiter connection blocks on an active item (RESULT_BLOCKING / a LISTEN channel /
BLPOP); once the wait is registered on the server (a few ms later) an acker connection in
the same event loop timestamps and sends the ACK; the waiter timestamps its row. Both
stamps come from one monotonic clock. Measured at idle and with 64 busy clients running
the QueryQueue cycle (concurrency 64) on another prefix from two other processes.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any

from bench.adapters import Target, connect
from bench.cycle import CycleConfig, result_for, run_cycle

__all__ = ["WakeRun", "measure_wake", "start_busy"]

REGISTER_S = 0.003  # let the wait reach the server before the ACK goes out


@dataclass(slots=True)
class WakeRun:
    system: str
    busy: bool
    samples_ms: list[float]
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and bool(self.samples_ms)


async def _measure(target: Target, n: int, prefix: str) -> tuple[list[float], list[str]]:
    waiter, acker = await connect(target), await connect(target)
    samples: list[float] = []
    errors: list[str] = []
    try:
        for i in range(-5, n):  # five unmeasured warm-up rounds
            path = f"{prefix}:w{i + 5}"
            qid, _ = await acker.add(path, 1, "{}")
            claims = await acker.reconcile(prefix, 1_000_000)
            claim = next((c for c in claims if c.path == path), None)
            if claim is None:
                errors.append(f"could not claim {path}")
                continue
            got: dict[str, Any] = {}

            async def wait(qid: int = qid, path: str = path, got: dict[str, Any] = got) -> None:
                got["row"] = await waiter.wait(qid, path, 5000)
                got["t"] = time.perf_counter()

            task = asyncio.create_task(wait())
            await asyncio.sleep(REGISTER_S)
            t0 = time.perf_counter()
            await acker.ack(claim, result_for(path))
            await task
            if got["row"] is None:
                errors.append(f"waiter on {path} not woken")
            elif i >= 0:
                samples.append((got["t"] - t0) * 1000)
    finally:
        await waiter.close()
        await acker.close()
    return samples, errors


def measure_wake(target: Target, n: int, prefix: str, busy: bool) -> WakeRun:
    import uvloop

    samples, errors = uvloop.run(_measure(target, n, prefix))
    return WakeRun(target.system, busy, samples, errors)


def _busy(target: Target, pid: int, stop: Any, ready: Any) -> None:
    cfg = CycleConfig(clients=64, concurrency=64, fast=False, queries=2048)
    i = 0
    while not stop.is_set():
        run_cycle(target, pid, cfg, f"busy{i}")
        ready.set()
        i += 1


def start_busy(target: Target, server_pid: int) -> tuple[Any, Any]:
    """64 busy clients in the background until ``stop.set()``; returns (process, stop)."""
    ctx = mp.get_context("fork")
    stop, ready = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_busy, args=(target, server_pid, stop, ready))
    proc.start()
    # the load is running once its processes are connected and warmed up
    time.sleep(2.0)
    return proc, stop
