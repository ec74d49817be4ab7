"""The fast track's saving (Cube's QueryQueue fast track): round trips from "add" to
"execution starts" and the latency difference, normal path against fast track.

No runs of its own: it reads the cycle runs at idle (C=1, concurrency 2: the slot is
free) and under a saturated budget (C=64, concurrency 2: the fast track must step aside
and fall back to reconcile). Round trips are counted on each query's critical path:
the add (ADD or ADD_AND_RETRIEVE) plus, when reconcile claimed it, that reconcile's
LIST and RETRIEVEs up to the claiming one (PostgreSQL and Redis: their one claim call).
"""

from __future__ import annotations

from bench.cycle import CycleRun
from bench.stats import Agg, agg, pct

__all__ = ["IDLE", "SATURATED", "FastTrackRow", "fast_track_rows", "seed_table"]

IDLE = (1, 2)
SATURATED = (64, 2)


class FastTrackRow:
    """One system × load: normal and fast, aggregated over the runs."""

    def __init__(self, system: str, load: str, normal: list[CycleRun], fast: list[CycleRun]):
        self.system, self.load = system, load
        self.rt_normal: Agg = agg([r.rt_add_to_exec for r in normal])
        self.rt_fast: Agg = agg([r.rt_add_to_exec for r in fast])
        self.claim_normal: Agg = agg([pct(r.add_to_claim_ms, 50) for r in normal])
        self.claim_fast: Agg = agg([pct(r.add_to_claim_ms, 50) for r in fast])
        self.p50_normal: Agg = agg([pct(r.latencies_ms, 50) for r in normal])
        self.p50_fast: Agg = agg([pct(r.latencies_ms, 50) for r in fast])
        self.fast_share: Agg = agg([100 * r.fast_claimed / r.queries for r in fast])

    @property
    def p50_saving(self) -> float:
        """How much lower the fast track's per-query p50 is, in % of the normal path's."""
        if not self.p50_normal.median:
            return 0.0
        return 100 * (1 - self.p50_fast.median / self.p50_normal.median)


def fast_track_rows(runs: dict[tuple[str, int, int, str], list[CycleRun]],
                    systems: tuple[str, ...]) -> list[FastTrackRow]:  # fmt: skip
    rows = []
    for label, (c, conc) in (("idle", IDLE), ("saturated", SATURATED)):
        for system in systems:
            normal = runs.get((system, c, conc, "normal"), [])
            fast = runs.get((system, c, conc, "fast"), [])
            if normal and fast:
                rows.append(FastTrackRow(system, f"{label} (C={c}, concurrency {conc})",
                                         normal, fast))  # fmt: skip
    return rows


def seed_table(row: FastTrackRow | None) -> list[str]:
    """What the fast track saves per query, with our numbers."""
    measured = (
        f"{row.rt_normal.median:.2f} RT normal vs {row.rt_fast.median:.2f} RT fast "
        f"(cubequeue, {row.load})" if row else "not measured"
    )
    return [
        "| Step | Normal (seed) | Fast track (seed) | Measured |",
        "|---|---|---|---|",
        "| `QUEUE ADD` | 1 round-trip | folded into one command | 1 RT either way |",
        "| `QUEUE ACTIVE` + `QUEUE PENDING` (reconcile) | 2 round-trips | skipped | "
        "Cube 1.7.43 sends one `QUEUE LIST` instead: 1 RT normal, 0 fast |",
        "| `QUEUE RETRIEVE` | 1 round-trip | folded into one command | 1 RT normal, 0 fast |",
        f"| add → execution start | 4 (3 with LIST) | 1 | {measured} |",
        "| Window for another node to steal the slot | between ADD and RETRIEVE | none | "
        + (f"add→claim p50 {row.claim_normal.median:.2f} ms normal vs "
           f"{row.claim_fast.median:.2f} ms fast |" if row else "— |"),
    ]  # fmt: skip
