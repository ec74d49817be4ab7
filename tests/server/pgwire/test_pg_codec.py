"""Codec vectors: every message byte for byte, fed whole, byte by byte and with trailing bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import BackendDecoder, PgError, encode_frontend
from cubequeue.server.pgwire.decoder import Decoder, FramingError, decode_sasl_initial_response
from cubequeue.server.pgwire.encoder import encode

# (message, golden hex) — frontend messages as a client writes them (PostgreSQL 15
# "Message Formats"; the startup packets as captured from psql 15 / libpq).
FRONTEND = [
    (m.SSLRequest(), "0000000804d2162f"),
    (m.GSSENCRequest(), "0000000804d21630"),
    (m.CancelRequest(1234, -2), "0000001004d2162e000004d2fffffffe"),
    (
        m.StartupMessage(196608, (("user", "cube"), ("database", "q"))),
        "0000001e00030000" + "7573657200" + "6375626500" + "646174616261736500" + "710000",
    ),
    (m.Query("SELECT 1"), "510000000d" + "53454c4543542031" + "00"),
    (m.Query(""), "510000000500"),
    (
        m.Parse("s1", "QUEUE GET $1", (20,)),
        "500000001a" + "733100" + "5155455545204745542024" + "3100" + "0001" + "00000014",
    ),
    (m.Parse("", "x", ()), "50000000090078000000"),
    (
        m.Bind("p", "s", (1,), (b"\x00\x07", None), (0, 1)),
        "420000001e"
        + "7000"
        + "7300"
        + "0001"
        + "0001"
        + "0002"
        + "000000020007"
        + "ffffffff"
        + "0002"
        + "00000001",
    ),
    (m.Describe("S", "s1"), "440000000853733100"),
    (m.Describe("P", ""), "440000000650" + "00"),
    (m.Execute("", 1), "45000000090000000001"),
    (m.Close("P", "p"), "430000000750" + "7000"),
    (m.Sync(), "5300000004"),
    (m.Flush(), "4800000004"),
    (m.Terminate(), "5800000004"),
    (m.PasswordMessage(b"secret\0"), "700000000b" + "73656372657400"),
    (m.CopyData(b"ab"), "64000000066162"),
    (m.CopyDone(), "6300000004"),
    (m.CopyFail("no"), "6600000007" + "6e6f00"),
    (m.FunctionCall(b"\x00\x00\x00\x01"), "460000000800000001"),
]

BACKEND = [
    (m.AuthenticationOk(), "520000000800000000"),
    (m.AuthenticationCleartextPassword(), "520000000800000003"),
    (m.AuthenticationMD5Password(b"abcd"), "520000000c0000000561626364"),
    (
        m.AuthenticationSASL(("SCRAM-SHA-256",)),
        "5200000017" + "0000000a" + "5343524" + "14d2d5348412d32353600" + "00",
    ),
    (m.AuthenticationSASLContinue(b"r=x"), "520000000b0000000b723d78"),
    (m.AuthenticationSASLFinal(b"v=y"), "520000000b0000000c763d79"),
    (m.ParameterStatus("a", "b"), "5300000008" + "6100" + "6200"),
    (m.BackendKeyData(7, -1), "4b0000000c00000007ffffffff"),
    (m.ReadyForQuery("I"), "5a0000000549"),
    (m.ReadyForQuery("T"), "5a0000000554"),
    (m.ReadyForQuery("E"), "5a0000000545"),
    (
        m.RowDescription((m.FieldDescription("id", 25),)),
        "540000001b"
        + "0001"
        + "696400"
        + "00000000"
        + "0000"
        + "00000019"
        + "ffff"
        + "ffffffff"
        + "0000",
    ),
    (
        m.RowDescription((m.FieldDescription("n", 20, 8, 1),)),
        "540000001a"
        + "0001"
        + "6e00"
        + "00000000"
        + "0000"
        + "00000014"
        + "0008"
        + "ffffffff"
        + "0001",
    ),
    (m.DataRow((b"1", None, b"")), "4400000013" + "0003" + "0000000131" + "ffffffff" + "00000000"),
    (m.DataRow(()), "44000000060000"),
    (m.CommandComplete("QUEUE ADD 1"), "4300000010" + "515545554520414444203100"),
    (m.EmptyQueryResponse(), "4900000004"),
    (
        m.ErrorResponse((("S", "ERROR"), ("C", "42601"))),
        "4500000013" + "534552524f5200" + "433432363031" + "00" + "00",
    ),
    (m.NoticeResponse((("S", "WARNING"),)), "4e0000000e" + "535741524e494e4700" + "00"),
    (m.ParseComplete(), "3100000004"),
    (m.BindComplete(), "3200000004"),
    (m.CloseComplete(), "3300000004"),
    (m.NoData(), "6e00000004"),
    (m.PortalSuspended(), "7300000004"),
    (m.ParameterDescription((20, 25)), "740000000e" + "0002" + "00000014" + "00000019"),
    (
        m.NegotiateProtocolVersion(0, ("_pq_.x",)),
        "7600000013" + "00000000" + "00000001" + "5f70715f2e7800",
    ),
]


def _decoder_for(msg: m.FrontendMessage) -> Decoder:
    dec = Decoder()
    if not isinstance(msg, (m.StartupMessage, m.SSLRequest, m.GSSENCRequest, m.CancelRequest)):
        dec.expect_startup = False
    return dec


def test_every_message_type_has_a_vector():
    assert {type(msg) for msg, _ in BACKEND} == set(m.BACKEND_TYPES)
    frontend_types = {type(msg) for msg, _ in FRONTEND}
    assert frontend_types == set(m.FrontendMessage.__args__)


@pytest.mark.parametrize(("msg", "golden"), FRONTEND, ids=lambda v: type(v).__name__)
def test_frontend_vectors(msg, golden):
    raw = bytes.fromhex(golden)
    assert encode_frontend(msg) == raw
    # whole
    assert _decoder_for(msg).feed(raw) == [msg]
    # byte by byte
    dec = _decoder_for(msg)
    out = []
    for i in range(len(raw)):
        out += dec.feed(raw[i : i + 1])
    assert out == [msg]
    assert dec.buffered == 0
    # with trailing bytes: the start of a further Sync stays buffered
    dec = _decoder_for(msg)
    assert dec.feed(raw + b"S\0\0") == [msg]
    assert dec.buffered == 3


@pytest.mark.parametrize(("msg", "golden"), BACKEND, ids=lambda v: type(v).__name__)
def test_backend_vectors(msg, golden):
    raw = bytes.fromhex(golden)
    assert encode(msg) == raw
    assert BackendDecoder().feed(raw) == [msg]
    dec = BackendDecoder()
    out = []
    for byte in raw:
        out += dec.feed(bytes([byte]))
    assert out == [msg]
    dec = BackendDecoder()
    assert dec.feed(raw + b"Z\0") == [msg]
    assert dec.buffered == b"Z\0"


def test_startup_then_typed_messages_in_one_chunk():
    startup = m.StartupMessage(196608, (("user", "u"),))
    raw = encode_frontend(m.SSLRequest()) + encode_frontend(startup) + encode_frontend(m.Sync())
    dec = Decoder()
    assert dec.feed(raw) == [m.SSLRequest(), startup, m.Sync()]
    assert not dec.expect_startup


def test_sasl_initial_response():
    payload = b"SCRAM-SHA-256\0" + b"\0\0\0\x03" + b"n,,"
    assert decode_sasl_initial_response(payload) == m.SASLInitialResponse("SCRAM-SHA-256", b"n,,")
    assert decode_sasl_initial_response(b"X\0\xff\xff\xff\xff").data is None
    with pytest.raises(ProtocolViolation):
        decode_sasl_initial_response(b"X\0\0\0\0\x09ab")


@pytest.mark.parametrize(
    "raw",
    [
        "5a00000004",  # unknown type 'Z'
        "5300000003",  # length under 4
        "530000000500",  # Sync with a body
        "4800000005ff",  # Flush with a body
        "510000000661ff",  # Query without terminator... 'a' then 0xff: no NUL
        "5100000007610062",  # bytes after the Query's NUL
        "5000000008" + "0000ffff",  # negative count in Parse
        "4200000008" + "0000fffe",  # negative format count in Bind
        "420000000d00000000" + "0001fffffffe",  # parameter length -2
        "440000000658" + "00",  # Describe of kind 'X'
        "4300000006" + "5100",  # Close of kind 'Q'
    ],
)
def test_framing_errors(raw):
    dec = Decoder()
    dec.expect_startup = False
    with pytest.raises(FramingError):
        dec.feed(bytes.fromhex(raw))


def test_messages_before_a_framing_error_are_kept():
    dec = Decoder()
    dec.expect_startup = False
    with pytest.raises(FramingError) as info:
        dec.feed(b"S\0\0\0\x04" + b"?\0\0\0\x04")
    assert info.value.decoded == [m.Sync()]
    assert info.value.sqlstate == "08P01"


def test_oversized_message_refused_from_its_header_alone():
    dec = Decoder(max_message_size=100)
    dec.expect_startup = False
    assert dec.feed(b"Q\0\0\0\x68" + b"a" * 99 + b"\0") == [m.Query("a" * 99)]
    with pytest.raises(FramingError, match="maximum message size"):
        dec.feed(b"Q\x7f\xff\xff\xff")  # only the header: no body is ever needed


def test_startup_packet_cap():
    with pytest.raises(FramingError, match="startup packet"):
        Decoder().feed(b"\0\0\x27\x11")  # 10,001
    with pytest.raises(FramingError):
        Decoder().feed(b"\0\0\0\x04")
    # exactly 10,000 is fine
    body = b"\0\x03\0\0" + b"user\0" + b"u" * (10_000 - 15) + b"\0\0"
    raw = (len(body) + 4).to_bytes(4, "big") + body
    assert len(raw) == 10_000
    assert len(Decoder().feed(raw)) == 1


# --- round trips and fuzz ---------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))
_i16 = st.integers(-(2**15), 2**15 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_u32 = st.integers(0, 2**32 - 1)
_value = st.one_of(st.none(), st.binary(max_size=20))

_FRONTEND_STRATEGY = st.one_of(
    st.builds(m.Query, _text),
    st.builds(m.Parse, _text, _text, st.tuples(_u32, _u32)),
    st.builds(
        m.Bind, _text, _text, st.lists(_i16, max_size=3).map(tuple),
        st.lists(_value, max_size=3).map(tuple), st.lists(_i16, max_size=3).map(tuple),
    ),
    st.builds(m.Describe, st.sampled_from("SP"), _text),
    st.builds(m.Close, st.sampled_from("SP"), _text),
    st.builds(m.Execute, _text, _i32),
    st.builds(m.PasswordMessage, st.binary()),
    st.builds(m.CopyData, st.binary()),
    st.builds(m.CopyFail, _text),
    st.sampled_from([m.Sync(), m.Flush(), m.Terminate(), m.CopyDone()]),
)  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(st.lists(_FRONTEND_STRATEGY, max_size=5))
def test_frontend_round_trip(msgs):
    dec = Decoder()
    dec.expect_startup = False
    raw = b"".join(encode_frontend(msg) for msg in msgs)
    assert dec.feed(raw) == msgs
    assert dec.buffered == 0


_BACKEND_STRATEGY = st.one_of(
    st.builds(m.DataRow, st.lists(_value, max_size=4).map(tuple)),
    st.builds(m.CommandComplete, _text),
    st.builds(m.ParameterStatus, _text, _text),
    st.builds(m.BackendKeyData, _i32, _i32),
    st.builds(m.ParameterDescription, st.lists(_u32, max_size=4).map(tuple)),
    st.builds(m.ErrorResponse, st.lists(st.tuples(st.sampled_from("SVCMHP"), _text)).map(tuple)),
    st.builds(
        m.RowDescription,
        st.lists(st.builds(m.FieldDescription, _text, _u32, _i16, st.sampled_from([0, 1]))).map(
            tuple
        ),
    ),
)


@settings(deadline=None, max_examples=200)
@given(_BACKEND_STRATEGY)
def test_backend_round_trip(msg):
    assert BackendDecoder().feed(encode(msg)) == [msg]


@settings(deadline=None, max_examples=1000)
@given(st.binary(max_size=200), st.booleans(), st.integers(1, 50))
def test_decoder_fuzz_random_bytes(data, startup, chunk):
    dec = Decoder(max_message_size=1000)
    dec.expect_startup = startup
    try:
        for i in range(0, len(data), chunk):
            dec.feed(data[i : i + chunk])
    except ProtocolViolation:
        pass


@settings(deadline=None, max_examples=500)
@given(st.lists(_FRONTEND_STRATEGY, min_size=1, max_size=4), st.data())
def test_decoder_fuzz_truncated_and_mutated_frames(msgs, data):
    raw = bytearray(b"".join(encode_frontend(msg) for msg in msgs))
    cut = data.draw(st.integers(0, len(raw)))
    raw = raw[:cut]
    if raw:
        flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255))))
        for pos, byte in flips:
            raw[pos] = byte
    dec = Decoder(max_message_size=1000)
    dec.expect_startup = False
    try:
        out = dec.feed(bytes(raw))
    except ProtocolViolation:
        return
    assert all(isinstance(msg, m.FrontendMessage.__args__) for msg in out)


# --- the fast readers (Bind/Parse/Describe/Execute/Query) agree with the checked ones ----

_FAST_CODES = {"B": m.Bind, "P": m.Parse, "D": m.Describe, "E": m.Execute, "Q": m.Query}


def _checked(code: str, body: bytes) -> object:
    """What the checked reader alone makes of ``body``: a message, or the error text."""
    from cubequeue.server.pgwire import decoder as codec

    r = codec._Reader(body)
    try:
        msg = codec._READERS[ord(code)](r)
        r.end()
    except FramingError as exc:
        return str(exc)
    return msg


def _decoded(code: str, body: bytes) -> object:
    from cubequeue.server.pgwire import decoder as codec

    try:
        return codec._read_typed(ord(code), body)
    except FramingError as exc:
        return str(exc)


@settings(deadline=None, max_examples=500)
@given(st.lists(_FRONTEND_STRATEGY, min_size=1, max_size=1), st.data())
def test_fast_readers_match_the_checked_readers_on_mutated_bodies(msgs, data):
    raw = bytearray(encode_frontend(msgs[0]))
    code = chr(raw[0])
    body = raw[5:]
    if code not in _FAST_CODES:
        return
    assert _decoded(code, bytes(body)) == _checked(code, bytes(body)) == msgs[0]
    cut = data.draw(st.integers(0, len(body)))
    body = body[:cut] + data.draw(st.binary(max_size=3))
    if body:
        for pos, byte in data.draw(
            st.lists(st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)))
        ):
            body[pos] = byte
    assert _decoded(code, bytes(body)) == _checked(code, bytes(body))


@pytest.mark.parametrize(
    ("code", "body"),
    [
        ("B", b"\0\0\0\x01\0\0"),  # truncated format codes
        ("B", b"\0\0\xff\xff"),  # negative count
        ("B", b"\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0"),  # parameter length -2
        ("B", b"\0\0\0\0\0\x01\0\0\0\x09ab\0\0"),  # parameter longer than the body
        ("B", b"\0\0\0\0\0\0\0\0!"),  # trailing byte
        ("B", b"\xff\0\0\0\0\0\0\0"),  # bad UTF-8 portal name
        ("E", b"\0\0\0\0"),  # short max_rows
        ("D", b"X\0"),  # bad subtype
        ("D", b"S"),  # no terminator
        ("Q", b"SELECT 1"),  # no terminator
        ("Q", b"SELECT 1\0\0"),  # trailing byte
        ("P", b"\0SELECT 1\0\0\x01\0\0"),  # truncated OIDs
    ],
)
def test_fast_readers_defer_malformed_bodies_to_the_checked_reader(code, body):
    expected = _checked(code, body)
    assert isinstance(expected, str)
    assert _decoded(code, body) == expected


def test_partial_message_is_buffered_until_complete():
    raw = encode_frontend(m.Bind("", "s", (), (b"x" * 5000,), ())) + encode_frontend(m.Sync())
    dec = Decoder()
    dec.expect_startup = False
    got = []
    for i in range(0, len(raw), 7):
        got += dec.feed(raw[i : i + 7])
        assert dec.buffered == min(i + 7, len(raw)) - sum(len(encode_frontend(msg)) for msg in got)
    assert got == [m.Bind("", "s", (), (b"x" * 5000,), ()), m.Sync()]
    assert dec.buffered == 0


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("fmt", [0, 1])
def test_row_dumper_matches_dump_value_for_every_width(width, fmt):
    from cubequeue.server.pgtypes.adapters import dump_value, row_dumper
    from cubequeue.server.pgtypes.oids import BOOL, INT8, TEXT

    oids = [INT8, TEXT, BOOL][:width]
    dump = row_dumper(oids, [fmt] * width)
    row = [7, "x", True][:width]
    assert dump(row) == tuple(dump_value(oid, fmt, v) for oid, v in zip(oids, row, strict=True))
    assert dump([None] * width) == (None,) * width
    with pytest.raises(ValueError):
        dump([*row, 1])


# --- the client role: what a broken server sends is a PgError (08P01) -------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"Z\0\0\0\x02",  # a length below 4
        b"Q\0\0\0\x05I",  # a frontend-only type byte
        b"D\0\0\0\x0a\0\x01\0\0\0\x09ab",  # a value longer than its message
        b"C\0\0\0\x06ok",  # a C string without its terminator
        b"Z\0\0\0\x06II",  # trailing bytes
        b"R\0\0\0\x08\0\0\0\x63",  # an unknown authentication request
    ],
)
def test_backend_decoder_refuses_broken_bytes(raw):
    with pytest.raises(PgError) as info:
        BackendDecoder().feed(raw)
    assert info.value.sqlstate in ("08P01", "08006")
    assert not info.value.from_server


def test_backend_decoder_refuses_a_hostile_length_before_the_body():
    dec = BackendDecoder(max_message_size=100)
    with pytest.raises(PgError, match="bad message length"):
        dec.feed(b"D\x7f\xff\xff\xff")


@settings(deadline=None, max_examples=500)
@given(st.binary(max_size=200), st.integers(1, 50))
def test_backend_decoder_fuzz_raises_only_pgerror(data, chunk):
    dec = BackendDecoder(max_message_size=1000)
    try:
        for i in range(0, len(data), chunk):
            dec.feed(data[i : i + chunk])
    except PgError as exc:
        assert exc.sqlstate in ("08P01", "08006")


def test_sasl_initial_response_round_trips_through_the_server_codec():
    msg = m.SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=abc")
    raw = encode_frontend(msg)
    assert raw[:1] == b"p"
    assert decode_sasl_initial_response(raw[5:]) == msg
