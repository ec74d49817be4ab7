"""Time from process start to the first successful ``SELECT 1`` ("fast start").

Starts ``python -m cubequeue.server`` on free ports N times, polls the PostgreSQL port
with the stdlib client until ``SELECT 1`` answers, and prints the median and the range.
Run: ``.venv/bin/python bench/startup.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time

from cubequeue.server.pgclient import PgError, connect

TARGET_S = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def time_to_first_select(timeout_s: float = 30.0) -> float:
    port, http_port = _free_port(), _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cubequeue.server", "--port", str(port),
         "--http-port", str(http_port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        while time.perf_counter() - started < timeout_s:
            try:
                with connect("127.0.0.1", port, timeout=1.0) as client:
                    client.query("SELECT 1")
                return time.perf_counter() - started
            except (OSError, PgError):
                time.sleep(0.005)
        raise RuntimeError(f"no answer within {timeout_s} s")
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    times = [time_to_first_select() for _ in range(args.runs)]
    median = statistics.median(times)
    print(
        f"startup to first SELECT 1: median {median * 1000:.0f} ms "
        f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, {args.runs} starts); "
        f"target < {TARGET_S * 1000:.0f} ms: {'met' if median < TARGET_S else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
