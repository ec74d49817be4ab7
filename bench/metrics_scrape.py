"""Scrape benchmark: what ``GET /metrics`` costs with many queue prefixes, and how long it
holds the event loop for everyone else.

A server is filled with N prefixes of one pending item each (10⁶ by default; ``--quick``:
10⁵), and, with ``--long-names``, 30 more prefixes whose names are 1 MiB each. A probe
connection runs ``SELECT 1`` back to back (its own thread, its own psycopg connection)
first for a baseline window with no scrape, then while ``--scrapes`` scrapes run one after
the other (``--interval-s`` apart). Reported: each scrape's wall time and body size, and
the probe's p99 and max round trip during the baseline and during the scrapes and
intervals. Above 8,192 prefixes a scrape is answered from the previous scrape's census
while it starts the next, so each scrape here also starts a walk of every prefix in
slices, which the probe feels during the interval. Target: no scrape stalls the probe more
than 50 ms beyond the baseline (issue 23 item 6: 200,000 prefixes made a 1.4 s scrape that
stalled others 0.56 s).

Anything else the server does on its own during the windows (the console's depth sampler
reads the prefixes once a second) shows in both windows: compare the two. The machine is
shared, so figures are indicative; compare runs made back to back.

    .venv/bin/python -m bench.metrics_scrape [--prefixes N] [--quick] [--long-names]
        [--scrapes K] [--baseline-s S] [--interval-s S] [-- server flags...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request

import psycopg

from bench.probe import Probe
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

TARGET_MS = 50.0
_BATCH = 2_000
_MIB = 1024 * 1024


def _fill(server: CubequeueServer, n: int, long_names: bool) -> float:
    t0 = time.perf_counter()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for start in range(0, n, _BATCH):
            sql = ";".join(f"QUEUE ADD PRIORITY 1 'p{i}:k' '{{}}'"
                           for i in range(start, min(n, start + _BATCH)))
            conn.execute(sql.encode())
        if long_names:
            for i in range(30):
                name = chr(ord("a") + i % 26) * _MIB + str(i)
                conn.execute(f"QUEUE ADD PRIORITY 1 '{name}:k' '{{}}'".encode())
    return time.perf_counter() - t0


def _summary(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(p99, 3), "max_ms": round(ordered[-1], 3)}


def _scrape(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        size = len(resp.read())
    return (time.perf_counter() - t0) * 1000, size


def run(prefixes: int, long_names: bool, scrapes: int, baseline_s: float, interval_s: float,
        server_args: list[str]) -> dict[str, object]:
    server = start_cubequeue(*server_args, test_clock=False)
    try:
        fill_s = _fill(server, prefixes, long_names)
        url = f"{server.http_url}/metrics"
        first_ms, _ = _scrape(url)  # above 8,192 prefixes: maybe without per-prefix rows
        time.sleep(first_ms / 1000 + 1)  # ...while the census it started finishes
        _scrape(url)
        probe = Probe(server.dsn)
        probe.start()
        time.sleep(0.3)
        probe.recording.set()
        time.sleep(baseline_s)
        baseline = probe.take()
        times, sizes = [], []
        for _ in range(scrapes):
            took, size = _scrape(url)
            times.append(round(took, 1))
            sizes.append(size)
            time.sleep(interval_s)  # the census this scrape started runs meanwhile
        during = probe.take()
        probe.recording.clear()
        probe.done.set()
        probe.join(timeout=10)
        probe.conn.close()
    finally:
        server.stop()
    report: dict[str, object] = {
        "prefixes": prefixes + (30 if long_names else 0),
        "long_names": long_names,
        "fill_s": round(fill_s, 1),
        "first_scrape_ms": round(first_ms, 1),
        "scrape_ms": times,
        "interval_s": interval_s,
        "scrape_bytes": max(sizes) if sizes else 0,
        "probe_baseline": _summary(baseline),
        "probe_during_scrapes": _summary(during),
    }
    worst = _summary(during).get("max_ms", 0.0)
    report["target"] = f"probe max during scrapes <= {TARGET_MS:g} ms over baseline"
    report["met"] = worst <= _summary(baseline).get("max_ms", 0.0) + TARGET_MS
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefixes", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="10^5 prefixes")
    parser.add_argument("--long-names", action="store_true",
                        help="30 more prefixes with 1 MiB names")
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--baseline-s", type=float, default=3.0)
    parser.add_argument("--interval-s", type=float, default=0.0,
                        help="pause after each scrape, the probe still recording (a large "
                             "store's scrape starts a census that runs after its answer)")
    parser.add_argument("server_args", nargs="*", help="flags for the server (after --)")
    args = parser.parse_args()
    prefixes = 100_000 if args.quick else args.prefixes
    print(json.dumps(run(prefixes, args.long_names, args.scrapes, args.baseline_s,
                         args.interval_s, args.server_args), indent=2))


if __name__ == "__main__":
    main()
