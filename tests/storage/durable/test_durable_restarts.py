"""Disk use across restarts and on a small disk: the log continues in its last segment
after a restart (kill -9 or clean), what snapshots cover is pruned at startup, a crash
loop still reaches a snapshot, and segments start small and grow to --segment-bytes."""

from __future__ import annotations

import asyncio
import errno

import pytest
from durable_simfs import SimFiles
from hypothesis import given, settings
from hypothesis import strategies as st
from test_durable_store import DIR, _fail, _open, run

from cubequeue.storage.durable.errors import LogFailed
from cubequeue.storage.durable.segments import INITIAL_SEGMENT_BYTES, grown_size

MiB = 1 << 20


def _segments(files) -> list[str]:
    return [n for n in files.listdir(DIR) if n.startswith("log-") or n == "next.tmp"]


def _data_bytes(files) -> int:
    return sum(files.size(f"{DIR}/{n}") for n in files.listdir(DIR) if n != "quarantine")


async def _life(files, number: int, adds: int = 3, *, overwrite: bool = False, **kw):
    """One server life: ``adds`` queue items (or, ``overwrite``, as many cache SETs of
    the same keys each life: a log that grows while the state does not)."""
    durable, report = await _open(files, **kw)
    if durable._snapshot_task is not None:  # the one a long replayed log asks for
        await durable._snapshot_task
    for i in range(adds):
        if overwrite:
            await run(durable, f"CACHE SET 'c:{i}' '{number:04d}{'x' * 200}'")
        else:
            await run(durable, f"QUEUE ADD PRIORITY 1 'q:{number}-{i}' '{'x' * 200}'")
    return durable, report


def test_kill_9_restarts_keep_the_segment_count_and_bytes_bounded():
    async def main():
        files = SimFiles()
        counts, sizes = [], []
        for number in range(12):
            await _life(files, number)
            files = files.killed()  # no close, no snapshot: a crash loop
            counts.append(len(_segments(files)))
            sizes.append(_data_bytes(files))
        assert max(counts) <= 2, counts  # one segment and the prepared next one
        assert sizes[-1] == sizes[1], sizes
        durable, _ = await _open(files)
        rows = await run(durable, "QUEUE PENDING 'q'")
        assert len(rows) == 36  # every life's items are there

    asyncio.run(main())


def test_clean_restarts_keep_the_directory_bounded():
    async def main():
        files = SimFiles()
        names, sizes = [], []
        for number in range(12):
            durable, _ = await _life(files, number, overwrite=True)
            await durable.close()  # SIGTERM: a final snapshot
            names.append(sorted(files.listdir(DIR)))
            sizes.append(_data_bytes(files))
        for listing in names[2:]:
            assert sum(n.startswith("snap-") for n in listing) == 2, listing
            assert sum(n.startswith("log-") for n in listing) <= 2, listing
        assert max(sizes[2:]) == min(sizes[2:]), sizes

    asyncio.run(main())


def test_a_crash_loop_that_writes_reaches_a_snapshot():
    """Each life writes less than --snapshot-min-log-bytes before it is killed; what
    earlier lives wrote counts, so the log is still snapshotted and pruned."""
    async def main():
        files = SimFiles()
        sizes = []
        for number in range(30):
            await _life(files, number, adds=40, overwrite=True, segment_bytes=1 << 16,
                        snapshot_min_log_bytes=1 << 16)
            files = files.killed()
            sizes.append(_data_bytes(files))
        assert any(n.startswith("snap-") for n in files.listdir(DIR))
        # two snapshots and the log since the older one (in whole segments, plus the
        # prepared next one), though 30 lives wrote about 6 times --snapshot-min-log-bytes
        assert max(sizes) <= 6 * (1 << 16), sizes
        durable, _ = await _open(files, segment_bytes=1 << 16)
        assert len(await run(durable, "CACHE KEYS 'c:*'")) == 40
        assert (await run(durable, "CACHE GET 'c:7'"))[0][0].startswith("0029")

    asyncio.run(main())


def test_a_first_start_fits_a_small_disk():
    """Default --segment-bytes (64 MiB) on a disk with 8 MiB free: the first segment is
    sized to the data, not to the option."""
    async def main():
        files = SimFiles()
        files.capacity = 8 * MiB
        durable, _ = await _open(files, segment_bytes=64 * MiB)
        await run(durable, "QUEUE ADD PRIORITY 1 'q:a' 'p'")
        await durable.close()
        assert files.used(DIR) <= 3 * INITIAL_SEGMENT_BYTES + 65536

    asyncio.run(main())


def test_a_disk_too_small_names_the_option():
    async def main():
        files = SimFiles()
        files.capacity = INITIAL_SEGMENT_BYTES // 2
        with pytest.raises(OSError) as err:
            await _open(files, segment_bytes=64 * MiB)
        assert err.value.errno == errno.ENOSPC
        assert "--segment-bytes" in str(err.value.strerror)
        files = SimFiles()
        files.capacity = INITIAL_SEGMENT_BYTES // 2
        durable, _ = await _open(files, segment_bytes=1 << 16)  # as the error says
        await durable.close()

    asyncio.run(main())


def test_a_disk_that_fills_while_running_names_the_options():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, fsync="no")
        files.fault, _state = _fail("write", errno.ENOSPC)
        with pytest.raises(LogFailed, match="--segment-bytes"):
            await run(durable, "QUEUE ADD PRIORITY 1 'q:b' 'p'")
        with pytest.raises(LogFailed, match="--max-disk-bytes refuses growth"):
            await run(durable, "CACHE SET 'c:x' '1'")

    asyncio.run(main())


def test_segments_grow_as_they_fill():
    async def main():
        files = SimFiles()
        durable, _ = await _open(files, segment_bytes=4 * MiB)
        for i in range(40):
            await run(durable, f"CACHE SET 'c:{i}' '{'v' * 100_000}'")
        await durable.log.close()
        sizes = [files.size(f"{DIR}/{n}") for n in files.listdir(DIR) if n.startswith("log-")]
        assert sizes[:3] == [MiB, 2 * MiB, 4 * MiB], sizes

    asyncio.run(main())


@settings(deadline=None)
@given(st.integers(0, 1 << 40), st.integers(1 << 16, 1 << 40))
def test_a_grown_size_holds_twice_the_data_within_the_limit(used, limit):
    size = grown_size(used, limit)
    assert min(INITIAL_SEGMENT_BYTES, limit) <= size <= limit
    assert size >= min(2 * used, limit)
    assert size == limit or size // INITIAL_SEGMENT_BYTES & (size // INITIAL_SEGMENT_BYTES - 1) == 0
