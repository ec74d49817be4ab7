"""The benchmark harness itself: the correctness check must catch duplicates
and losses, and a tiny cycle run must pass it on every system whose binary exists.

Benchmarks are not part of ``make test``; this only proves the harness can tell a good
run from a bad one, in well under a minute.
"""

from __future__ import annotations

import asyncio

import pytest

# the repository root holds the ``bench`` package; pytest puts only tests/ on the path
# (where tests/bench would otherwise be found as a namespace package)
from bench import peers
from bench.adapters import Target, setup
from bench.check import check_run
from bench.cycle import CycleConfig, run_cycle


def test_check_reports_a_duplicate_and_a_loss() -> None:
    submitted = ["q:a", "q:b", "q:c"]
    executed = ["q:a", "q:a", "q:b"]  # a ran twice, c never ran
    results = [("q:a", True), ("q:b", True), ("q:b", True)]  # b answered twice, c lost
    check = check_run(submitted, executed, results)
    assert not check.ok
    assert check.duplicate_executions == ("q:a",)
    assert check.lost_executions == ("q:c",)
    assert check.duplicate_results == ("q:b",)
    assert check.lost_results == ("q:c",)
    text = "\n".join(check.errors)
    assert "duplicate execution: 1" in text and "lost execution: 1" in text
    assert "duplicate result: 1" in text and "lost result: 1" in text


def test_check_reports_wrong_and_unknown_results() -> None:
    check = check_run(["q:a"], ["q:a", "q:z"], [("q:a", False)])
    assert check.wrong_results == ("q:a",)
    assert check.unknown == ("q:z",)
    assert not check.ok


def test_check_accepts_a_clean_run() -> None:
    paths = [f"q:{i}" for i in range(5)]
    check = check_run(paths, list(reversed(paths)), [(p, True) for p in paths])
    assert check.ok and check.errors == ()


_STARTERS = {
    "cubequeue": (peers.start_cubequeue, True),
    "postgres": (peers.start_postgres, peers.have_postgres()),
    "redis": (peers.start_redis, peers.have_redis()),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("system", sorted(_STARTERS))
@pytest.mark.parametrize("fast", [False, True], ids=["normal", "fast"])
def test_tiny_cycle_passes_the_check(system: str, fast: bool) -> None:
    start, available = _STARTERS[system]
    if not available:
        pytest.skip(f"{system} binaries are not installed (make bench-deps)")
    peer = start()
    try:
        target = Target(system, "127.0.0.1", peer.port, peer.dsn)
        asyncio.run(setup(target))
        run = run_cycle(target, peer.pid, CycleConfig(2, 2, fast, 20), "t")
        assert run.ok, (run.check.errors, run.errors)
        assert run.queries == 20 and len(run.latencies_ms) == 20
        assert run.check.lost_results == () and run.check.duplicate_executions == ()
        # every query: lookup, add (or add_and_claim) and one blocking wait at least
        assert run.rt_per_cycle >= 7
        if fast:
            assert run.fast_claimed > 0
        else:
            assert run.rt_add_to_exec >= (3 if system == "cubequeue" else 2)
    finally:
        peer.stop()
