"""Golden bytes for the HttpMessage codec (``server/cubews/http_message.fbs``).

The three vectors are the byte dumps of Cube's ``rust/cubeshared/tests/wire_compat.rs``
(an HttpQuery with an inline table, an HttpResultSet with 2x2 string cells, an
HttpError), written by Cube Store's Rust flatbuffers builder. We decode each to the
values that file asserts, and our encoder reproduces each byte for byte: the creation
order of children and flatc's field order (largest first, last-declared first within a
size) are matched in ``codec.py``.
"""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.results import ColumnType, ResultSet, columns
from cubequeue.server.cubews.codec import (
    cell_text,
    decode_message,
    encode,
    encode_error,
    encode_query,
    encode_result_set,
)
from cubequeue.server.cubews.messages import (
    HttpError,
    HttpMessage,
    HttpQuery,
    HttpResultSet,
    HttpTable,
    OtherCommand,
)
from cubequeue.server.errors import ProtocolViolation

QUERY_V23 = bytes.fromhex(
    "100000000c001400080007000c0010000c000000000000012a00000020000000"
    "0400000006000000636f6e6e2d31000000000a001000040008000c000a000000"
    "a8000000940000000400000001000000100000000c001400040008000c001000"
    "0c00000010000000540000002c0000001400000008000000696e6c696e655f74"
    "000000000c000000312c666f6f0a322c6261720a000000000200000014000000"
    "0400000004000000557466380000000005000000496e74333200000002000000"
    "1000000004000000010000006200000001000000610000000900000074726163"
    "652d6162630000000800000053454c454354203100000000"
)
RESULT_SET_V23 = bytes.fromhex(
    "100000000c001400080007000c0010000c00000000000002070000001c000000"
    "0400000006000000636f6e6e2d32000008000c00040008000800000084000000"
    "04000000020000003c00000004000000a6ffffff040000000200000018000000"
    "04000000baffffff0400000003000000626f6200caffffff0400000001000000"
    "32000000daffffff04000000020000002000000004000000eeffffff04000000"
    "05000000616c6963650006000800040006000000040000000100000031000000"
    "020000001400000004000000040000006e616d65000000000200000069640000"
)
ERROR_V23 = bytes.fromhex(
    "100000000c001400080007000c0010000c00000000000003630000001c000000"
    "0400000006000000636f6e6e2d33000000000600080004000600000004000000"
    "14000000626f6f6d3a20646976696465206279207a65726f00000000"
)

QUERY_MESSAGE = HttpMessage(
    42,
    HttpQuery(
        query="SELECT 1",
        trace_obj="trace-abc",
        inline_tables=(HttpTable("inline_t", ("a", "b"), ("Int32", "Utf8"), "1,foo\n2,bar\n"),),
    ),
    "conn-1",
)
RESULT_SET_MESSAGE = HttpMessage(
    7, HttpResultSet(("id", "name"), (("1", "alice"), ("2", "bob"))), "conn-2"
)
ERROR_MESSAGE = HttpMessage(99, HttpError("boom: divide by zero"), "conn-3")

GOLDEN = [
    pytest.param(QUERY_V23, QUERY_MESSAGE, id="query"),
    pytest.param(RESULT_SET_V23, RESULT_SET_MESSAGE, id="result_set"),
    pytest.param(ERROR_V23, ERROR_MESSAGE, id="error"),
]


@pytest.mark.parametrize(("data", "message"), GOLDEN)
def test_golden_decodes(data: bytes, message: HttpMessage) -> None:
    assert decode_message(data) == message


@pytest.mark.parametrize(("data", "message"), GOLDEN)
def test_golden_encodes_to_the_same_bytes(data: bytes, message: HttpMessage) -> None:
    assert encode(message) == data


@pytest.mark.parametrize(("data", "message"), GOLDEN)
def test_golden_with_trailing_bytes(data: bytes, message: HttpMessage) -> None:
    assert decode_message(data + b"\x00" * 8) == message


@pytest.mark.parametrize(("data", "message"), GOLDEN)
def test_every_truncation_is_a_protocol_violation_or_harmless(data: bytes, message: HttpMessage) -> None:
    for cut in range(len(data)):
        try:
            decoded = decode_message(data[:cut])
        except ProtocolViolation:
            continue
        assert decoded != message or cut >= len(data) - 8  # only padding may be missing


def test_the_result_set_helpers_write_the_golden_bytes() -> None:
    rs = ResultSet(columns(("id", ColumnType.INT), ("name", ColumnType.STRING)),
                   [(1, "alice"), (2, "bob")])
    assert encode_result_set(7, "conn-2", rs) == RESULT_SET_V23
    assert encode_error(99, "conn-3", "boom: divide by zero") == ERROR_V23
    table = HttpTable("inline_t", ("a", "b"), ("Int32", "Utf8"), "1,foo\n2,bar\n")
    assert encode_query(42, "conn-1", "SELECT 1", trace_obj="trace-abc",
                        inline_tables=[table]) == QUERY_V23


