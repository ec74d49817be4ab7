"""The Cube QueryQueue bench itself (bench/cube_queue.py): a short run of Cube's own
QueryQueue from npm against cubequeue's WebSocket must complete queries and answer every
one of them, so a broken bench (a driver upgrade, a protocol change, a lost wake-up) is
caught here and not in the middle of ``make bench``. Figures are printed, never asserted.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

# the repository root holds the ``bench`` package; pytest puts only tests/ on the path
from bench import peers
from bench.cube_queue import QQConfig, QQRun, deps_missing, run_queryqueue

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or deps_missing() is not None,
    reason=f"node or the bench's npm packages are missing ({deps_missing()}; make bench-deps)",
)

SECONDS = 2.0


@pytest.fixture(scope="module")
def server() -> Iterator[peers.Peer]:
    peer = peers.start_cubequeue()
    try:
        yield peer
    finally:
        peer.stop()


def _assert_sane(run: QQRun) -> None:
    assert run.ok, (run.errors, run.check)
    assert run.check is not None and run.check.errors == ()
    assert run.queries > 0
    # every query answered exactly once, with its own result, and executed exactly once
    assert len(run.latencies_ms) == run.queries
    assert run.server_cpu_s > 0 and run.client_cpu_s > 0
    assert run.seconds >= SECONDS
    print(
        f"{run.config.label} conc={run.config.concurrency}: {run.qps:.0f} q/s, "
        f"server {run.server_us_per_query:.0f} µs/q, nodes {run.client_us_per_query:.0f} µs/q"
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("line", "fast"), [("0.35", False), ("1.7", False), ("1.7", True)],
    ids=["cube-0.35", "cube-1.7-normal", "cube-1.7-fast"],
)  # fmt: skip
def test_cube_queryqueue_bench_answers_every_query(server: peers.Peer, line: str,
                                                   fast: bool) -> None:  # fmt: skip
    cfg = QQConfig("cubequeue", line, fast, concurrency=2, processes=2)
    run = run_queryqueue(server, cfg, SECONDS, f"t{line.replace('.', '')}{int(fast)}")
    _assert_sane(run)
    # the server saw Cube's queue protocol, and the fast-track switch took effect
    assert run.statements["QUEUE RESULT_BLOCKING"] > 0 or run.statements["QUEUE RESULT"] > 0
    fast_adds = run.statements["QUEUE ADD_AND_RETRIEVE"]
    assert (fast_adds >= run.queries) if fast else (fast_adds == 0), run.statements
    assert fast or run.statements["QUEUE ADD"] >= run.queries, run.statements


@pytest.mark.timeout(60)
def test_a_dead_server_is_a_rejected_run_not_a_result() -> None:
    peer = peers.start_cubequeue()
    peer.stop()  # nothing listens on its ports any more
    cfg = QQConfig("cubequeue", "0.35", False, 2, processes=1)
    run = run_queryqueue(peer, cfg, 1.0, "dead", ready_timeout_s=5.0)
    assert not run.ok
    assert run.errors and run.queries == 0
