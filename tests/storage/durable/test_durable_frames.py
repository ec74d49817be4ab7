"""The frame codec and the record checks (hypothesis)."""

from __future__ import annotations

import marshal

import pytest
from durable_testkit import records
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import records as r
from cubequeue.storage.limits import Limits


@settings(deadline=None)
@given(st.integers(1, 2**40), st.lists(records, min_size=1, max_size=20))
def test_frame_round_trip(first_lsn, recs):
    data = fr.encode_frame(first_lsn, recs)
    assert len(data) % fr.ALIGN == 0
    frame = fr.read_frame(data, 0, len(data))
    assert isinstance(frame, fr.Frame)
    assert (frame.first_lsn, frame.count, frame.end) == (first_lsn, len(recs), len(data))
    decoded = [r.validate(v, Limits()) for v in fr.decode_payload(frame)]
    assert decoded == [tuple(rec) for rec in recs]


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data):
    found = fr.read_frame(data, 0, len(data))
    assert found is None or isinstance(found, fr.BadFrame | fr.Frame)


@settings(deadline=None)
@given(st.lists(records, min_size=1, max_size=5), st.data())
def test_any_flipped_byte_is_detected(recs, data):
    frame = fr.encode_frame(7, recs)
    payload_end = fr.HEADER.size + fr.HEADER.unpack_from(frame)[0]
    pos = data.draw(st.integers(0, payload_end - 1))
    bad = bytearray(frame)
    bad[pos] ^= data.draw(st.integers(1, 255))
    found = fr.read_frame(bytes(bad), 0, len(bad))
    assert not isinstance(found, fr.Frame) or found.first_lsn != 7 or found.count != len(recs)


def test_surrogates_and_unicode_survive():
    rec = (r.CACHE_PUT, 1, "c:\udcff", "é\u2603", None)
    frame = fr.read_frame(fr.encode_frame(1, [rec]), 0, 10_000)
    assert isinstance(frame, fr.Frame)
    assert r.validate(fr.decode_payload(frame)[0], Limits()) == rec


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ([99, 1], "unknown record kind"),
        ([r.ITEM_DEL, 0], "id must be an integer"),
        ([r.ITEM_DEL, "1"], "id must be an integer"),
        ([r.TRUNCATE, "users"], "unknown table"),
        ([r.ITEM_SET, 1, 5, None, None], "active item must have a heartbeat"),
        ([r.CACHE_PUT, 1, "c:k", "x" * 10, None], "--cache-max-entry-bytes"),
        ([r.RESULT_PUT, 1, "q:a", "v", 1, "e" * 49, False], "external_id of 49 bytes"),
        ({"a": 1}, "non-empty array"),
        ((r.ITEM_DEL, 1.5), "id must be an integer"),  # marshal decodes floats: refused
        ([r.PURGE, "users", "q", None, 5], "purge of unknown table"),
        ([r.PURGE, "queue", "q", "done", 5], "purge status"),
        ([r.PURGE, "cache", "c", "pending", 5], "purge status"),
        ([r.PURGE, "queue", "q", None, 0], "purge bound must be an integer"),
        ([r.PURGE, "queue", b"q", None, 3], "purge prefix must be text"),
        ([r.PREFIX, "q", None, None, 5], "orphaned timeout without a heartbeat timeout"),
        ([r.PREFIX, "q", "2", None, None], "last concurrency must be an integer"),
        ([r.PREFIX, 7, 2, None, None], "prefix must be text"),
        ([r.PREFIX, "q", 2, 1], "prefix has 3 fields, not 4"),
    ],
)
def test_invalid_records_name_their_reason(raw, reason):
    with pytest.raises(r.InvalidRecord, match=reason):
        r.validate(raw, Limits(cache_max_entry_bytes=10))


@settings(deadline=None)
@given(st.integers(1, 2**40), st.lists(records, min_size=1, max_size=20))
def test_json_frames_of_format_version_1_still_decode(first_lsn, recs):
    data = fr.encode_frame(first_lsn, recs, encoding=fr.ENCODING_JSON)
    frame = fr.read_frame(data, 0, len(data))
    assert isinstance(frame, fr.Frame) and frame.encoding == fr.ENCODING_JSON
    assert [r.validate(v, Limits()) for v in fr.decode_payload(frame)] == [tuple(x) for x in recs]


@pytest.mark.parametrize("payload", [
    marshal.dumps((1, 2), 4),           # a tuple, not an array
    marshal.dumps([(r.ITEM_DEL, 1)], 4),  # one record where the header says two
    b"\xff\x00garbage",                   # not marshal at all
    marshal.dumps([(r.ITEM_DEL, 1)], 4)[:-2],  # cut short
])
def test_a_payload_that_is_no_array_of_count_records_is_refused(payload):
    data = fr.encode_payload(1, 2, payload)
    frame = fr.read_frame(data, 0, len(data))
    assert isinstance(frame, fr.Frame)
    with pytest.raises(ValueError, match="payload"):
        fr.decode_payload(frame)


def test_an_unknown_encoding_is_a_bad_frame():
    data = fr.encode_payload(1, 1, marshal.dumps([(r.ITEM_DEL, 1)], 4), encoding=7)
    found = fr.read_frame(data, 0, len(data))
    assert isinstance(found, fr.BadFrame) and "encoding 7" in found.reason
