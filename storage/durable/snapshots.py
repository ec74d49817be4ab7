"""Snapshots: the store's state written in slices on the event loop (not ``fork()``:
CPython's reference counts would copy most of the heap, and forking a process that owns a
writer thread is unsafe).

At lsn ``L`` the log rotates to ``log-<L+1>``; the store's keys are listed once and each
slice of records is built when reached (a fuzzy snapshot: the log after ``L`` replays over
it, because records are states). Frames go through the writer thread to ``snap-<L>.tmp``,
then a trailer, ``fdatasync``, rename to ``snap-<L>.cqs`` and a directory fsync. Then all
but the two newest snapshots are deleted, and every segment holding only lsns that the
older kept snapshot covers (Redis keeps the previous base until a rewrite succeeded).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from cubequeue.storage.durable import layout
from cubequeue.storage.durable.files import Files
from cubequeue.storage.durable.frames import encode_frame
from cubequeue.storage.durable.log import DurableLog
from cubequeue.storage.durable.records import Record
from cubequeue.storage.record_kinds import TRAILER

__all__ = ["SnapshotInfo", "disk_usage", "prune", "write_snapshot"]

#: records per slice: a slice is built and encoded on the loop in about a millisecond
SLICE_RECORDS = 2000
KEEP_SNAPSHOTS = 2


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    lsn: int
    bytes: int
    objects: int
    seconds: float
    finished_ms: int


async def write_snapshot(log: DurableLog, files: Files, data_dir: str, directory: uuid.UUID,
                         lsn: int, slices: Iterator[list[Record]], next_id: int,
                         next_cache_id: int, max_ts: int) -> SnapshotInfo:
    """Write ``slices`` as ``snap-<lsn>.cqs`` through the writer thread (see module doc)."""
    started = time.perf_counter()
    final = f"{data_dir}/{layout.snap_name(lsn)}"
    tmp = final + ".tmp"
    header = layout.encode_header(layout.FileHeader(
        layout.SNAP_MAGIC, directory, lsn, time.time_ns() // 1_000_000))
    state = {"handle": -1, "offset": 0}

    def create() -> None:
        if files.exists(tmp):
            files.unlink(tmp)
        state["handle"] = files.open(tmp, create=True)
        files.pwrite(state["handle"], header, 0)
        state["offset"] = len(header)

    def append(data: bytes) -> None:
        files.pwrite(state["handle"], data, state["offset"])
        state["offset"] += len(data)

    await log.call(create)
    seq = 1
    objects = 0
    pending: list[asyncio.Future[None]] = []
    try:
        for part in slices:
            frame = encode_frame(seq, part)
            seq += len(part)
            objects += len(part)
            pending.append(log.call(lambda data=frame: append(data)))  # type: ignore[misc]  # bound per slice
            if len(pending) >= 4:  # bound what waits in memory
                await asyncio.gather(*pending)
                pending = []
            await asyncio.sleep(0)  # let other connections run between slices
        await asyncio.gather(*pending)
        trailer = encode_frame(seq, [(TRAILER, lsn, objects, next_id, next_cache_id, max_ts)])

        def finish() -> int:
            append(trailer)
            files.datasync(state["handle"])
            files.close(state["handle"])
            state["handle"] = -1
            files.rename(tmp, final)
            files.sync_dir(data_dir)
            return state["offset"]

        size = await log.call(finish)
    except BaseException:
        def abandon() -> None:
            if state["handle"] >= 0:
                files.close(state["handle"])
            if files.exists(tmp):
                files.unlink(tmp)
        await asyncio.shield(log.call(abandon))
        raise
    return SnapshotInfo(lsn, size, objects, time.perf_counter() - started,
                        time.time_ns() // 1_000_000)


def prune(files: Files, data_dir: str) -> None:
    """Keep the two newest snapshots and the segments replay from the older one needs
    (runs on the writer thread)."""
    snaps: list[int] = []
    segments: list[int] = []
    for name in files.listdir(data_dir):
        parsed = layout.parse_name(name)
        if parsed is not None:
            (snaps if parsed[0] == "snap" else segments).append(parsed[1])
    snaps.sort(reverse=True)
    segments.sort()
    removed = False
    for lsn in snaps[KEEP_SNAPSHOTS:]:
        files.unlink(f"{data_dir}/{layout.snap_name(lsn)}")
        removed = True
    if snaps:
        oldest_kept = snaps[: KEEP_SNAPSHOTS][-1]
        for first, following in itertools.pairwise(segments):
            if following <= oldest_kept + 1:
                files.unlink(f"{data_dir}/{layout.log_name(first)}")
                removed = True
    if removed:
        files.sync_dir(data_dir)


def disk_usage(files: Files, data_dir: str) -> dict[str, int]:
    """Bytes on disk by kind: snapshot, log, quarantine (the gauges and the disk cap)."""
    out = {"snapshot": 0, "log": 0, "quarantine": 0}
    for name in files.listdir(data_dir):
        path = f"{data_dir}/{name}"
        if name == "quarantine":
            out["quarantine"] = sum(files.size(f"{path}/{q}") for q in files.listdir(path))
            continue
        parsed = layout.parse_name(name)
        if parsed is not None:
            out["snapshot" if parsed[0] == "snap" else "log"] += files.size(path)
        elif name == "next.tmp":
            out["log"] += files.size(path)
    return out
