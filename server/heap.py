"""Keeping CPython's cyclic collector from stalling the loop over a large store.

CPython 3.11's cyclic collector is not incremental. A full collection walks every tracked
object, and every stored item is one (a slotted object), so with 10⁶ queued items one full
collection holds the event loop for about a second (0.9–1.0 s measured on the benchmark
machine). CPython starts one by itself whenever the objects promoted since the last one
exceed a quarter of the old generation, so a growing or churning store triggers them at
any statement.

Stored rows hold only strings, numbers and ``None``: they form no reference cycles, and
reference counting frees them. So while the store is large, every tick collects the young
generations (a few milliseconds) and freezes what survives (``gc.freeze``): a full
collection then walks only what is newer than the last tick. Frozen objects freed by
reference counting leave the frozen set as usual; only cyclic garbage that was frozen while
still alive waits, and it is reclaimed once the store is small again: the server then
unfreezes, runs one full collection (its cost bounded by the small heap) and freezes the
survivors, as it did at start-up.

:class:`HeapPolicy` is the decision (pure, driven by the store's row count and a ``Gc``
seam, tested directly); :func:`run_heap_policy` is the loop that ticks it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "FREEZE_AT_ROWS",
    "THAW_AT_ROWS",
    "Gc",
    "HeapPolicy",
    "process_heap_policy",
    "run_heap_policy",
]

_log = logging.getLogger("cubequeue.server")

#: store rows (items, results, cache keys) from which each tick freezes the survivors: a
#: full collection over fewer tracked objects than this costs tens of milliseconds
FREEZE_AT_ROWS = 50_000
#: store rows at or below which a frozen heap is thawed and fully collected once
THAW_AT_ROWS = 10_000
#: seconds between ticks: what accumulates unfrozen between two ticks bounds the pause
TICK_S = 1.0


class Gc(Protocol):
    """The three calls of :mod:`gc` the policy makes (a test double records them)."""

    def collect(self, generation: int = 2) -> int: ...
    def freeze(self) -> None: ...
    def unfreeze(self) -> None: ...


@dataclass(slots=True)
class HeapPolicy:
    """Freeze while the store is large; thaw and collect once when it is small again."""

    gc: Gc
    freeze_at: int = FREEZE_AT_ROWS
    thaw_at: int = THAW_AT_ROWS
    #: frozen by a tick since the last thaw (start-up's own freeze does not count)
    frozen: bool = False

    def tick(self, rows: int) -> str | None:
        """One decision for a store holding ``rows`` rows: ``"freeze"``, ``"thaw"`` or
        None (nothing to do)."""
        if rows >= self.freeze_at:
            self.gc.collect(1)  # the young generations only: what survives them is kept
            self.gc.freeze()
            self.frozen = True
            return "freeze"
        if self.frozen and rows <= self.thaw_at:
            self.gc.unfreeze()
            self.gc.collect()
            self.gc.freeze()
            self.frozen = False
            return "thaw"
        return None

    def after_stream(self) -> None:
        """A step handed back a stream: a listing of a large prefix, whose order copy (one
        list of up to 10⁶ ints) every young collection would walk while it is young (each
        walk measured in bench/RESULTS-notes.md). While the store is large, freeze at once
        instead of at the next tick; a small store's streams are small, and nothing is done."""
        if self.frozen:
            self.gc.freeze()


def process_heap_policy() -> HeapPolicy:
    """The policy over this process's own collector (:mod:`gc`)."""
    return HeapPolicy(gc)


async def run_heap_policy(
    rows: Callable[[], int | None], policy: HeapPolicy, tick_s: float = TICK_S
) -> None:
    """Tick ``policy`` every ``tick_s`` over ``rows()`` (None: the store keeps no rows in
    this process, as the PostgreSQL store; then nothing is done)."""
    while True:
        await asyncio.sleep(tick_s)
        count = rows()
        if count is not None and policy.tick(count) == "thaw":
            _log.debug("store small again (%d rows): heap thawed and collected", count)
