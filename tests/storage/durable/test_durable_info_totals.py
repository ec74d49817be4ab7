"""After a kill and a recovery, SYS CACHESTORE INFO's queue rows (kept as rows change,
storage/row_sizes.py) are what they were, and what a walk of the recovered rows gives."""

from __future__ import annotations

import asyncio
import inspect

from durable_simfs import SimFiles

from cubequeue.grammar import parse
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.cachestore_info import InfoRow, table_rows
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.durable.store import DurableStore
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

DIR = "/data"
T0 = 1_700_000_000_000


async def _open(files: SimFiles) -> DurableStore:
    store = MemoryStore(FakeClock(T0), Limits())
    durable, _ = await open_store(store, data_dir=DIR, fsync="everysec", wall_ms=lambda: T0,
                                  on_fatal=lambda _: None, files=files, segment_bytes=1 << 16)
    return durable


async def _run(durable: DurableStore, sql: str) -> list[InfoRow]:
    out = durable.execute(parse(sql), None)
    if inspect.isawaitable(out):
        out = await out
    assert isinstance(out, ResultSet)
    return out.rows  # type: ignore[return-value]


def _utf8(*texts: str | None) -> int:
    """The reference's byte measure: every text field encoded."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts if t is not None)


def _walk(durable: DurableStore) -> list[InfoRow]:
    state = durable.store._queue  # the recovered state, walked row by row
    now = durable.store.now_ms()
    items = ((_utf8(i.path, i.payload, i.extra), i.expire <= now) for i in state.items())
    results = ((_utf8(r.path, r.value), r.expire < now) for r in state.results.all_by_id())
    return table_rows("QueueItems", items) + table_rows("QueueResults", results)


def _queue_rows(rows: list[InfoRow]) -> list[InfoRow]:
    return [r for r in rows if r[0].startswith(("QueueItems.", "QueueResults."))]


def test_info_totals_survive_a_kill() -> None:
    async def main() -> None:
        files = SimFiles()
        durable = await _open(files)
        for sql in ("QUEUE ADD PRIORITY 1 'q:a' 'payload'",
                    "QUEUE ADD PRIORITY 1 'q:bé' 'p2'",
                    "QUEUE ADD PRIORITY 1 'r:c' 'a longer payload than the others'",
                    "QUEUE ADD PRIORITY 1 'r:d' 'x'",
                    "QUEUE RETRIEVE CONCURRENCY 2 'q:a'",
                    "QUEUE MERGE_EXTRA 1 '{\"x\":1}'",
                    "QUEUE ACK 2 'done, with a result'",
                    "QUEUE CANCEL 4"):
            await _run(durable, sql)
        before = _queue_rows(await _run(durable, "SYS CACHESTORE INFO"))
        assert dict((r[0], r[1]) for r in before)["QueueItems.keys_total"] == "2"
        again = await _open(files.killed())
        after = _queue_rows(await _run(again, "SYS CACHESTORE INFO"))
        assert after == before == _walk(again)
        await again.close()
        await durable.log.close()

    asyncio.run(main())
