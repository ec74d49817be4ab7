"""Recovery progress: how far the replay is, for the log line, ``/api/v1/overview`` and
the console's progress bar while the server answers 57P03.

Recovery runs in a worker thread and reports a :class:`RecoveryProgress` through a
callback after each snapshot or segment and every :data:`REPORT_BYTES` read (about 7,000
reports at 10^6 items, a few ms);
:class:`ProgressWatch` keeps the latest one (a reference swap, so the event loop reads it
without a lock). Percent is by bytes, the only total known before reading: the snapshot
and the segments to replay, each segment counted up to its last non-zero byte once read
(segments are preallocated with zeros). The time left extrapolates the elapsed time
over the bytes still to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["REPORT_BYTES", "Phase", "ProgressWatch", "RecoveryProgress"]

#: a progress report at least this often, in bytes read
REPORT_BYTES = 64 * 1024

#: ``snapshot``: loading it; ``log``: replaying segments; ``restore``: building the
#: indexes from the recovered state; ``done``
Phase = Literal["snapshot", "log", "restore", "done"]


@dataclass(frozen=True, slots=True)
class RecoveryProgress:
    phase: Phase
    records: int
    bytes_done: int
    bytes_total: int
    elapsed_s: float

    @property
    def percent(self) -> float:
        if self.phase == "done" or self.bytes_total <= 0:
            return 100.0
        return min(100.0, 100.0 * self.bytes_done / self.bytes_total)

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before anything was read."""
        if self.phase == "done":
            return 0.0
        if self.bytes_done <= 0 or self.elapsed_s <= 0:
            return None
        left = max(0, self.bytes_total - self.bytes_done)
        return self.elapsed_s * left / self.bytes_done

    def line(self) -> str:
        eta = self.eta_s
        left = "unknown" if eta is None else f"{eta:.1f} s"
        return (f"recovering ({self.phase}): {self.records} records replayed, "
                f"{self.bytes_done / 1e6:.1f} of {self.bytes_total / 1e6:.1f} MB "
                f"({self.percent:.0f}%), {self.elapsed_s:.1f} s elapsed, {left} left")

    def as_json(self) -> dict[str, object]:
        eta = self.eta_s
        return {
            "phase": self.phase,
            "records": self.records,
            "bytes_done": self.bytes_done,
            "bytes_total": self.bytes_total,
            "percent": round(self.percent, 1),
            "elapsed_s": round(self.elapsed_s, 3),
            "eta_s": None if eta is None else round(eta, 1),
        }


class ProgressWatch:
    """The latest report of one recovery; ``update`` is the callback recovery calls."""

    __slots__ = ("latest",)

    def __init__(self) -> None:
        self.latest: RecoveryProgress | None = None

    def update(self, progress: RecoveryProgress) -> None:
        self.latest = progress

    @property
    def recovering(self) -> bool:
        latest = self.latest
        return latest is not None and latest.phase != "done"