def test_cells_are_strings_and_null_is_absent() -> None:
    rs = ResultSet(
        columns(("s", ColumnType.STRING), ("i", ColumnType.INT), ("b", ColumnType.BOOLEAN),
                ("t", ColumnType.TIMESTAMP), ("n", ColumnType.STRING)),
        [("x", -5, True, 1_796_051_045_123, None), ("", 0, False, 0, "y")],
    )
    decoded = decode_message(encode_result_set(3, None, rs))
    assert decoded == HttpMessage(3, HttpResultSet(
        ("s", "i", "b", "t", "n"),
        (("x", "-5", "true", "2026-11-30T15:04:05.123Z", None),
         ("", "0", "false", "1970-01-01T00:00:00.000Z", "y")),
    ))


def test_timestamp_rendering() -> None:
    assert cell_text(1_796_051_045_000, ColumnType.TIMESTAMP) == "2026-11-30T15:04:05.000Z"
    assert cell_text(-1, ColumnType.TIMESTAMP) == "1969-12-31T23:59:59.999Z"
    assert cell_text(10**18, ColumnType.TIMESTAMP) == str(10**18)  # beyond year 9999
    assert cell_text(7, ColumnType.INT) == "7"


def test_empty_frame_has_no_columns_and_no_rows() -> None:
    decoded = decode_message(encode_result_set(1, "c", ResultSet(())))
    assert decoded.command == HttpResultSet((), ())


def test_typed_parameters_roundtrip() -> None:
    params = (5, -(2**63), 2**63 - 1, True, False, "path:key", "", b"\x00\xff", b"", 1.5, 0.0, None)
    data = encode_query(9, "c", "QUEUE ACK ? ?", parameters=params, response_format=1)
    decoded = decode_message(data)
    assert decoded == HttpMessage(9, HttpQuery("QUEUE ACK ? ?", parameters=params,
                                               response_format=1), "c")
    assert [type(v) for v in decoded.command.parameters or ()] == [type(v) for v in params]


def test_absent_connection_id_and_other_commands() -> None:
    assert decode_message(encode_error(1, None, "x")).connection_id is None
    # an HttpMessage with command_type 4 (HttpQueryResult), which clients never send
    data = bytearray(encode_error(1, "c", "x"))
    root = int.from_bytes(data[0:4], "little")
    vtable = root - int.from_bytes(data[root:root + 4], "little", signed=True)
    type_at = root + int.from_bytes(data[vtable + 6:vtable + 8], "little")
    data[type_at] = 4
    assert decode_message(bytes(data)).command == OtherCommand(4)


def test_bad_utf8_is_a_protocol_violation() -> None:
    data = encode_error(1, "c", "abc")
    bad = data.replace(b"abc", b"a\xffc")
    with pytest.raises(ProtocolViolation):
        decode_message(bad)


param_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(), st.binary(),
    st.floats(allow_nan=False).filter(lambda f: not (f == 0 and math.copysign(1, f) < 0)),
)
texts = st.text(max_size=20)
commands = st.one_of(
    st.builds(HttpError, texts),
    st.builds(
        HttpResultSet,
        st.lists(texts, max_size=4).map(tuple),
        st.lists(st.lists(st.none() | texts, max_size=4).map(tuple), max_size=4).map(tuple),
    ),
    st.builds(
        HttpQuery,
        st.none() | texts,
        st.none() | texts,
        st.none() | st.lists(st.builds(
            HttpTable, st.none() | texts,
            st.none() | st.lists(texts, max_size=3).map(tuple),
            st.none() | st.lists(texts, max_size=3).map(tuple), st.none() | texts,
        ), max_size=2).map(tuple),
        st.none() | st.lists(param_values, max_size=5).map(tuple),
        st.integers(0, 1),
    ),
)
messages = st.builds(HttpMessage, st.integers(0, 2**32 - 1), commands, st.none() | texts)


@settings(deadline=None, max_examples=300)
@given(messages)
def test_roundtrip(message: HttpMessage) -> None:
    assert decode_message(encode(message)) == message


@settings(deadline=None, max_examples=500)
@given(st.binary(max_size=300))
def test_garbage_raises_only_protocol_violation(data: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        decode_message(data)


@settings(deadline=None, max_examples=300)
@given(st.data())
def test_corrupted_golden_raises_only_protocol_violation(data: st.DataObject) -> None:
    base = bytearray(data.draw(st.sampled_from([QUERY_V23, RESULT_SET_V23, ERROR_V23])))
    for _ in range(data.draw(st.integers(1, 4))):
        base[data.draw(st.integers(0, len(base) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolViolation):
        decode_message(bytes(base))


def test_the_codec_is_sans_io() -> None:
    """Codec modules are sans-I/O: they never import asyncio."""
    import subprocess
    import sys

    code = "import sys, cubequeue.server.cubews.codec; sys.exit('asyncio' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
