"""/metrics over a real in-memory store (test clock, small injected limits): a scrape walks
the prefixes in bounded slices across event-loop turns (issue 23 item 6; the console's depth
sampler too), long prefix names are cut once, and the alerting families of issue 27 (oldest pending age, stalled
items, departures by reason, build info, refused connections, the PostgreSQL pool)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cubequeue.grammar import parse
from cubequeue.server import __version__
from cubequeue.server.console import sampler as sampler_module
from cubequeue.server.console.ring import DepthRing
from cubequeue.server.console.sampler import Sampler, next_delay
from cubequeue.server.console.source import StoreReader
from cubequeue.server.context import ConnectionRegistry
from cubequeue.server.errors import TooManyConnections
from cubequeue.server.metrics import OTHER, Metrics
from cubequeue.server.metrics import prefixes as metrics_module
from cubequeue.storage.capabilities import PoolHealth
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.prefixes import PrefixState
from cubequeue.storage.stats import DEPARTURE_REASONS
from cubequeue.storage.store import MemoryStore

T0 = 1_700_000_000_000
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def run(store: MemoryStore, sql: str) -> Any:
    return store.execute(parse(sql))


def parsed(body: bytes) -> Samples:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def by_prefix(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["prefix"]: v for (n, labels), v in samples.items() if n == name}


def scrape(metrics: Metrics) -> Samples:
    async def go() -> bytes:
        body, _ = await metrics.scrape("", "")
        return body

    return parsed(asyncio.run(go()))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many prefix states have been read, as a one-element list."""
    calls = [0]
    sample = PrefixState.sample

    def counting(self: PrefixState, now: int, stalled_after_ms: int) -> Any:
        calls[0] += 1
        return sample(self, now, stalled_after_ms)

    monkeypatch.setattr(PrefixState, "sample", counting)
    return calls


def deep_store(n: int) -> MemoryStore:
    """Prefix ``p<i>`` holds ``i + 1`` pending items."""
    store = MemoryStore(FakeClock(T0))
    for i in range(n):
        for k in range(i + 1):
            run(store, f"QUEUE ADD PRIORITY 1 'p{i:02d}:k{k}' 'x'")
    return store


# --- issue 23 item 6: a scrape's turns are bounded ------------------------------------


def test_a_scrape_reads_at_most_one_slice_of_prefixes_per_loop_turn(counted: list[int]) -> None:
    store = deep_store(20)
    metrics = Metrics(store, prefix_limit=3, walk_slice=4)
    per_turn: list[int] = []

    async def go() -> bytes:
        done = False

        async def ticker() -> None:  # one step per loop turn while the scrape runs
            last = counted[0]
            while not done:
                await asyncio.sleep(0)
                per_turn.append(counted[0] - last)
                last = counted[0]

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        body, _ = await metrics.scrape("", "")
        done = True
        await tick
        return body

    got = parsed(asyncio.run(go()))
    assert counted[0] == 20  # every prefix read once...
    assert max(per_turn) <= 4  # ...never more than one slice in a turn
    assert sum(1 for n in per_turn if n) >= 5
    pending = by_prefix(got, "cubequeue_queue_pending")
    assert pending == {"p19": 20, "p18": 19, "p17": 18, OTHER: sum(range(1, 18))}
    assert got[("cubequeue_queue_prefixes", ())] == 20
    assert got[("cubequeue_queue_items", ())] == sum(range(1, 21))


def test_render_for_still_reads_the_whole_store_at_once(counted: list[int]) -> None:
    store = deep_store(6)
    body, _ = Metrics(store, prefix_limit=2, walk_slice=4).render_for("", "")
    pending = by_prefix(parsed(body), "cubequeue_queue_pending")
    assert pending == {"p05": 6, "p04": 5, OTHER: 1 + 2 + 3 + 4}
    assert counted[0] == 6


def test_the_ranking_keeps_only_the_deepest_between_slices() -> None:
    top = metrics_module._TopPrefixes(2)
    top.add([(-1, "a", 1, 0, 10, 0), (-5, "b", 4, 1, 20, 1), (-3, "c", 3, 0, 30, 0)])
    assert len(top._pool) == 2
    top.add([(-5, "a0", 5, 0, 99, 2), (-2, "d", 1, 1, None, 0)])
    assert len(top._pool) == 2
    rows = top.rows(lambda name: name)
    assert rows == [("a0", 5, 0, 99, 2), ("b", 4, 1, 20, 1), (OTHER, 5, 1, 30, 0)]


