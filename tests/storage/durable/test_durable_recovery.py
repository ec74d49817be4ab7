"""Recovery of a recorded log: cut at every offset, bytes flipped, per --recovery."""

from __future__ import annotations

import uuid

import pytest
from durable_simfs import SimFiles
from durable_testkit import DIR, T0, frame_lists, image_of, record_log
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import layout
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.recovery import RecoveryRefused, recover
from cubequeue.storage.limits import Limits

DIRECTORY = uuid.UUID(int=7)


def _clock() -> int:
    return T0


def _recover(files, policy="salvage"):
    return recover(files, DIR, policy, Limits(), _clock)


def _recorded(frames):
    files = SimFiles()
    name, ends = record_log(files, frames, DIRECTORY)
    return files, name, ends


@settings(deadline=None, max_examples=12)
@given(frame_lists)
def test_a_cut_at_every_offset_recovers_the_whole_frames_before_it(frames):
    files, name, ends = _recorded(frames)
    data = files.read(f"{DIR}/{name}")
    starts = [layout.HEADER_BYTES, *ends[:-1]]
    # a frame is whole once its payload is (the padding after it carries nothing); over
    # the preallocated zeros, once its last non-zero byte is (a marshal payload may end
    # in zeros, and the file then holds exactly the frame's bytes)
    payload_end = [s + fr.HEADER.size + fr.HEADER.unpack_from(data, s)[0] for s in starts]
    nonzero_end = [s + len(data[s:e].rstrip(b"\0")) for s, e in zip(starts, payload_end, strict=True)]
    for cut in range(layout.HEADER_BYTES, ends[-1] + 1):
        for tail in (b"", b"\0" * 64):  # a shorter file, or the preallocated zeros after it
            whole_at = nonzero_end if tail else payload_end
            disk = SimFiles()
            disk.makedirs(DIR)
            disk.put(f"{DIR}/DIRECTORY_ID", f"{DIRECTORY}\n".encode())
            disk.put(f"{DIR}/{name}", data[:cut] + tail)
            got = _recover(disk)
            whole = sum(1 for end in whole_at if end <= cut)
            expected = image_of(frames[:whole])
            expected.expire(T0)
            assert got.image == expected, (cut, whole)
            assert got.last_lsn == sum(len(f) for f in frames[:whole])
            torn = not any(w <= cut <= e for w, e in zip([0, *whole_at], [layout.HEADER_BYTES, *ends], strict=True))
            # kept bytes that are all zeros look like the preallocated space, rightly
            last_end = max([layout.HEADER_BYTES, *(e for e in ends if e <= cut)])
            torn = torn and any(data[last_end:cut])
            assert got.report.torn_tails == (1 if torn else 0)
            # the torn bytes went to quarantine/ and the segment was truncated: again = same
            assert _recover(disk).image == expected
            assert _recover(disk).report.torn_tails == 0


def _policy_expectation(frames, bad, policy):
    """The image a corrupt frame ``bad`` should leave under ``policy``."""
    last = bad == len(frames) - 1
    if last or policy == "point-in-time":
        return image_of(frames[:bad])
    return image_of(frames[:bad] + frames[bad + 1:])


@settings(deadline=None, max_examples=40)
@given(frame_lists.filter(lambda f: len(f) >= 2), st.data(),
       st.sampled_from(["salvage", "strict", "point-in-time"]))
def test_a_flipped_byte_is_never_applied(frames, data, policy):
    files, name, ends = _recorded(frames)
    raw = bytearray(files.read(f"{DIR}/{name}"))
    bad = data.draw(st.integers(0, len(frames) - 1))
    start = layout.HEADER_BYTES if bad == 0 else ends[bad - 1]
    payload_end = start + fr.HEADER.size + fr.HEADER.unpack_from(raw, start)[0]
    pos = data.draw(st.integers(start, payload_end - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    files.put(f"{DIR}/{name}", bytes(raw))
    expected = _policy_expectation(frames, bad, policy)
    expected.expire(T0)
    if policy == "strict" and bad != len(frames) - 1:
        with pytest.raises(RecoveryRefused, match="--recovery strict"):
            _recover(files, policy)
        return
    got = _recover(files, policy)
    assert got.image == expected
    assert files.listdir(f"{DIR}/quarantine")


def test_a_bad_snapshot_is_quarantined_and_the_older_one_used():
    frames = [[(r.CACHE_PUT, 1, "c:a", "1", None)], [(r.CACHE_PUT, 2, "c:b", "2", None)]]
    files, _name, _ = _recorded(frames)
    good = _snapshot(1, [(r.CACHE_PUT, 1, "c:a", "1", None)])
    files.put(f"{DIR}/{layout.snap_name(1)}", good)
    files.put(f"{DIR}/{layout.snap_name(2)}", good[:-8])  # no trailer: never finished
    got = _recover(files)
    assert got.report.snapshot_lsn == 1
    assert list(got.image.cache) == ["c:a", "c:b"]
    assert layout.snap_name(2) in files.listdir(f"{DIR}/quarantine")
    assert layout.snap_name(2) not in files.listdir(DIR)


def _snapshot(lsn, recs):
    header = layout.encode_header(layout.FileHeader(layout.SNAP_MAGIC, DIRECTORY, lsn, T0))
    body = fr.encode_frame(1, recs)
    trailer = fr.encode_frame(1 + len(recs), [(r.TRAILER, lsn, len(recs), 1, 2, T0)])
    return header + body + trailer


def test_expiry_uses_the_newest_timestamp_when_the_clock_went_back():
    frames = [[(r.CLOCK, T0 + 20_000_000, 0),
               (r.CACHE_PUT, 1, "c:a", "1", T0 + 10_000_000),
               (r.CACHE_PUT, 2, "c:b", "1", T0 + 30_000_000)]]
    files, _, _ = _recorded(frames)
    got = _recover(files)
    assert list(got.image.cache) == ["c:b"]
    assert got.report.clock_behind_ms == 20_000_000


def test_ids_continue_past_the_reservation():
    frames = [[(r.ID_RESERVE, 10_001)],
              [(r.ITEM_PUT, 5, "q:a", "p", 0, T0, None, T0, None, False, None, None, None,
                None)]]
    files, _, _ = _recorded(frames)
    got = _recover(files)
    assert got.image.next_id == 10_001
    assert not got.image.items  # expired: expire <= now


def test_a_file_of_another_directory_is_not_replayed():
    frames = [[(r.CACHE_PUT, 1, "c:a", "1", None)]]
    files, _name, _ = _recorded(frames)
    files.put(f"{DIR}/DIRECTORY_ID", f"{uuid.UUID(int=8)}\n".encode())
    got = _recover(files)
    assert not got.image.cache
    with pytest.raises(RecoveryRefused, match="belongs to data directory"):
        _recover(files, "strict")
