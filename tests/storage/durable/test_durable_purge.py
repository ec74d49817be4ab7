"""QUEUE / CACHE PURGE and TRUNCATE in durable mode: one record each, replayed exactly."""

from __future__ import annotations

import asyncio

from durable_simfs import SimFiles
from durable_testkit import run_sql
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.image import Image
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

DIR = "/data"
T0 = 1_700_000_000_000


async def _open(files: SimFiles, fsync: str = "everysec"):
    store = MemoryStore(FakeClock(T0), Limits(max_items=100_000, cache_max_keys=100_000))
    durable, _ = await open_store(store, data_dir=DIR, fsync=fsync, wall_ms=lambda: T0,
                                  on_fatal=print, files=files, segment_bytes=1 << 20)
    return durable




def _state(durable) -> tuple[dict, dict, dict, dict]:
    """The store's persistent state, by key (the snapshot's own records), with what each
    prefix remembers as system.queue_prefixes shows it."""
    image = Image()
    for part in durable.store.snapshot_slices(1000):
        for rec in part:
            image.apply(rec)
    shown = durable.store.system_table("queue_prefixes")
    remembered = {row[0]: row[6:] for row in shown.rows}
    return image.items, image.results, dict(image.cache), remembered


PREFIXES = ("q", "r", "q:s")
ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(PREFIXES), st.integers(1, 6)),
    st.tuples(st.just("retrieve"), st.sampled_from(PREFIXES), st.integers(1, 3)),
    st.tuples(st.just("concurrency"), st.sampled_from(PREFIXES), st.integers(1, 3)),
    st.tuples(st.just("to_cancel"), st.sampled_from(PREFIXES),
              st.sampled_from(["TO_CANCEL 1000 2000", "TO_CANCEL 3000 4000", "STALLED 500",
                               "ORPHANED 700"])),
    st.tuples(st.just("cancel"), st.sampled_from(PREFIXES), st.integers(0, 5)),
    st.tuples(st.just("ack"), st.sampled_from(PREFIXES), st.integers(0, 5)),
    st.tuples(st.just("purge"), st.sampled_from(PREFIXES),
              st.sampled_from(["", " PENDING", " ACTIVE"])),
    st.tuples(st.just("set"), st.sampled_from(("c", "d", "c:e")), st.integers(1, 4)),
    st.tuples(st.just("cache_purge"), st.sampled_from(("c", "c:*", "d:", "c:e")), st.just(0)),
    st.tuples(st.just("truncate"), st.sampled_from(["QUEUE", "CACHE"]), st.just(0)),
    st.tuples(st.just("persist"), st.just(""), st.just(0)),
), min_size=1, max_size=25)


async def _apply(durable, op: tuple[str, str, object], n: int) -> None:
    kind, arg, count = op
    if kind == "add":
        for i in range(int(count)):  # type: ignore[call-overload]
            await run_sql(durable, f"QUEUE ADD PRIORITY {i % 3} '{arg}:k{n}-{i}' 'p{n}'")
    elif kind == "retrieve":
        for i in range(int(count)):  # type: ignore[call-overload]
            await run_sql(durable, f"QUEUE RETRIEVE CONCURRENCY 100 '{arg}:k{n}-{i}'")
    elif kind == "concurrency":  # a RETRIEVE that claims nothing still records it
        await run_sql(durable, f"QUEUE RETRIEVE CONCURRENCY {count} '{arg}:none'")
    elif kind == "to_cancel":
        await run_sql(durable, f"QUEUE {count} '{arg}'")
    elif kind == "cancel":
        rows = await run_sql(durable, f"QUEUE LIST '{arg}'")
        for row in rows[: int(count)]:  # type: ignore[call-overload]
            await run_sql(durable, f"QUEUE CANCEL {row[1]}")
    elif kind == "ack":
        rows = await run_sql(durable, f"QUEUE ACTIVE '{arg}'")
        for row in rows[: int(count)]:  # type: ignore[call-overload]
            await run_sql(durable, f"QUEUE ACK {row[1]} 'r{n}'")
    elif kind == "purge":
        await run_sql(durable, f"QUEUE PURGE{count} '{arg}'")
    elif kind == "set":
        for i in range(int(count)):  # type: ignore[call-overload]
            await run_sql(durable, f"CACHE SET '{arg}:k{n}-{i}' 'v{n}'")
    elif kind == "cache_purge":
        await run_sql(durable, f"CACHE PURGE '{arg}'")
    elif kind == "truncate":
        await run_sql(durable, f"{arg} TRUNCATE")
    else:
        await run_sql(durable, "SYS CACHESTORE PERSIST")
    durable.run_deferred(None)