def test_a_truncate_during_a_scrape_is_not_an_error() -> None:
    store = deep_store(8)
    metrics = Metrics(store, prefix_limit=3, walk_slice=2)

    async def go() -> bytes:
        scraping = asyncio.create_task(metrics.scrape("", ""))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        run(store, "QUEUE TRUNCATE")
        while store.run_deferred(1):  # release the truncated states' indexes
            await asyncio.sleep(0)
        body, _ = await scraping
        return body

    got = parsed(asyncio.run(go()))
    pending = by_prefix(got, "cubequeue_queue_pending")
    # the prefixes read before the TRUNCATE keep their counts; none read after it
    assert set(pending) <= {"p07", "p06", "p05", "p04", "p03", "p02", "p01", "p00", OTHER}
    assert got[("cubequeue_queue_items", ())] == 36  # read when the scrape began


def test_concurrent_scrapes_share_one_census(counted: list[int]) -> None:
    store = deep_store(10)
    metrics = Metrics(store, prefix_limit=3, walk_slice=3)

    async def go() -> list[tuple[bytes, list[tuple[str, str]]]]:
        return list(await asyncio.gather(*(metrics.scrape("", "") for _ in range(3))))

    bodies = asyncio.run(go())
    assert counted[0] == 10
    assert len({by_prefix(parsed(b), "cubequeue_queue_pending")["p09"] for b, _ in bodies}) == 1


def test_one_mib_prefix_names_are_cut_once(monkeypatch: pytest.MonkeyPatch) -> None:
    mib = 1024 * 1024
    store = MemoryStore(FakeClock(T0))
    for i in range(30):
        run(store, f"QUEUE ADD PRIORITY 1 '{chr(97 + i % 26) * mib}{i}:k' 'x'")
    cuts: list[int] = []
    truncate = metrics_module.truncate_label

    def counting(value: str, max_bytes: int = 200) -> str:
        cuts.append(len(value))
        return truncate(value, max_bytes)

    monkeypatch.setattr(metrics_module, "truncate_label", counting)
    metrics = Metrics(store)
    for _ in range(3):
        got = scrape(metrics)
    assert len(cuts) == 30  # once per name, not once per name per scrape
    labels = by_prefix(got, "cubequeue_queue_pending")
    # 30 names, 26 once cut (i and i + 26 share their first 197 bytes): summed
    assert len(labels) == 26 and all(len(k.encode()) <= 200 for k in labels)
    # the cuts are kept for the names exported, not for names the store dropped since
    run(store, "QUEUE TRUNCATE")
    while store.run_deferred():
        pass
    scrape(metrics)
    assert metrics._labels._cut == {}


# --- issue 27: metrics an alert can use ---------------------------------------------------


def test_oldest_pending_age_and_stalled_items_per_prefix() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    run(store, "QUEUE ADD PRIORITY 1 'a:1' 'x'")
    clock.advance(5_000)
    run(store, "QUEUE ADD PRIORITY 1 'a:2' 'x'")
    run(store, "QUEUE ADD PRIORITY 1 'b:1' 'x'")
    run(store, "QUEUE ADD PRIORITY 1 'b:2' 'x'")
    run(store, "QUEUE RETRIEVE CONCURRENCY 2 'b:1'")
    run(store, "QUEUE RETRIEVE CONCURRENCY 2 'b:2'")
    clock.advance(60_000)
    run(store, "QUEUE HEARTBEAT 'b:2'")
    clock.advance(70_000)  # b:1's heartbeat is 130 s old, b:2's 70 s
    metrics = Metrics(store)
    got = scrape(metrics)
    assert by_prefix(got, "cubequeue_queue_oldest_pending_age_seconds") == {"a": 135.0}
    assert by_prefix(got, "cubequeue_queue_stalled") == {"a": 0, "b": 1}  # default 120 s
    # the prefix's own STALLED timeout, once a client sent one, is the threshold
    run(store, "QUEUE STALLED 60000 'b'")
    assert by_prefix(scrape(metrics), "cubequeue_queue_stalled")["b"] == 2
    assert by_prefix(scrape(Metrics(store, stalled_after_ms=1_000)),
                     "cubequeue_queue_stalled")["b"] == 2


def test_the_folded_prefixes_report_their_oldest_age_and_summed_stalls() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    run(store, "QUEUE ADD PRIORITY 1 'old:1' 'x'")
    clock.advance(10_000)
    for k in range(3):
        run(store, f"QUEUE ADD PRIORITY 1 'deep:{k}' 'x'")
    got = scrape(Metrics(store, prefix_limit=1, walk_slice=1))
    assert by_prefix(got, "cubequeue_queue_oldest_pending_age_seconds") == {
        "deep": 0.0, OTHER: 10.0}


