"""The server CPU one open console costs, in ms per second (target: under 5 ms/s).

Three servers' worth of A/B, back to back, on the same workload (``--prefixes`` prefixes
of ``--items`` items each, some active): the server with ``--console-auth off`` (no
sampler, no console), the server with the console on but no page open (the 1 s sampler
alone), and the same with one headless Chromium page polling it. CPU is the server
process' ``utime + stime`` from /proc over ``--seconds``; the machine is shared, so each
mode is measured ``--pairs`` times interleaved and the medians are reported with the
differences: "console" = page open minus sampler only, "sampler" = sampler minus off.

Run: ``.venv/bin/python bench/console.py [--seconds 20] [--pairs 2]`` (needs playwright
and Debian's ``chromium``, as the browser tests do).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench.cpu import tree_cpu_s
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

TARGET_MS_PER_S = 5.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _workload(server: CubequeueServer, prefixes: int, items: int) -> None:
    statements = []
    for p in range(prefixes):
        for i in range(items):
            statements.append(f"QUEUE ADD PRIORITY {i % 5} 'bench{p}:k{i}' '{{\"sql\":\"SELECT {i}\"}}'")
        statements.append(f"QUEUE RETRIEVE CONCURRENCY 2 'bench{p}:k0'")
    for start in range(0, len(statements), 200):
        server.query(";".join(statements[start:start + 200]))


def _cpu_ms_per_s(server: CubequeueServer, seconds: float,
                  during: Callable[[], None] | None = None) -> float:
    pid = server.process.pid
    before, t0 = tree_cpu_s(pid), time.monotonic()
    deadline = t0 + seconds
    while time.monotonic() < deadline:
        if during is not None:
            during()
        time.sleep(0.2)
    return (tree_cpu_s(pid) - before) * 1000 / (time.monotonic() - t0)


def _measure(mode: str, seconds: float, prefixes: int, items: int) -> float:
    args = ("--console-auth", "off") if mode == "off" else ()
    server = start_cubequeue(*args, "--log-level", "warning")
    try:
        _workload(server, prefixes, items)
        if mode != "page":
            time.sleep(2)  # let start-up and the workload's tail settle
            return _cpu_ms_per_s(server, seconds)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(server.http_url + "/")
                page.wait_for_selector("#prefix-rows tr[data-prefix]", timeout=30_000)
                time.sleep(2)
                polls_before = int(page.evaluate("document.body.dataset.polls || 0"))
                # playwright's sync API must be pumped: wait_for_timeout lets the page run
                cost = _cpu_ms_per_s(server, seconds, lambda: page.wait_for_timeout(50))
                polls = int(page.evaluate("document.body.dataset.polls || 0")) - polls_before
                print(f"    page made {polls} polls in {seconds:g} s")
                return cost
            finally:
                browser.close()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--prefixes", type=int, default=50)
    parser.add_argument("--items", type=int, default=20)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"off": [], "sampler": [], "page": []}
    for n in range(args.pairs):
        for mode in results:
            value = _measure(mode, args.seconds, args.prefixes, args.items)
            results[mode].append(value)
            print(f"  pair {n + 1} {mode:8s} {value:6.2f} ms/s server CPU")
    median = {mode: statistics.median(values) for mode, values in results.items()}
    console = median["page"] - median["sampler"]
    sampler = median["sampler"] - median["off"]
    print(f"console off {median['off']:.2f} ms/s, sampler only {median['sampler']:.2f} ms/s, "
          f"one open page {median['page']:.2f} ms/s (medians of {args.pairs})")
    print(f"sampler costs {sampler:.2f} ms/s; one open console costs {console:.2f} ms/s "
          f"(target < {TARGET_MS_PER_S:g} ms/s: ratio {console / TARGET_MS_PER_S:.2f})")


if __name__ == "__main__":
    main()
