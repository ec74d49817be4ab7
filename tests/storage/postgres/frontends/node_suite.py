"""Run Cube's QueryQueue node tests (``tests/node/*.test.cjs``) against ``--store postgresql://…``.

Starts a throwaway PostgreSQL (Debian's binaries, loopback, a temporary directory), then
runs each test file with its own fresh database: the node helpers start their servers with
the flags in ``CUBEQUEUE_NODE_SERVER_ARGS``, and one file's queue, cache and test clock
must not leak into the next. ``--front-ends 2`` is not offered: the helpers start one
server per suite; two front ends are covered by ``tests/storage/postgres/frontends/test_pgstore_servers.py``.

Usage: ``PYTHONPATH=tests/support python tests/storage/postgres/frontends/node_suite.py [test files…]`` (default: every
``tests/node/*.test.cjs``); the exit status is the number of failed files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pgcluster import start_cluster

ROOT = Path(__file__).resolve().parents[4]
NODE_DIR = ROOT / "tests" / "node"


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(NODE_DIR.glob("*.test.cjs"))
    cluster = start_cluster()
    failed = 0
    try:
        for n, file in enumerate(files, 1):
            dsn = cluster.create_database(f"node{n}")
            env = {**os.environ,
                   "CUBEQUEUE_NODE_SERVER_ARGS": f"--store {dsn}"}
            print(f"--- {file.name} with --store {dsn}", flush=True)
            done = subprocess.run(["node", "--test", "--test-concurrency=1", str(file)],
                                  env=env, cwd=ROOT, check=False)
            failed += done.returncode != 0
    finally:
        cluster.stop()
    print(f"--- node tests over PostgreSQL: {len(files) - failed} of {len(files)} files passed")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