def test_departures_by_reason() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    for k in range(10):
        run(store, f"QUEUE ADD PRIORITY 1 'q:{k}' 'x'")
    run(store, "QUEUE ADD PRIORITY 1 ORPHANED 1 'o:1' 'x'")
    run(store, "QUEUE RETRIEVE CONCURRENCY 5 'q:0'")
    run(store, "QUEUE ACK 'q:0' 'done'")
    run(store, "QUEUE CANCEL 'q:1'")
    run(store, "QUEUE TO_CANCEL 1000 1000 'o'")
    clock.advance(2_000)
    run(store, "QUEUE TO_CANCEL 1000 1000 'o'")
    run(store, "QUEUE CANCEL 'o:1'")
    run(store, "QUEUE PURGE PENDING 'q'")  # q:2..q:9
    run(store, "QUEUE ADD PRIORITY 1 'r:1' 'x'")
    run(store, "QUEUE ADD PRIORITY 1 'r:2' 'x'")
    run(store, "QUEUE TRUNCATE")
    run(store, "QUEUE ADD PRIORITY 1 's:1' 'x'")
    clock.advance(5 * 3_600_000)
    run(store, "QUEUE LIST 's'")  # the step's sweep expires s:1
    got = scrape(Metrics(store))
    departures = {dict(labels)["reason"]: v for (n, labels), v in got.items()
                  if n == "cubequeue_queue_departures_total"}
    assert departures == {"acked": 1, "cancelled": 1, "cancelled_stalled": 0,
                          "cancelled_orphaned": 1, "expired": 1, "truncated": 2,
                          "purged": 8}
    assert set(departures) == set(DEPARTURE_REASONS)


def test_build_info_and_refused_connections() -> None:
    metrics = Metrics(MemoryStore(FakeClock(T0)))
    registry = ConnectionRegistry(max_connections=1, max_per_user=1, max_unauthenticated=1,
                                  metrics=metrics)
    registry.open("pg", "u", "peer", lambda: None)
    for _ in range(2):
        with pytest.raises(TooManyConnections):
            registry.open("pg", "v", "peer", lambda: None)
    registry.open_pending("pg", "peer", lambda: None)
    with pytest.raises(TooManyConnections):
        registry.open_pending("pg", "peer", lambda: None)
    got = scrape(metrics)
    assert got[("cubequeue_build_info", (("version", __version__),))] == 1
    refused = {dict(labels)["cap"]: v for (n, labels), v in got.items()
               if n == "cubequeue_connections_refused_total"}
    assert refused == {"max_connections": 2, "max_connections_per_user": 0,
                       "max_unauthenticated_connections": 1}


class PoolStore:
    """A store with a pool (what the PostgreSQL store reports), and a list of prefixes."""

    def __init__(self) -> None:
        self.health = PoolHealth(open=3, in_use=1, max_size=10, reachable=False,
                                 errors={"unreachable": 4, "timeout": 1})

    def stats(self) -> Any:
        from cubequeue.storage.stats import PrefixCounts, StoreStats

        return StoreStats(prefixes=[PrefixCounts("q", 2, 1)], items_total=3)

    def pool_health(self) -> PoolHealth:
        return self.health


def test_pool_health_of_a_store_that_reports_it() -> None:
    got = scrape(Metrics(PoolStore()))
    assert got[("cubequeue_store_connections", ())] == 3
    assert got[("cubequeue_store_connections_in_use", ())] == 1
    assert got[("cubequeue_store_connections_max", ())] == 10
    assert got[("cubequeue_store_reachable", ())] == 0
    errors = {dict(labels)["kind"]: v for (n, labels), v in got.items()
              if n == "cubequeue_store_errors_total"}
    assert errors == {"unreachable": 4, "in_doubt": 0, "timeout": 1, "database": 0}
    # a list of prefix counts (no census) is walked the same way; it has no departures
    assert by_prefix(got, "cubequeue_queue_pending") == {"q": 2}
    assert not [n for n, _ in got if n == "cubequeue_queue_departures_total"]
    memory = scrape(Metrics(MemoryStore(FakeClock(T0))))
    assert not [n for n, _ in memory if n.startswith("cubequeue_store_")]