@settings(deadline=None, max_examples=30)
@given(ops, ops)
def test_recovery_after_purge_and_truncate_mid_log_equals_the_live_state(before, after):
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        for n, op in enumerate(before):
            await _apply(durable, op, n)
        for prefix in PREFIXES:  # a purge in the middle of the log, then more traffic
            await run_sql(durable, f"QUEUE PURGE PENDING '{prefix}'")
        await run_sql(durable, "CACHE PURGE 'c'")
        for n, op in enumerate(after, start=len(before)):
            await _apply(durable, op, n)
        live = _state(durable)
        again = await _open(files.killed())
        assert _state(again) == live
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())


def test_a_queue_purge_and_its_statuses_replay_exactly():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        for i in range(6):
            await run_sql(durable, f"QUEUE ADD PRIORITY 1 'q:a{i}' 'p'")
            await run_sql(durable, f"QUEUE ADD PRIORITY 1 'qq:a{i}' 'p'")
        for i in range(3):
            await run_sql(durable, f"QUEUE RETRIEVE CONCURRENCY 10 'q:a{i}'")
        assert await run_sql(durable, "QUEUE PURGE PENDING 'q'") == [(3,)]
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:late' 'p'")  # above the bound: stays
        live = _state(durable)
        disk = files.killed()
        again = await _open(disk)
        assert _state(again) == live
        assert [row[0] for row in await run_sql(again, "QUEUE LIST 'q'")] == [
            "a0", "a1", "a2", "late"]
        assert len(await run_sql(again, "QUEUE LIST 'qq'")) == 6  # another prefix: untouched
        assert await run_sql(again, "QUEUE PURGE ACTIVE 'q'") == [(3,)]
        live = _state(again)
        third = await _open(disk.killed())
        assert _state(third) == live
        for store in (durable, again, third):
            await store.log.close()

    asyncio.run(main())


def test_a_purge_of_ten_thousand_items_grows_the_log_by_one_small_frame():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        for i in range(10_000):
            await run_sql(durable, f"QUEUE ADD PRIORITY 1 'big:{i}' 'p'")
            await run_sql(durable, f"CACHE SET 'cbig:{i}' 'v'")
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'other:1' 'p'")
        stats = durable.log.stats
        before = (stats.bytes, stats.records)
        assert await run_sql(durable, "QUEUE PURGE 'big'") == [(10_000,)]
        assert await run_sql(durable, "CACHE PURGE 'cbig'") == [(10_000,)]
        grown = stats.bytes - before[0]
        assert stats.records - before[1] == 2, "one PURGE record per statement"
        assert grown < 200, f"{grown} bytes for two purges of 10^4 each"
        durable.run_deferred(None)
        again = await _open(files.killed())
        assert await run_sql(again, "QUEUE LIST 'big'") == []
        assert await run_sql(again, "CACHE KEYS 'cbig:*'") == []
        assert len(await run_sql(again, "QUEUE LIST 'other'")) == 1
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())


def test_the_purge_record_names_table_prefix_status_and_bound():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        journal: list[tuple[object, ...]] = []
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        await run_sql(durable, "CACHE SET 'c:a' 'v'")
        log = durable.log
        original = log.extend
        log.extend = lambda recs: (journal.extend(recs), original(recs))[1]  # type: ignore[method-assign]
        await run_sql(durable, "QUEUE PURGE ACTIVE 'q'")  # nothing active: no record at all
        await run_sql(durable, "QUEUE PURGE PENDING 'q'")
        await run_sql(durable, "CACHE PURGE 'c:*'")
        assert journal == [(r.PURGE, "queue", "q", "pending", 2), (r.PURGE, "cache", "c", None, 2)]
        await log.close()

    asyncio.run(main())
