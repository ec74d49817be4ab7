"""quarantine/ is written once per damage, whatever the number of restarts, and its
copies stop at a bound."""

from __future__ import annotations

import json
import uuid

from durable_simfs import SimFiles
from durable_testkit import DIR, T0, record_segments

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import layout
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.recovery import recover
from cubequeue.storage.limits import Limits

DIRECTORY = uuid.UUID(int=7)
FRAMES = [[(r.CACHE_PUT, i, f"c:{i}", "v" * 40, None)] for i in range(1, 80)]


def _recover(files, **kw):
    return recover(files, DIR, "salvage", Limits(), lambda: T0, **kw)


def _quarantine_bytes(files) -> int:
    where = f"{DIR}/quarantine"
    return sum(files.size(f"{where}/{n}") for n in files.listdir(where))


def _damage_a_middle_frame(files, names) -> None:
    path = f"{DIR}/{names[1]}"
    raw = bytearray(files.read(path))
    raw[layout.HEADER_BYTES + fr.HEADER.size + 3] ^= 0xFF  # the first frame's payload
    files.put(path, bytes(raw))


def _restarts(files, times: int, **kw) -> list[int]:
    sizes = []
    for _ in range(times):
        got = _recover(files, **kw)
        assert got.report.corrupt_frames >= 1  # still skipped, and still said
        sizes.append(_quarantine_bytes(files))
    return sizes


def test_bytes_skipped_by_salvage_are_copied_once():
    files = SimFiles()
    names = record_segments(files, FRAMES, DIRECTORY)
    _damage_a_middle_frame(files, names)
    sizes = _restarts(files, 5)
    assert sizes[0] > 0 and sizes == sizes[:1] * 5
    copies = [n for n in files.listdir(f"{DIR}/quarantine") if n.endswith(".broken")]
    assert len(copies) == 1


def test_an_invalid_record_is_set_aside_once():
    bad = [(r.CACHE_PUT, 1, "c:x", 5, None)]  # a number for a value: fails validation
    files = SimFiles()
    record_segments(files, [*FRAMES[:3], bad, *FRAMES[3:6]], DIRECTORY)
    for _ in range(4):
        got = _recover(files)
        assert got.report.quarantined_records == 1
    lines = files.read(f"{DIR}/quarantine/records.jsonl").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["lsn"] == 4


def test_copies_stop_at_the_bound_and_the_report_says_so():
    files = SimFiles()
    names = record_segments(files, FRAMES, DIRECTORY)
    _damage_a_middle_frame(files, names)
    got = _recover(files, quarantine_max_bytes=600)
    assert got.report.corrupt_frames >= 1
    assert _quarantine_bytes(files) <= 600
    report = [json.loads(line) for line in
              files.read(f"{DIR}/quarantine/report.jsonl").splitlines()]
    assert report[-1]["copy"] is None and "limit of 600 bytes" in report[-1]["not_kept"]
