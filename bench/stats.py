"""Small statistics helpers: percentiles and "median (min–max) over runs"."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Agg", "agg", "pct"]


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass(frozen=True, slots=True)
class Agg:
    median: float
    lo: float
    hi: float
    n: int

    def fmt(self, digits: int = 0) -> str:
        if not self.n:
            return "—"
        if self.n == 1:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} ({self.lo:.{digits}f}–{self.hi:.{digits}f})"


def agg(values: Sequence[float]) -> Agg:
    if not values:
        return Agg(0.0, 0.0, 0.0, 0)
    return Agg(statistics.median(values), min(values), max(values), len(values))
