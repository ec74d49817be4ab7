"""Once a second: the store's depths into the ring, and the command rate.

Runs on each server as one asyncio task whether or not a console is open, so a page
opened during an incident already has the last 15 minutes. A failing read is logged and
the next tick tries again: the console must never take the server down.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Sequence

from cubequeue.server.console.ring import DepthRing
from cubequeue.server.console.source import StoreReader
from cubequeue.storage.stats import (
    DEFAULT_STALLED_AFTER_MS,
    WALK_SLICE,
    PrefixCensus,
    PrefixCounts,
    PrefixSample,
)

__all__ = ["SAMPLE_INTERVAL_S", "CommandRate", "Sampler", "next_delay"]

SAMPLE_INTERVAL_S = 1.0

_log = logging.getLogger("cubequeue.console")


class CommandRate:
    """Commands per second between the last two readings of the commands counter."""

    __slots__ = ("_last", "per_second")

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None
        self.per_second: float | None = None

    def observe(self, mono_s: float, total: float) -> None:
        last = self._last
        if last is not None and mono_s > last[0]:
            self.per_second = max(0.0, (total - last[1]) / (mono_s - last[0]))
        self._last = (mono_s, total)


def _ring_order(s: PrefixSample) -> tuple[int, str]:
    return -s[0], s[1]  # the ring's order: depth (pending + active), then name


async def _deepest(prefixes: Sequence[PrefixCounts], keep: int) -> Sequence[PrefixCounts]:
    """The ``keep`` deepest prefixes holding items, which is all the ring reads of a sample
    (one more than it keeps, so it still knows whether the sample is complete). The
    in-memory store's census is read a slice per loop turn: a store of 10^6 prefixes
    must not hold the loop every second."""
    if not isinstance(prefixes, PrefixCensus):
        return prefixes
    kept: list[PrefixSample] = []
    for part in prefixes.walk(WALK_SLICE, DEFAULT_STALLED_AFTER_MS):
        kept = heapq.nlargest(keep, [*kept, *(s for s in part if s[0])], key=_ring_order)
        await asyncio.sleep(0)
    return [PrefixCounts(s[1], s[2], s[3]) for s in kept]


#: a sample that took this long is followed by a pause this many times longer
BUSY_FACTOR = 4.0


def next_delay(interval_s: float, took_s: float) -> float:
    """The pause before the next sample: ``interval_s``, or longer after a slow sample (a
    store of 10^6 prefixes is read in slices for seconds), so sampling never takes more
    than a fifth of the server's time."""
    return max(interval_s, BUSY_FACTOR * took_s)


class Sampler:
    def __init__(self, reader: StoreReader, ring: DepthRing,
                 commands_total: Callable[[], float],
                 interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.reader = reader
        self.ring = ring
        self.rate = CommandRate()
        self._commands_total = commands_total
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> None:
        stats = await self.reader.stats()
        deepest = await _deepest(stats.prefixes, self.ring.per_sample + 1)
        self.ring.record(self.reader.now_ms(), deepest)
        self.rate.observe(time.monotonic(), self._commands_total())

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample_once()
            except Exception:
                _log.exception("console sampler: reading the store failed")
            await asyncio.sleep(next_delay(self._interval, time.monotonic() - started))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="console-sampler")

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
