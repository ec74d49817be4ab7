"""The depth ring: pending and active per prefix, one sample a second, 15 minutes kept.

Pure and bounded: :meth:`DepthRing.record` is handed the store's per-prefix counts (the
sampler reads them), keeps only the ``per_sample`` deepest prefixes of each sample and
forgets samples beyond ``capacity``, so memory is O(capacity x per_sample) however many
prefixes the store holds. "Busiest" means the largest summed depth over the window; the
sums are kept incrementally (added on record, subtracted on eviction), so choosing the
chart's prefixes costs O(prefixes in the window), not a pass over every sample.

Samples are numbered (``seq``) so a client can ask for what it has not seen yet even when
the store's clock jumps (``SYS CLOCK ADVANCE``): times are the store's, order is the ring's.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cubequeue.storage.stats import PrefixDepth

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_PER_SAMPLE", "DepthRing", "DepthSample", "DepthSeries"]

#: 15 minutes at one sample a second
DEFAULT_CAPACITY = 900
#: prefixes kept per sample; a prefix beyond them reads as "unknown" (None) in that sample
DEFAULT_PER_SAMPLE = 20


@dataclass(frozen=True, slots=True)
class DepthSample:
    seq: int
    at_ms: int
    #: prefix -> (pending, active) for the deepest prefixes at that instant
    depths: dict[str, tuple[int, int]]
    #: True when every prefix of the store fitted, so an absent prefix had depth 0
    complete: bool


@dataclass(frozen=True, slots=True)
class DepthSeries:
    """Column-wise series, the layout uPlot draws: ``at_ms[i]`` is the time of point i."""

    last_seq: int
    prefixes: tuple[str, ...]
    at_ms: list[int]
    pending: dict[str, list[int | None]]
    active: dict[str, list[int | None]]


class DepthRing:
    __slots__ = ("_per_sample", "_samples", "_seq", "_sums")

    def __init__(self, capacity: int = DEFAULT_CAPACITY,
                 per_sample: int = DEFAULT_PER_SAMPLE) -> None:
        if capacity < 1 or per_sample < 1:
            raise ValueError("a depth ring needs room for one sample of one prefix")
        self._samples: deque[DepthSample] = deque(maxlen=capacity)
        self._per_sample = per_sample
        self._sums: dict[str, int] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def per_sample(self) -> int:
        """The most prefixes a sample keeps."""
        return self._per_sample

    @property
    def last_seq(self) -> int:
        return self._seq

    def record(self, at_ms: int, prefixes: Iterable[PrefixDepth]) -> DepthSample:
        """Append one sample; the oldest falls out once the ring is full."""
        all_prefixes = [p for p in prefixes if p.pending or p.active]
        deepest = heapq.nlargest(self._per_sample, all_prefixes,
                                 key=lambda p: (p.pending + p.active, p.prefix))
        self._seq += 1
        sample = DepthSample(
            seq=self._seq,
            at_ms=at_ms,
            depths={p.prefix: (p.pending, p.active) for p in deepest},
            complete=len(deepest) == len(all_prefixes),
        )
        samples = self._samples
        if len(samples) == samples.maxlen:
            self._forget(samples[0])
        samples.append(sample)
        sums = self._sums
        for prefix, (pending, active) in sample.depths.items():
            sums[prefix] = sums.get(prefix, 0) + pending + active
        return sample

    def _forget(self, sample: DepthSample) -> None:
        sums = self._sums
        for prefix, (pending, active) in sample.depths.items():
            left = sums[prefix] - pending - active
            if left:
                sums[prefix] = left
            else:
                del sums[prefix]

    def busiest(self, top: int, match: Callable[[str], bool] | None = None) -> tuple[str, ...]:
        """The ``top`` prefixes with the largest summed depth over the window, among those
        that hold items in the latest sample (an emptied prefix leaves the chart and its
        legend) and, given ``match``, that it accepts (the page's filter)."""
        latest = self._samples[-1].depths if self._samples else {}
        candidates = ((prefix, total) for prefix, total in self._sums.items()
                      if prefix in latest and (match is None or match(prefix)))
        ranked = heapq.nlargest(top, candidates, key=lambda kv: (kv[1], kv[0]))
        return tuple(prefix for prefix, _ in ranked)

    def series(self, top: int, since_seq: int = 0,
               prefixes: tuple[str, ...] | None = None,
               match: Callable[[str], bool] | None = None) -> DepthSeries:
        """Samples after ``since_seq`` for ``prefixes`` (default: the ``top`` busiest of
        those ``match`` accepts)."""
        chosen = self.busiest(top, match) if prefixes is None else prefixes
        samples = self._samples
        start = len(samples)
        while start > 0 and samples[start - 1].seq > since_seq:
            start -= 1  # new samples sit at the end: walk back only over those
        picked = [samples[i] for i in range(start, len(samples))]
        pending: dict[str, list[int | None]] = {}
        active: dict[str, list[int | None]] = {}
        for prefix in chosen:
            p_col: list[int | None] = []
            a_col: list[int | None] = []
            for sample in picked:
                depth = sample.depths.get(prefix)
                if depth is not None:
                    p_col.append(depth[0])
                    a_col.append(depth[1])
                elif sample.complete:
                    p_col.append(0)
                    a_col.append(0)
                else:
                    p_col.append(None)
                    a_col.append(None)
            pending[prefix] = p_col
            active[prefix] = a_col
        return DepthSeries(self._seq, chosen, [s.at_ms for s in picked], pending, active)
