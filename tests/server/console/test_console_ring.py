"""The depth ring against a naive model: bounded, busiest by summed depth, deltas by seq."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.console.ring import DepthRing


@dataclass(frozen=True)
class P:
    prefix: str
    pending: int
    active: int


samples_st = st.lists(
    st.dictionaries(st.sampled_from("abcdefg"), st.tuples(st.integers(0, 50), st.integers(0, 50)),
                    max_size=7),
    max_size=40,
)


@settings(deadline=None, max_examples=200)
@given(samples=samples_st, capacity=st.integers(1, 12), per_sample=st.integers(1, 7),
       top=st.integers(1, 7))
def test_ring_matches_a_naive_model(samples, capacity, per_sample, top) -> None:
    ring = DepthRing(capacity, per_sample)
    kept: list[dict[str, tuple[int, int]]] = []
    for t, depths in enumerate(samples):
        ring.record(t * 1000, [P(k, p, a) for k, (p, a) in depths.items()])
        nonzero = {k: v for k, v in depths.items() if v[0] or v[1]}
        deepest = sorted(nonzero.items(), key=lambda kv: (kv[1][0] + kv[1][1], kv[0]),
                         reverse=True)[:per_sample]
        kept.append(dict(deepest))
    window = kept[-capacity:]
    assert len(ring) == len(window)
    sums: dict[str, int] = {}
    for depths in window:
        for k, (p, a) in depths.items():
            sums[k] = sums.get(k, 0) + p + a
    latest = window[-1] if window else {}
    expected = [k for k, _ in sorted(((k, v) for k, v in sums.items() if v and k in latest),
                                     key=lambda kv: (kv[1], kv[0]), reverse=True)[:top]]
    assert list(ring.busiest(top)) == expected
    series = ring.series(top)
    assert len(series.at_ms) == len(window)
    for k in series.prefixes:
        for i, depths in enumerate(window):
            got = series.pending[k][i]
            if k in depths:
                assert got == depths[k][0] and series.active[k][i] == depths[k][1]
            else:
                assert got in (0, None)


def test_series_since_returns_only_new_samples() -> None:
    ring = DepthRing(5, 3)
    for t in range(8):
        ring.record(t, [P("q", t, 0)])
    assert ring.last_seq == 8
    full = ring.series(3)
    assert full.at_ms == [3, 4, 5, 6, 7]
    delta = ring.series(3, since_seq=6)
    assert delta.at_ms == [6, 7] and delta.pending["q"] == [6, 7]
    assert ring.series(3, since_seq=8).at_ms == []


def test_absent_prefix_is_zero_when_the_sample_was_complete_else_unknown() -> None:
    ring = DepthRing(10, 1)
    ring.record(0, [P("a", 5, 0), P("b", 1, 0)])  # b cut: the sample is incomplete
    ring.record(1, [P("a", 5, 0)])                # complete: b had depth 0
    series = ring.series(2, prefixes=("a", "b"))
    assert series.pending["b"] == [None, 0]


def test_busiest_forgets_evicted_samples() -> None:
    ring = DepthRing(2, 5)
    ring.record(0, [P("old", 100, 0)])
    ring.record(1, [P("new", 1, 0)])
    ring.record(2, [P("new", 1, 0)])
    assert ring.busiest(5) == ("new",)


def test_an_emptied_prefix_leaves_the_chart_and_a_filter_narrows_it() -> None:
    ring = DepthRing(10, 5)
    ring.record(0, [P("done", 50, 0), P("orders", 1, 0), P("reports", 2, 0)])
    ring.record(1, [P("done", 0, 0), P("orders", 1, 1), P("reports", 2, 0)])
    assert ring.busiest(5) == ("reports", "orders")  # "done" holds nothing now
    assert ring.busiest(5, match=lambda name: "ord" in name) == ("orders",)
    series = ring.series(5, match=lambda name: name.startswith("rep"))
    assert series.prefixes == ("reports",) and series.pending["reports"] == [2, 2]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        DepthRing(0)
