"""Grammar benchmark: median CPU microseconds per statement.

Statements: a QUEUE ADD carrying a 300-byte JSON payload (uncached: a fresh payload per
call through ``parse``; shape hit: a fresh payload per call through ``prepare``, what
Cube's inlined statements cost; the same as Cube's 0.35 driver inlines it, through the
``sqlstring`` package's MySQL escaping, every ``"`` written ``\\"``; exact hit: the same
text again through ``prepare``),
QUEUE RESULT_BLOCKING and CACHE GET (uncached). Seeded, so runs are comparable. CPU time
(``time.process_time``), so a busy machine inflates the figures less than wall time
does. Also the start-up cost: a fresh interpreter importing ``cubequeue.grammar`` and
parsing one statement, median of 5 (wall time).

Run as ``python -m bench.grammar`` or ``python bench/grammar.py`` from the repository
root. For an A/B pair, put another tree's ``grammar`` folder on ``PYTHONPATH`` as
``cubequeue/grammar`` (beside an empty ``cubequeue/__init__.py``) and alternate runs.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from cubequeue.grammar import StatementCache, parse

SEED = 20261130
ROUNDS = 15
PER_ROUND = 400


def _payload(rng: random.Random) -> str:
    doc: dict[str, object] = {"queryKey": [f"SELECT {rng.randrange(10**6)}", []], "external": None}
    while len(json.dumps(doc)) < 300:
        doc[f"k{len(doc)}"] = "".join(rng.choice("abcdefghij") for _ in range(12))
    return json.dumps(doc)[:299] + "}"


def _sqlstring(text: str) -> str:
    """``sqlstring.escape`` of a string, as Cube's CubeStoreDriver inlines a value."""
    table = {"\0": "\\0", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\r": "\\r",
             "\x1a": "\\Z", '"': '\\"', "'": "\\'", "\\": "\\\\"}
    return "'" + "".join(table.get(c, c) for c in text) + "'"


def _median_us(run: Callable[[int], None]) -> float:
    samples = []
    for _ in range(ROUNDS):
        start = time.process_time()
        run(PER_ROUND)
        samples.append((time.process_time() - start) / PER_ROUND * 1e6)
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
        for _ in range(2 * ROUNDS * PER_ROUND + 1)
    ]
    cube_adds = [
        f"QUEUE ADD PRIORITY {rng.randrange(-5, 5)} 'STANDALONE#queue:{rng.getrandbits(64):x}' "
        f"{_sqlstring(_payload(rng))}"
        for _ in range(ROUNDS * PER_ROUND)
    ]
    cube_it = iter(cube_adds)
    it = iter(adds[1:])
    cache = StatementCache()
    cached = adds[0]
    blocking = "QUEUE RESULT_BLOCKING 5000 'STANDALONE#queue:0123456789abcdef'"
    get = "CACHE GET 'STANDALONE#cache:0123456789abcdef'"
    for sql in adds[:50]:  # warm up (lexer state tables, caches)
        parse(sql)
    cache.prepare(cached)
    cache.prepare(cube_adds[0])

    def add_uncached(n: int) -> None:
        for _ in range(n):
            parse(next(it))

    def add_shape_hit(n: int) -> None:
        prepare = cache.prepare
        for _ in range(n):
            prepare(next(it))

    def add_cube_hit(n: int) -> None:
        prepare = cache.prepare
        for _ in range(n):
            prepare(next(cube_it))

    def add_exact_hit(n: int) -> None:
        prepare = cache.prepare
        for _ in range(n):
            prepare(cached)

    def repeat(sql: str) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                parse(sql)

        return run

    rows = [
        ("QUEUE ADD, 300-byte JSON payload (uncached)", _median_us(add_uncached)),
        ("QUEUE ADD, 300-byte JSON payload (shape hit)", _median_us(add_shape_hit)),
        ("QUEUE ADD, 300-byte JSON, Cube's escaping (shape hit)", _median_us(add_cube_hit)),
        ("QUEUE ADD, 300-byte JSON payload (exact-text hit)", _median_us(add_exact_hit)),
        ("QUEUE RESULT_BLOCKING (uncached)", _median_us(repeat(blocking))),
        ("CACHE GET (uncached)", _median_us(repeat(get))),
    ]
    for name, us in rows:
        print(f"{name:<54} {us:9.2f} µs")
    print(f"{'fresh process: import + first parse':<54} {_startup_ms():9.0f} ms")


if __name__ == "__main__":
    main()
