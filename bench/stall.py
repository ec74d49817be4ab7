"""Stall benchmark: how long one bulk statement holds the event loop for everyone else.

A probe connection runs ``SELECT 1`` back to back (its own thread, its own psycopg
connection) while another connection runs one bulk statement over N queued items (10⁶;
``--quick``: 10⁵): QUEUE PURGE, QUEUE TRUNCATE, the expiry sweep (SYS CLOCK ADVANCE past
every item's expiry, then one step), ORDER BY and count(*) over system.queue (refused
with 54000 above ``--max-sql-rows``), QUEUE LIST of the whole prefix, and MERGE_EXTRA of a large JSON (twice: the second merge parses and prints the
first). Reported: the probe's p99 and max round trip during the statement, and the
statement's own time. Target: no statement stalls the probe more than 50 ms.

The machine is shared, so figures are noisy; compare runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import psycopg

from bench.probe import Probe
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

TARGET_MS = 50.0
PREFIX = "stall"
_BATCH = 2_000
_FOUR_HOURS_MS = 4 * 3_600_000


def _fill(server: CubequeueServer, n: int) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for start in range(0, n, _BATCH):
            sql = ";".join(
                f"QUEUE ADD PRIORITY {i % 5} '{PREFIX}:k{i}' '{{\"i\":{i}}}'"
                for i in range(start, min(n, start + _BATCH))
            )
            conn.execute(sql.encode())


def _measure(server: CubequeueServer, name: str, run: Callable[[psycopg.Connection], None]) -> None:
    probe = Probe(server.dsn)
    probe.start()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        time.sleep(0.2)  # the probe is warm
        probe.recording.set()
        t0 = time.perf_counter()
        outcome = ""
        try:
            run(conn)
        except psycopg.Error as exc:  # a bounded statement refused (54000 names its limit)
            outcome = f"  refused {exc.sqlstate}"
        took = (time.perf_counter() - t0) * 1000
        time.sleep(0.3)  # deferred work after the answer counts too
        probe.recording.clear()
    probe.done.set()
    probe.join()
    probe.conn.close()
    samples = sorted(probe.samples) or [0.0]
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    worst = samples[-1]
    verdict = "ok" if worst < TARGET_MS else "OVER"
    print(f"  {name:28s} statement {took:9.1f} ms  probe p99 {p99:7.1f} ms  max {worst:7.1f} ms"
          f"  median {statistics.median(samples):5.2f} ms  ({len(samples)} probes)  {verdict}"
          f"{outcome}")


def _claim(server: CubequeueServer, n: int) -> None:
    """Claim ``n`` items of the prefix (every tenth), so LIST merges two sets."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for start in range(0, n, _BATCH):
            sql = ";".join(f"QUEUE RETRIEVE CONCURRENCY {n + 1} '{PREFIX}:k{i * 10}'"
                           for i in range(start, min(n, start + _BATCH)))
            conn.execute(sql.encode())


def _reader(server: CubequeueServer, sql: str) -> Callable[[psycopg.Connection], None]:
    """Read every row of ``sql`` in another process: psql when installed (a simple
    Query), else a Python child with psycopg (the extended protocol). Decoding 10⁶ rows
    in this process would hold its GIL and stall the probe thread, not the server."""
    psql = shutil.which("psql")
    if psql is not None:
        argv = [psql, server.dsn, "-X", "-q", "-A", "-t", "-o", "/dev/null", "-c", sql]
    else:
        argv = [sys.executable, "-c", "import psycopg, sys; "
                "psycopg.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()", server.dsn, sql]
    return lambda _conn: subprocess.run(argv, check=True, timeout=600)


def _lists(server: CubequeueServer, n: int) -> None:
    """The listing cases: every row read by a client in another process."""
    _measure(server, "QUEUE LIST (whole prefix)", _reader(server, f"QUEUE LIST '{PREFIX}'"))
    _measure(server, "QUEUE PENDING WITH_PAYLOAD",
             _reader(server, f"QUEUE PENDING WITH_PAYLOAD '{PREFIX}'"))
    _claim(server, n // 10)
    _measure(server, "QUEUE LIST, 10% active", _reader(server, f"QUEUE LIST '{PREFIX}'"))
    _measure(server, "QUEUE ACTIVE (10%)", _reader(server, f"QUEUE ACTIVE '{PREFIX}'"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="10^5 items instead of 10^6")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--lists-only", action="store_true",
                        help="only the QUEUE LIST / PENDING / ACTIVE cases")
    args = parser.parse_args()
    n = args.items or (100_000 if args.quick else 1_000_000)
    extra = json.dumps({f"k{i}": "x" * 80 for i in range(700)})  # ~64 KiB, the cap
    server = start_cubequeue("--log-level", "warning", "--max-items", str(n + 10))
    try:
        print(f"stall of a SELECT 1 client at {n} queued items (target < {TARGET_MS:g} ms)")
        _fill(server, n)
        server.query("SELECT count(*) FROM system.queue_prefixes")  # sqlglot's one-time import
        if args.lists_only:
            _lists(server, n)
            return
        _measure(server, "ORDER BY over system.queue", lambda c: c.execute(
            "SELECT queue_id FROM system.queue ORDER BY priority DESC, queue_id LIMIT 5").fetchall())
        _measure(server, "count(*) over system.queue", lambda c: c.execute(
            "SELECT count(*) FROM system.queue").fetchall())
        _measure(server, "QUEUE LIST (whole prefix)", _reader(server, f"QUEUE LIST '{PREFIX}'"))
        _measure(server, "MERGE_EXTRA 64 KiB, twice", lambda c: [
            c.execute(f"QUEUE MERGE_EXTRA '{PREFIX}:k1' $${extra}$$".encode()) for _ in range(2)])
        _measure(server, "QUEUE PURGE (whole prefix)",
                 lambda c: c.execute(f"QUEUE PURGE '{PREFIX}'").fetchall())
        _fill(server, n)
        _measure(server, "QUEUE TRUNCATE", lambda c: c.execute("QUEUE TRUNCATE"))
        _fill(server, n)
        _measure(server, "expiry sweep", lambda c: [
            c.execute(f"SYS CLOCK ADVANCE {_FOUR_HOURS_MS + 1}"), c.execute("QUEUE GET 'x:y'")])
    finally:
        server.stop()


if __name__ == "__main__":
    main()
