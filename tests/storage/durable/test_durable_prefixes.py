"""What a queue prefix remembers (last CONCURRENCY, last TO_CANCEL timeouts) survives a
kill -9, is journaled only when it changes, and is forgotten with its prefix."""

from __future__ import annotations

import asyncio

from durable_simfs import SimFiles
from durable_testkit import run_sql

from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

DIR = "/data"
T0 = 1_700_000_000_000
HOUR = 3_600_000


async def _open(files: SimFiles, start: int = T0):
    store = MemoryStore(FakeClock(start), Limits())
    durable, _ = await open_store(store, data_dir=DIR, wall_ms=lambda: start,
                                  on_fatal=print, files=files, segment_bytes=1 << 20)
    return durable




def _remembered(durable) -> dict[str, tuple[object, ...]]:
    """system.queue_prefixes' last_concurrency, last heartbeat and orphaned timeouts."""
    return {row[0]: row[6:] for row in durable.store.system_table("queue_prefixes").rows}


def _journaled(durable) -> list[tuple[object, ...]]:
    seen: list[tuple[object, ...]] = []
    log = durable.log
    original = log.extend
    log.extend = lambda recs: (seen.extend(recs), original(recs))[1]
    return seen


def test_prefix_fields_survive_a_kill_from_the_log_and_from_a_snapshot():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'w:a' 'p'")
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 3 'q:a'")
        await run_sql(durable, "QUEUE TO_CANCEL 1000 2000 'q'")
        await run_sql(durable, "SYS CACHESTORE PERSIST")  # these two are in the snapshot
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 5 'w:none'")  # and these in the log
        await run_sql(durable, "QUEUE STALLED 700 'w'")
        live = _remembered(durable)
        assert live == {"q": (3, 1000, 2000), "w": (5, 700, None)}
        again = await _open(files.killed())
        assert _remembered(again) == live
        # CANCEL names its reason from the remembered timeouts (system.queue_log)
        again.store.clock.advance(1500)  # q:a's heartbeat is now older than 1000 ms
        await run_sql(again, "QUEUE CANCEL 'q:a'")
        log = again.store.system_table("queue_log").rows
        assert [(row[1], row[2]) for row in log] == [("q:a", "cancelled_stalled")]
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())


def test_an_unchanged_value_is_not_journaled_again():
    async def main() -> None:
        durable = await _open(SimFiles())
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        seen = _journaled(durable)
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 2 'q:x'")
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 2 'q:y'")
        await run_sql(durable, "QUEUE TO_CANCEL 10 20 'q'")
        await run_sql(durable, "QUEUE TO_CANCEL 10 20 'q'")
        await run_sql(durable, "QUEUE ORPHANED 10 'q'")  # lists only: remembers nothing
        assert seen == [(r.PREFIX, "q", 2, None, None), (r.PREFIX, "q", 2, 10, 20)]
        await durable.log.close()

    asyncio.run(main())


def test_a_prefix_forgotten_by_the_expiry_sweep_starts_afresh_after_recovery():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 4 'q:none'")
        await run_sql(durable, "QUEUE TO_CANCEL 1000 2000 'q'")
        durable.store.clock.advance(5 * HOUR)  # q:a expires: the sweep forgets "q"
        seen = _journaled(durable)
        durable.run_deferred(None)
        assert await run_sql(durable, "QUEUE LIST 'q'") == []
        assert (r.PREFIX, "q", None, None, None) in seen
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p'")
        assert _remembered(durable) == {"q": (None, None, None)}
        again = await _open(files.killed(), T0 + 5 * HOUR)
        assert _remembered(again) == {"q": (None, None, None)}
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())


def test_a_prefix_emptied_by_ack_forgets_and_truncate_clears():
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 4 'q:a'")
        await run_sql(durable, "QUEUE ACK 'q:a' NULL")  # no result: the prefix empties
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p'")
        assert _remembered(durable) == {"q": (None, None, None)}
        assert _remembered(await _open(files.killed())) == {"q": (None, None, None)}
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'z:a' 'p'")
        await run_sql(durable, "QUEUE RETRIEVE CONCURRENCY 9 'z:none'")
        await run_sql(durable, "QUEUE TRUNCATE")
        await run_sql(durable, "QUEUE ADD PRIORITY 1 'z:b' 'p'")
        live = _remembered(durable)
        assert live == {"z": (None, None, None)}  # the TRUNCATE took q:b and z's memory
        again = await _open(files.killed())
        assert _remembered(again) == live
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())
