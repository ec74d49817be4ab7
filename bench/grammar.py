"""Grammar benchmark: median microseconds per statement.

Statements: a QUEUE ADD carrying a 300-byte JSON payload (uncached: a fresh payload per
call; cached: the same text through ``parse_cached``), QUEUE RESULT_BLOCKING and CACHE GET.
Seeded, so runs are comparable. Also the start-up cost: a fresh
interpreter importing ``cubequeue.grammar`` and parsing one statement, median of 5.
Run as ``python -m bench.grammar`` or ``python bench/grammar.py`` from the repository root.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from cubequeue.grammar import parse, parse_cached

SEED = 20261130
ROUNDS = 15
PER_ROUND = 400


def _payload(rng: random.Random) -> str:
    doc: dict[str, object] = {"queryKey": [f"SELECT {rng.randrange(10**6)}", []], "external": None}
    while len(json.dumps(doc)) < 300:
        doc[f"k{len(doc)}"] = "".join(rng.choice("abcdefghij") for _ in range(12))
    return json.dumps(doc)[:299] + "}"


def _median_us(run: Callable[[int], None]) -> float:
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run(PER_ROUND)
        samples.append((time.perf_counter() - start) / PER_ROUND * 1e6)
    return statistics.median(samples)


def _startup_ms(runs: int = 5) -> float:
    code = "import cubequeue.grammar as g; g.parse('CACHE GET x')"
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main() -> None:
    rng = random.Random(SEED)
    adds = [
        f"QUEUE ADD PRIORITY {rng.randrange(-5, 5)} 'STANDALONE#queue:{rng.getrandbits(64):x}' "
        f"'{_payload(rng).replace(chr(39), chr(39) * 2)}'"
        for _ in range(ROUNDS * PER_ROUND)
    ]
    it = iter(adds)
    cached = adds[0]
    blocking = "QUEUE RESULT_BLOCKING 5000 'STANDALONE#queue:0123456789abcdef'"
    get = "CACHE GET 'STANDALONE#cache:0123456789abcdef'"
    for sql in adds[:50]:  # warm up (lexer state tables, caches)
        parse(sql)

    def add_uncached(n: int) -> None:
        for _ in range(n):
            parse(next(it))

    def add_cached(n: int) -> None:
        for _ in range(n):
            parse_cached(cached)

    def repeat(sql: str) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                parse(sql)

        return run

    rows = [
        ("QUEUE ADD, 300-byte JSON payload (uncached)", _median_us(add_uncached)),
        ("QUEUE ADD, 300-byte JSON payload (parse_cached)", _median_us(add_cached)),
        ("QUEUE RESULT_BLOCKING (uncached)", _median_us(repeat(blocking))),
        ("CACHE GET (uncached)", _median_us(repeat(get))),
    ]
    for name, us in rows:
        print(f"{name:<50} {us:9.2f} µs")
    print(f"{'fresh process: import + first parse':<50} {_startup_ms():9.0f} ms")


if __name__ == "__main__":
    main()
