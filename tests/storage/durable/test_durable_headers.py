"""A damaged segment header costs at most the header: the frames after it are read by
their own checksums and lsn continuity, the header is written again from the file name
and DIRECTORY_ID, and only its 64 bytes go to quarantine/, once."""

from __future__ import annotations

import uuid

import pytest
from durable_simfs import SimFiles
from durable_testkit import DIR, T0, image_of, record_segments, records
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import layout
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.recovery import RecoveryRefused, recover
from cubequeue.storage.limits import Limits

DIRECTORY = uuid.UUID(int=7)
#: enough frames for several 512-byte segments
long_logs = st.lists(st.lists(records, min_size=1, max_size=5), min_size=8, max_size=24)


def _recover(files, policy="salvage"):
    return recover(files, DIR, policy, Limits(), lambda: T0)


def _flip(files, name: str, bit: int) -> None:
    path = f"{DIR}/{name}"
    raw = bytearray(files.read(path))
    raw[bit // 8] ^= 1 << (bit % 8)
    files.put(path, bytes(raw))


def _quarantined(files) -> dict[str, bytes]:
    where = f"{DIR}/quarantine"
    if not files.exists(where):
        return {}
    return {name: files.read(f"{where}/{name}") for name in files.listdir(where)
            if name.endswith(".broken")}


@settings(deadline=None, max_examples=60)
@given(long_logs, st.data(), st.sampled_from(["salvage", "point-in-time"]))
def test_any_bit_flipped_in_any_segment_header_loses_no_frame(frames, data, policy):
    files = SimFiles()
    names = record_segments(files, frames, DIRECTORY)
    name = data.draw(st.sampled_from(names), label="segment")
    bit = data.draw(st.integers(0, layout.HEADER_BYTES * 8 - 1), label="bit")
    original = files.read(f"{DIR}/{name}")[: layout.HEADER_BYTES]
    _flip(files, name, bit)
    expected = image_of(frames)
    expected.expire(T0)
    got = _recover(files, policy)
    assert got.image == expected
    assert got.last_lsn == sum(len(f) for f in frames)
    # only the header's bytes were set aside, and the header is whole again
    copies = _quarantined(files)
    assert all(len(copy) <= layout.HEADER_BYTES for copy in copies.values())
    again = _recover(files, policy)
    assert again.image == expected and again.report.corrupt_frames == 0
    assert _quarantined(files) == copies  # set aside once
    header = files.read(f"{DIR}/{name}")[: layout.HEADER_BYTES]
    decoded = layout.decode_header(header, layout.LOG_MAGIC, DIRECTORY)
    assert decoded.lsn == layout.decode_header(original, layout.LOG_MAGIC, DIRECTORY).lsn


def test_a_middle_segment_with_a_damaged_header_keeps_all_its_items():
    """The issue's case: one bit in the 64-byte header of a middle segment."""
    frames = [[(r.ITEM_PUT, i, f"q:{i}", "", 0, T0, None, T0 + 10**9, None, False, None, None,
                None, None)] for i in range(1, 200)]
    files = SimFiles()
    names = record_segments(files, frames, DIRECTORY, segment_bytes=2048)
    assert len(names) > 3
    _flip(files, names[len(names) // 2], 3)  # a bit of the magic
    got = _recover(files)
    assert sorted(got.image.items) == list(range(1, 200))
    assert got.report.corrupt_frames == 1
    assert sum(len(c) for c in _quarantined(files).values()) == layout.HEADER_BYTES


def test_strict_still_refuses_a_damaged_header():
    frames = [[(r.CACHE_PUT, i, f"c:{i}", "v", None)] for i in range(1, 60)]
    files = SimFiles()
    names = record_segments(files, frames, DIRECTORY)
    _flip(files, names[1], 100)
    with pytest.raises(RecoveryRefused, match="damaged segment header"):
        _recover(files, "strict")
    assert not _quarantined(files)


@settings(deadline=None, max_examples=30)
@given(st.integers(0, layout.HEADER_BYTES * 8 - 1))
def test_a_bit_flipped_in_the_only_snapshots_header_loses_nothing(bit):
    """Pruning left no log before the snapshot, so losing it would lose its state."""
    before = [(r.CACHE_PUT, i, f"c:{i}", "old", None) for i in range(1, 6)]
    after = [[(r.CACHE_PUT, i, f"c:{i}", "new", None)] for i in range(3, 9)]
    files = SimFiles()
    record_segments(files, [], DIRECTORY)
    for name in files.listdir(DIR):
        if name.startswith("log-"):
            files.unlink(f"{DIR}/{name}")
    header = layout.encode_header(layout.FileHeader(layout.SNAP_MAGIC, DIRECTORY, 5, T0))
    files.put(f"{DIR}/{layout.snap_name(5)}", header + fr.encode_frame(1, before) + fr.encode_frame(
        6, [(r.TRAILER, 5, 5, 1, 6, T0)]))
    for i, recs in enumerate(after):
        files.put(f"{DIR}/{layout.log_name(6 + i)}", layout.encode_header(
            layout.FileHeader(layout.LOG_MAGIC, DIRECTORY, 6 + i, T0)) + fr.encode_frame(6 + i, recs))
    _flip(files, layout.snap_name(5), bit)
    expected = image_of([before, *after])
    expected.expire(T0)
    got = _recover(files)
    assert got.image.cache == expected.cache and got.report.snapshot_lsn == 5
    assert all(len(copy) <= layout.HEADER_BYTES for copy in _quarantined(files).values())
    again = _recover(files)
    assert again.image.cache == expected.cache and again.report.corrupt_frames == 0
