"""How the queue store scales with the size of one prefix.

Calls :class:`cubequeue.storage.MemoryStore` directly (no wire, no parsing), with the item cap
raised, and prints nanoseconds per operation for ADD, RETRIEVE, ACK, RESULT and the
pending listing of the first 10 items (``MemoryStore.pending_page``), with 10^3 and with 10^6
items queued in one prefix, plus the memory per queued item measured with tracemalloc.
The ratio large/small must stay under 2 for every operation.

Each operation is timed alone (perf_counter_ns, timer overhead subtracted) and then
undone untimed (ACK → re-ADD, ADD → CANCEL …), so the prefix keeps its nominal size, with
``ACTIVE`` items running as background. Both stores are built first and then timed in
alternating rounds, so background load on a shared machine hits both sizes alike; the
figure is the median over ``--ops`` runs. Garbage collection is
paused while timing and the filled queue is ``gc.freeze()``-d (a full collection over 10^6
live objects is a pause unrelated to the data structures; a long-running server should
freeze its heap the same way). Seeded RNG, so runs are comparable.

Two access patterns are measured. ``head`` is how Cube's queue uses the store (reconcile
RETRIEVEs the top of QUEUE PENDING and ACKs what it claimed) and gives the verdict.
``random`` RETRIEVEs and ACKs pending items anywhere in the prefix: its extra cost at 10^6
is cache and TLB misses in a ~700 MB heap (each random sorted-index removal dereferences
~log2(n) cold entries), reported for information.

Usage: ``.venv/bin/python bench/storage_scale.py [--quick] [--ops N] [--pattern head random]``
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
from collections.abc import Iterator

from cubequeue.grammar.commands import (
    QueueAck,
    QueueAdd,
    QueueCancel,
    QueueResult,
    QueueRetrieve,
)
from cubequeue.storage import FakeClock, Limits, MemoryStore

PREFIX = "STANDALONE#queue"
PAYLOAD_BYTES = 100
#: items already active in the prefix while timing (Cube's usual concurrency range)
ACTIVE = 4
START = 1_700_000_000_000
ROUNDS = 10
OPERATIONS = ("ADD", "RETRIEVE", "ACK", "RESULT", "PENDING first 10")
_PATTERNS = {
    "head": "Cube's access pattern: RETRIEVE the top of PENDING, ACK the claimed item",
    "random": "worst case: RETRIEVE and ACK random pending items anywhere in the prefix",
}


def _path(i: int) -> str:
    return f"{PREFIX}:{i:016x}"


def _payload(rng: random.Random) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=PAYLOAD_BYTES))


class Subject:
    """One filled store and the untimed set-up / timed step / untimed undo of each op."""

    def __init__(self, n: int, seed: int, pattern: str) -> None:
        self.n = n
        self.pattern = pattern
        self.rng = random.Random(seed)
        self.store = MemoryStore(
            FakeClock(START), Limits(max_items=n + 1000, results_expire_ms=300_000)
        )
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        clock = self.store.clock
        assert isinstance(clock, FakeClock)
        for i in range(n):
            self.store.execute(
                QueueAdd(path=_path(i), payload=_payload(self.rng), priority=self.rng.randrange(3))
            )
            if i % 64 == 0:
                clock.advance(1)
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        text = sys.getsizeof(_path(0)) + sys.getsizeof(_payload(self.rng))
        self.bytes_per_item = (after - before) / n
        self.bytes_beyond_text = self.bytes_per_item - text
        for i in range(ACTIVE):  # background: ACTIVE items already running
            self.store.execute(QueueRetrieve(path=_path(i), concurrency=ACTIVE))
        self.payload = "x" * PAYLOAD_BYTES
        self.fresh: Iterator[int] = iter(range(10**12))
        self.samples: dict[str, list[int]] = {name: [] for name in OPERATIONS}

    # helpers (untimed) -------------------------------------------------------------

    def pick(self) -> str:
        if self.pattern == "head":  # what Cube's reconcile does: the top of QUEUE PENDING
            return f"{PREFIX}:{self.store.pending_page(PREFIX, 1).rows[0][0]}"
        return _path(self.rng.randrange(ACTIVE, self.n))

    def readd(self, path: str) -> int:
        return int(str(self.store.execute(QueueAdd(path=path, payload=self.payload)).rows[0][0]))

    def claim(self, path: str) -> None:
        self.store.execute(QueueRetrieve(path=path, concurrency=ACTIVE + 1))

    # one timed operation each ----------------------------------------------------------

    def step(self, name: str) -> int:
        execute, clock = self.store.execute, time.perf_counter_ns
        if name == "ADD":
            cmd = QueueAdd(path=f"{PREFIX}:new-{next(self.fresh)}", payload=self.payload,
                           priority=self.rng.randrange(3))
            t0 = clock()
            execute(cmd)
            elapsed = clock() - t0
            execute(QueueCancel(key=cmd.path))
            return elapsed
        if name == "RETRIEVE":
            path = self.pick()
            retrieve = QueueRetrieve(path=path, concurrency=ACTIVE + 1)
            t0 = clock()
            execute(retrieve)
            elapsed = clock() - t0
            execute(QueueAck(key=path, result=None))
            self.readd(path)
            return elapsed
        if name in ("ACK", "RESULT"):
            path = self.pick()
            if self.pattern == "head":  # Cube ACKs the item it claimed
                self.claim(path)
            ack = QueueAck(key=self.readd(path), result="result-value")
            if name == "ACK":
                t0 = clock()
                execute(ack)
                elapsed = clock() - t0
            else:  # a result is read soon after its ACK (RESULT / RESULT_BLOCKING)
                execute(ack)
                result = QueueResult(key=path)
                t0 = clock()
                execute(result)
                elapsed = clock() - t0
            self.readd(path)
            return elapsed
        t0 = clock()
        self.store.pending_page(PREFIX, 10)
        return clock() - t0


def _timer_overhead() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(10_000):
        t0 = clock()
        samples.append(clock() - t0)
    return float(statistics.median(samples))


def compare(small: int, large: int, ops: int, seed: int, pattern: str) -> list[tuple[str, float, float]]:
    subjects = [Subject(small, seed, pattern), Subject(large, seed, pattern)]
    gc.collect()
    gc.freeze()  # the filled queues are long-lived: keep them out of collections
    overhead = _timer_overhead()
    per_round = max(1, ops // ROUNDS)
    gc.disable()
    try:
        for _ in range(ROUNDS):
            for name in OPERATIONS:
                for subject in subjects:
                    for _ in range(per_round):
                        subject.samples[name].append(subject.step(name))
    finally:
        gc.enable()
        gc.unfreeze()
    a, b = subjects
    rows = [
        ("bytes/item", a.bytes_per_item, b.bytes_per_item),
        ("bytes/item beyond path+payload", a.bytes_beyond_text, b.bytes_beyond_text),
    ]
    for name in OPERATIONS:
        rows.append((
            name,
            statistics.median(a.samples[name]) - overhead,
            statistics.median(b.samples[name]) - overhead,
        ))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 instead of 10^6 items")
    parser.add_argument("--ops", type=int, default=20_000, help="operations timed per kind")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--pattern", nargs="+", choices=sorted(_PATTERNS), default=["head", "random"],
        help="which items RETRIEVE and ACK touch (default: both; head gives the verdict)",
    )
    args = parser.parse_args()
    small, large = 1_000, (100_000 if args.quick else 1_000_000)
    worst = 0.0
    for pattern in args.pattern:
        print(f"\n{_PATTERNS[pattern]}")
        print(f"{'operation':32} {small:>12,} {large:>12,} {'ratio':>7}")
        for name, a, b in compare(small, large, args.ops, args.seed, pattern):
            ratio = b / a
            unit = "B" if name.startswith("bytes") else "ns"
            print(f"{name:32} {a:>9.0f} {unit:<2} {b:>9.0f} {unit:<2} {ratio:>7.2f}", flush=True)
            if pattern == "head" and not name.startswith("bytes"):
                worst = max(worst, ratio)
    if "head" in args.pattern:
        verdict = "OK" if worst < 2 else "FAIL"
        print(f"\nworst time ratio, Cube's access pattern: {worst:.2f} ({verdict}: must stay < 2)")
        if worst >= 2:
            sys.exit(1)


if __name__ == "__main__":
    main()