def test_the_console_sampler_reads_the_census_a_slice_per_turn(
        counted: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The console's once-a-second depth sample read every prefix in one turn (and
    sorted them all): at 10^6 prefixes, seconds of stall every second."""
    monkeypatch.setattr(sampler_module, "WALK_SLICE", 3)
    store = deep_store(12)
    run(store, "QUEUE ADD PRIORITY 1 'p11:more' 'x'")  # p11: 13 items, p10: 11...
    per_ring = DepthRing(per_sample=4)
    whole = DepthRing(per_sample=4)
    sampler = Sampler(StoreReader(store, store.now_ms), per_ring, lambda: 0.0)
    per_turn: list[int] = []

    async def go() -> None:
        done = False

        async def ticker() -> None:
            last = counted[0]
            while not done:
                await asyncio.sleep(0)
                per_turn.append(counted[0] - last)
                last = counted[0]

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        await sampler.sample_once()
        done = True
        await tick

    asyncio.run(go())
    assert counted[0] == 12 and max(per_turn) <= 3
    got = per_ring.series(top=4)
    expected = whole.record(0, list(store.stats().prefixes))  # the whole list at once
    assert set(got.prefixes) == set(expected.depths) == {"p11", "p10", "p09", "p08"}
    assert not expected.complete and not per_ring._samples[-1].complete
    assert per_ring._samples[-1].depths == expected.depths


def test_a_large_store_is_answered_from_the_previous_census_while_the_next_is_taken() -> None:
    """Above ``fresh_prefixes`` a scrape does not wait for a walk of the whole store (at
    10^6 prefixes a walk takes seconds, and the HTTP server gives a request 10 s): the
    totals are read now, the per-prefix rows come from the latest census, and the next
    census is taken for the scrape after."""
    now = [0.0]
    store = deep_store(10)
    metrics = Metrics(store, prefix_limit=2, walk_slice=3, fresh_prefixes=4,
                      census_max_age_s=60, clock=lambda: now[0])

    async def go() -> list[Samples]:
        out = [parsed((await metrics.scrape("", ""))[0])]  # no census yet: waits for one
        for k in range(20):
            run(store, f"QUEUE ADD PRIORITY 1 'p00:x{k}' 'x'")  # p00 becomes the deepest
        out.append(parsed((await metrics.scrape("", ""))[0]))  # at once: previous rows
        while metrics._census_task is not None:  # the census it started
            await asyncio.sleep(0)
        out.append(parsed((await metrics.scrape("", ""))[0]))
        now[0] = 61.0  # the census is too old now: the scrape waits for a new one
        run(store, "QUEUE ADD PRIORITY 1 'p01:x' 'x'")
        out.append(parsed((await metrics.scrape("", ""))[0]))
        return out

    first, stale, fresh, waited = asyncio.run(go())
    assert set(by_prefix(first, "cubequeue_queue_pending")) == {"p09", "p08", OTHER}
    assert set(by_prefix(stale, "cubequeue_queue_pending")) == {"p09", "p08", OTHER}
    assert stale[("cubequeue_queue_items", ())] == 55 + 20  # totals are read at once
    assert by_prefix(fresh, "cubequeue_queue_pending")["p00"] == 21
    # p00 (21) and p09 (10) kept; p01 (2 + the new item) to p08 (9) folded
    assert by_prefix(waited, "cubequeue_queue_pending")[OTHER] == sum(range(2, 10)) + 1


def test_the_first_scrape_of_a_large_store_is_answered_without_rows_rather_than_failed(
        ) -> None:
    store = deep_store(10)
    metrics = Metrics(store, prefix_limit=2, walk_slice=1, fresh_prefixes=4, first_wait_s=0)

    async def go() -> tuple[Samples, Samples]:
        first = parsed((await metrics.scrape("", ""))[0])
        while metrics._census_task is not None:  # the census goes on without the scrape
            await asyncio.sleep(0)
        return first, parsed((await metrics.scrape("", ""))[0])

    first, second = asyncio.run(go())
    assert by_prefix(first, "cubequeue_queue_pending") == {}
    assert first[("cubequeue_queue_items", ())] == 55
    assert set(by_prefix(second, "cubequeue_queue_pending")) == {"p09", "p08", OTHER}


def test_a_slow_console_sample_is_followed_by_a_longer_pause() -> None:
    """At 10^6 prefixes a sample reads the store in slices for seconds: sampling once a
    second would keep a core busy. It takes at most a fifth of the time."""
    assert next_delay(1.0, 0.01) == 1.0
    assert next_delay(1.0, 2.0) == 8.0
