"""How the queue store scales with the size of one prefix (issue 2, "Show it").

Calls :class:`cubequeue.storage.Store` directly (no wire, no parsing), with the item cap
raised, and prints nanoseconds per operation for ADD, RETRIEVE, ACK, RESULT and the
pending listing of the first 10 items (``Store.pending_page``), with 10^3 and with 10^6
items queued in one prefix, plus the memory per queued item measured with tracemalloc.
The ratio large/small must stay under 2 for every operation.

Each operation is timed alone (perf_counter_ns, timer overhead subtracted) on a random
item and then undone untimed (ACK → re-ADD, ADD → CANCEL …), so the prefix keeps its
nominal size, with ``ACTIVE`` items running as background. The figure is the median over
``--ops`` runs, which keeps a busy shared machine from deciding it. Garbage collection is
paused while timing and the filled queue is ``gc.freeze()``-d (a full collection over 10^6
live objects is a pause unrelated to the data structures; a long-running server should
freeze its heap the same way). Seeded RNG, so runs are comparable.

Usage: ``.venv/bin/python bench/storage_scale.py [--quick] [--ops N]``
(``--quick`` uses 10^5 instead of 10^6 as the large size).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

from cubequeue.grammar.commands import (
    QueueAck,
    QueueAdd,
    QueueCancel,
    QueueResult,
    QueueRetrieve,
)
from cubequeue.storage import FakeClock, Limits, Store

PREFIX = "STANDALONE#queue"
PAYLOAD_BYTES = 100
#: items already active in the prefix while timing (Cube's usual concurrency range)
ACTIVE = 4
START = 1_700_000_000_000
T = TypeVar("T")


def _path(i: int) -> str:
    return f"{PREFIX}:{i:016x}"


def _payload(rng: random.Random) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=PAYLOAD_BYTES))


def _fill(store: Store, clock: FakeClock, n: int, rng: random.Random) -> None:
    for i in range(n):
        store.execute(QueueAdd(path=_path(i), payload=_payload(rng), priority=rng.randrange(3)))
        if i % 64 == 0:
            clock.advance(1)


def _median_ns(samples: list[int]) -> float:
    return float(statistics.median(samples))


def _timer_overhead() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(10_000):
        t0 = clock()
        samples.append(clock() - t0)
    return _median_ns(samples)


def _time_ops(
    ops: int,
    prepare: Callable[[int], T],
    op: Callable[[T], object],
    undo: Callable[[T], object] | None = None,
) -> float:
    """Median ns of ``op(prepare(k))`` over ``ops`` runs; ``prepare`` and ``undo`` (which
    puts the queue back to its nominal size) are not timed. The median keeps a noisy,
    shared machine from deciding the figures."""
    clock = time.perf_counter_ns
    samples: list[int] = []
    gc.disable()
    try:
        for k in range(ops):
            arg = prepare(k)
            t0 = clock()
            op(arg)
            samples.append(clock() - t0)
            if undo is not None:
                undo(arg)
    finally:
        gc.enable()
    return _median_ns(samples)


def measure(n: int, ops: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    clock = FakeClock(START)
    store = Store(clock, Limits(max_items=n + 10 * ACTIVE, results_expire_ms=300_000))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _fill(store, clock, n, rng)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_item = (after - before) / n
    text_bytes = sys.getsizeof(_path(0)) + sys.getsizeof(_payload(rng))
    gc.collect()
    gc.freeze()  # the filled queue is long-lived: keep it out of collections while timing
    overhead = _timer_overhead()
    out: dict[str, float] = {
        "bytes/item": per_item,
        "bytes/item beyond path+payload": per_item - text_bytes,
    }
    execute = store.execute
    payload = "x" * PAYLOAD_BYTES

    # a realistic background: ACTIVE items already running in the prefix
    for i in range(ACTIVE):
        execute(QueueRetrieve(path=_path(i), concurrency=ACTIVE))

    def pick(_: int) -> str:
        return _path(rng.randrange(ACTIVE, n))

    def readd(path: str) -> None:
        execute(QueueAdd(path=path, payload=payload))

    def current_id(path: str) -> int:
        return int(str(execute(QueueAdd(path=path, payload=payload)).rows[0][0]))

    new_paths = (f"{PREFIX}:new-{k}" for k in range(10**9))
    out["ADD"] = _time_ops(
        ops,
        lambda _: QueueAdd(path=next(new_paths), payload=payload, priority=rng.randrange(3)),
        execute,
        lambda cmd: execute(QueueCancel(key=cmd.path)),
    ) - overhead
    out["RETRIEVE"] = _time_ops(
        ops,
        lambda k: QueueRetrieve(path=pick(k), concurrency=ACTIVE + 1),
        execute,
        lambda cmd: (execute(QueueAck(key=cmd.path, result=None)), readd(cmd.path)),
    ) - overhead
    acked: list[str] = []

    def ack_cmd(k: int) -> QueueAck:
        path = pick(k)
        acked.append(path)
        return QueueAck(key=current_id(path), result="result-value")

    out["ACK"] = _time_ops(ops, ack_cmd, execute, lambda cmd: readd(acked[-1])) - overhead
    out["RESULT"] = _time_ops(
        ops, lambda k: QueueResult(key=acked[k]), execute
    ) - overhead
    out["PENDING first 10"] = _time_ops(
        ops, lambda _: PREFIX, lambda prefix: store.pending_page(prefix, 10)
    ) - overhead
    assert len(store.pending_page(PREFIX, 10).rows) == 10
    gc.unfreeze()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 instead of 10^6 items")
    parser.add_argument("--ops", type=int, default=20_000, help="operations timed per kind")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    small, large = 1_000, (100_000 if args.quick else 1_000_000)
    a = measure(small, args.ops, args.seed)
    b = measure(large, args.ops, args.seed)
    print(f"{'operation':32} {small:>12,} {large:>12,} {'ratio':>7}")
    worst = 0.0
    for name in a:
        ratio = b[name] / a[name]
        unit = "B" if name.startswith("bytes") else "ns/op"
        print(f"{name:32} {a[name]:>10.0f}{unit:>2} {b[name]:>10.0f}{unit:>2} {ratio:>7.2f}")
        if not name.startswith("bytes"):
            worst = max(worst, ratio)
    print(f"worst time ratio {worst:.2f} ({'OK' if worst < 2 else 'FAIL'}: must stay < 2)")
    if worst >= 2:
        sys.exit(1)


if __name__ == "__main__":
    main()
