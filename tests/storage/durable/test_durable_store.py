"""DurableStore in-process over the simulated disk: replies wait for the log, a kill or a
power loss keeps what was acknowledged, failures refuse writes and heal, the disk cap."""

from __future__ import annotations

import asyncio
import errno
import inspect
import random

import pytest
from durable_simfs import SimFiles

from cubequeue.grammar import parse
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable.errors import DiskFull, LogFailed
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

DIR = "/data"
T0 = 1_700_000_000_000


async def _open(files, fsync="everysec", **kw):
    fatal: list[str] = []
    store = MemoryStore(FakeClock(T0), Limits())
    durable, report = await open_store(store, data_dir=DIR, fsync=fsync, wall_ms=lambda: T0,
                                       on_fatal=fatal.append, files=files,
                                       segment_bytes=kw.pop("segment_bytes", 1 << 16), **kw)
    durable.fatal = fatal
    return durable, report


async def run(durable, sql, pid=None):
    out = durable.execute(parse(sql), pid)
    if inspect.isawaitable(out):
        out = await out
    assert isinstance(out, ResultSet)
    return out.rows


def test_state_survives_a_kill_and_replies_wait_for_the_write():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files)
        out = durable.execute(parse("QUEUE ADD PRIORITY 1 'q:a' 'payload'"))
        assert inspect.isawaitable(out)  # not written yet: the reply waits
        assert (await out).rows[0][:2] == ("1", True)
        await run(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p2'")
        await run(durable, "QUEUE RETRIEVE CONCURRENCY 2 'q:a'")
        await run(durable, "QUEUE MERGE_EXTRA 1 '{\"x\":1}'")
        await run(durable, "QUEUE ACK 2 'done'")
        await run(durable, "CACHE SET 'c:k' 'v'")
        await run(durable, "CACHE INCR 'c:n'")
        await run(durable, "CACHE INCR 'c:n'")
        killed = files.killed()  # kill -9: no close, no snapshot
        again, report = await _open(killed)
        assert report.records > 0
        assert await run(again, "QUEUE GET 1") == [("payload", '{"x":1}')]
        assert await run(again, "QUEUE ACTIVE 'q'") == [("a", "1", "active", '{"x":1}')]
        assert (await run(again, "QUEUE RESULT 2"))[0][0] == "done"
        assert await run(again, "CACHE GET 'c:n'") == [("2",)]
        assert await run(again, "CACHE GET 'c:k'") == [("v",)]
        new_id = int((await run(again, "QUEUE ADD PRIORITY 1 'q:c' 'p'"))[0][0])
        assert new_id > 2
        info = {row[0]: row[1] for row in await run(again, "SYS CACHESTORE INFO")}
        assert info["durable.fsync"] == "everysec"
        assert info["durable.log_state"] == "ok"
        await again.close()
        await durable.log.close()

    asyncio.run(main())


def test_after_a_power_loss_every_reply_released_under_always_is_there():
    async def main(seed):
        rng = random.Random(seed)
        files = SimFiles()
        durable, _ = await _open(files, fsync="always")
        acked_adds: dict[str, int] = {}
        acked_acks: set[int] = set()
        invoked_acks: set[int] = set()  # sent: its outcome is unknown until acknowledged
        cache: dict[str, str] = {}
        seen_ids: list[int] = []
        crash: list[SimFiles] = []

        async def client(n):
            for i in range(30):
                if crash:
                    return
                path = f"q:{n}-{i}"
                rows = await run(durable, f"QUEUE ADD PRIORITY 1 '{path}' 'p'")
                id_ = int(rows[0][0])
                seen_ids.append(id_)
                acked_adds[path] = id_
                if rng.random() < 0.5:
                    await run(durable, f"QUEUE RETRIEVE CONCURRENCY 100 '{path}'")
                    invoked_acks.add(id_)
                    await run(durable, f"QUEUE ACK {id_} 'r{id_}'")
                    acked_acks.add(id_)
                if rng.random() < 0.3:
                    await run(durable, f"CACHE SET 'c:{n}-{i}' 'v{i}'")
                    cache[f"c:{n}-{i}"] = f"v{i}"

        async def crasher():
            for _ in range(rng.randrange(5, 200)):
                await asyncio.sleep(0)
            # a power loss now: what the replies released so far promised must survive
            snapshot = (dict(acked_adds), set(acked_acks), dict(cache), max(seen_ids, default=0))
            crash.append(files.crashed(rng if rng.random() < 0.5 else None))
            return snapshot

        results = await asyncio.gather(*(client(n) for n in range(4)), crasher())
        adds, acks, cache_then, top = results[-1]
        await durable.log.close()
        again, _ = await _open(crash[0])
        for path, id_ in adds.items():
            if id_ in acks:
                assert (await run(again, f"QUEUE RESULT {id_}"))[0][0] == f"r{id_}"
            elif id_ in invoked_acks:  # either outcome, but not neither
                got = await run(again, f"QUEUE GET '{path}'")
                result = await run(again, f"QUEUE RESULT {id_}")
                assert got == [("p", None)] or result[0][0] == f"r{id_}", path
            else:
                assert await run(again, f"QUEUE GET '{path}'") == [("p", None)], path
        for key, value in cache_then.items():
            assert await run(again, f"CACHE GET '{key}'") == [(value,)]
        new_id = int((await run(again, "QUEUE ADD PRIORITY 1 'q:new' 'p'"))[0][0])
        assert new_id > top
        await again.log.close()

    for seed in range(8):
        asyncio.run(main(seed))


def _fail(op_name, code):
    state = {"on": True}

    def fault(op, path):
        return code if state["on"] and op == op_name and ".cql" in path else None

    return fault, state


@pytest.mark.parametrize(("op", "code"), [("write", errno.ENOSPC), ("sync", errno.EIO)])
def test_a_failed_write_or_fsync_refuses_writes_until_repaired(op, code):
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, fsync="no" if op == "write" else "everysec")
        await run(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        fault, state = _fail(op, code)
        files.fault = fault
        if op == "write":
            with pytest.raises(LogFailed, match="may be lost"):
                await run(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p'")
        else:
            await run(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p'")
            durable.log._tick()  # the everysec timer's fsync, now
            for _ in range(200):
                if durable.log.failed:
                    break
                await asyncio.sleep(0.01)
        assert durable.log.failed is not None
        with pytest.raises(LogFailed, match="durable log stopped"):
            await run(durable, "CACHE SET 'c:x' '1'")
        assert await run(durable, "QUEUE GET 'q:a'") == [("p", None)]  # reads still work
        state["on"] = False
        await durable.repair()
        assert durable.log.failed is None
        await run(durable, "CACHE SET 'c:x' '1'")
        again, _ = await _open(files.killed())
        assert await run(again, "CACHE GET 'c:x'") == [("1",)]
        assert await run(again, "QUEUE GET 'q:b'") == [("p", None)]  # in the fresh snapshot
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())


def test_a_failed_fsync_under_always_is_fatal():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, fsync="always")
        files.fault, _ = _fail("sync", errno.EIO)
        with pytest.raises(LogFailed):
            await run(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        assert durable.fatal and "--fsync always" in durable.fatal[0]
        files.fault = None
        await durable.log.close()

    asyncio.run(main())


def test_above_max_disk_bytes_growing_commands_get_53100_and_ack_still_works():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, max_disk_bytes=1)
        with pytest.raises(DiskFull, match=r"--max-disk-bytes=1\)") as err:
            await run(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        assert err.value.sqlstate == "53100"
        durable.settings = type(durable.settings)(data_dir=DIR, max_disk_bytes=None)
        await run(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        durable.settings = type(durable.settings)(data_dir=DIR, max_disk_bytes=1)
        assert await run(durable, "QUEUE ACK 1 'r'") == [(True,)]
        assert await run(durable, "CACHE REMOVE 'c:x'") == []
        await durable.close()

    asyncio.run(main())


def test_persist_snapshots_prunes_and_recovers_from_the_snapshot():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, segment_bytes=4096)
        for i in range(60):
            await run(durable, f"QUEUE ADD PRIORITY 1 'q:{i}' '{'x' * 100}'")
        for i in range(1, 31):
            await run(durable, f"QUEUE CANCEL {i}")
        await run(durable, "SYS CACHESTORE PERSIST")
        await run(durable, "CACHE SET 'c:between' '1'")
        await run(durable, "SYS CACHESTORE PERSIST")
        await run(durable, "QUEUE ADD PRIORITY 1 'q:late' 'p'")
        names = files.listdir(DIR)
        assert sum(n.startswith("snap-") for n in names) == 2
        assert sum(n.startswith("log-") for n in names) <= 3  # older segments deleted
        again, report = await _open(files.killed())
        assert report.snapshot_lsn > 0
        assert len(await run(again, "QUEUE PENDING 'q'")) == 31
        await again.log.close()
        await durable.log.close()

    asyncio.run(main())
