"""The frame codec and the record checks (hypothesis)."""

from __future__ import annotations

import marshal

import pytest
from durable_testkit import item_puts, records
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.durable import frames as fr
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.image import Image
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


_I64 = 2**63
_INTS = [0, 1, -1, _I64 - 1, _I64, -_I64, -_I64 - 1]
#: per field, values on and beyond the edges the checks draw (payload and extra: 16
#: characters fast, 64 bytes at all under max_payload_bytes=64; process id 24 / 96
#: characters, external id 12 / 48; ids from 1; i64 bounds)
_EDGES: dict[int, list[object]] = {
    1: _INTS, 3: ["a" * 16, "a" * 17, "a" * 65, "é" * 33], 4: _INTS, 5: _INTS, 6: _INTS,
    7: _INTS, 8: ["p" * 24, "p" * 25, "p" * 97], 10: ["e" * 12, "e" * 13, "e" * 49],
    11: ["a" * 16, "a" * 17, "a" * 65, "é" * 33], 12: [5], 13: [5],
}
#: and other types marshal can carry
_OTHERS: list[object] = [None, True, False, 1.5, b"x", "", [1], {"a": 1}, 2**70]


@st.composite
def _item_put_variants(draw: st.DrawFn) -> tuple[object, ...]:
    """Mostly valid pending ITEM_PUTs, some with one field swapped for an odd value."""
    rec = list(draw(item_puts()))
    if draw(st.integers(0, 9)):
        rec[12] = rec[13] = None  # pending: the shape the columnwise check is for
    if draw(st.booleans()):
        field = draw(st.integers(0, 13))
        rec[field] = draw(st.sampled_from(_EDGES.get(field, []) + _OTHERS))
    return tuple(rec)


@settings(deadline=None, max_examples=600)
@given(st.lists(_item_put_variants() | records, min_size=1, max_size=8)
       | st.lists(_item_put_variants(), min_size=1, max_size=3))
def test_the_columnwise_item_put_check_accepts_only_what_validate_accepts(recs):
    """plain_item_puts is a fast path: when it says yes, every record validates, and
    loading them at once gives the image their one-by-one replay gives."""
    values = fr.decode_payload(fr.read_frame(fr.encode_frame(1, recs), 0, 1 << 20))
    limits = Limits(max_payload_bytes=64)
    if not r.plain_item_puts(values, limits):
        return
    assert all(r.validate(v, limits) == v for v in values)
    one_by_one, at_once = Image(), Image()
    for v in values:
        one_by_one.apply(v)
    at_once.load_item_puts(values)
    assert at_once == one_by_one and at_once.max_ts == one_by_one.max_ts


def test_every_edge_value_in_every_field_is_accepted_columnwise_only_if_valid():
    base = (r.ITEM_PUT, 3, "q:k", "p", 0, 5, None, 99, None, False, None, None, None, None)
    limits = Limits(max_payload_bytes=64)
    accepted = 0
    for field in range(14):
        for value in _EDGES.get(field, []) + _OTHERS:
            rec = (*base[:field], value, *base[field + 1:])
            values = marshal.loads(marshal.dumps([base, rec], 4))
            if r.plain_item_puts(values, limits):
                accepted += 1
                assert r.validate(values[1], limits) == values[1], (field, value)
    assert accepted > 20  # the edges inside the limits do take the fast path


def test_a_frame_of_plain_item_puts_takes_the_columnwise_path():
    recs = [(r.ITEM_PUT, i, f"q:{i}", "p", 0, 5 + i, None, 99, None, False, None, None, None,
             None) for i in range(1, 50)]
    assert r.plain_item_puts(list(recs), Limits())
    assert not r.plain_item_puts([*recs, (r.ITEM_DEL, 3)], Limits())  # mixed: one by one
    assert not r.plain_item_puts([(True, *recs[0][1:])], Limits())  # True == 1, not a kind
    active = (*recs[0][:12], 7, 7)
    assert not r.plain_item_puts([active], Limits())
