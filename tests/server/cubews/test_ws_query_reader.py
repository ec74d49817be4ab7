"""The common request's reader (``server/cubews/query_reader.py``) against the general one.

On every message Cube's driver could send, it reads what the general reader reads; on a
corrupted or random buffer it either declines (the general reader then decides) or reads
what the general reader reads. It must never answer where the general reader raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.cubews.codec import decode_general, decode_message, encode_query
from cubequeue.server.cubews.messages import HttpMessage, HttpQuery, HttpTable
from cubequeue.server.cubews.query_reader import MAX_FAST_PARAMETERS, read_query
from cubequeue.server.errors import ProtocolViolation

texts = st.text(max_size=30)
ids = st.integers(min_value=0, max_value=2**32 - 1)
params = st.lists(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | texts
    | st.binary(max_size=20)
    | st.floats(allow_nan=False),
    max_size=6,
)
tables = st.builds(
    HttpTable,
    st.none() | texts,
    st.none() | st.lists(texts, max_size=2).map(tuple),
    st.none() | st.lists(texts, max_size=2).map(tuple),
    st.none() | texts,
)


@st.composite
def messages(draw: st.DrawFn, *, inline: bool = False) -> HttpMessage:
    query = HttpQuery(
        query=draw(st.none() | texts),
        trace_obj=draw(st.none() | texts),
        inline_tables=draw(st.none() | st.lists(tables, max_size=2).map(tuple)) if inline else None,
        parameters=draw(st.none() | params.map(tuple)),
        response_format=draw(st.integers(min_value=0, max_value=255)),
    )
    return HttpMessage(draw(ids), query, draw(st.none() | texts))


def _frame(message: HttpMessage) -> bytes:
    q = message.command
    assert isinstance(q, HttpQuery)
    return encode_query(message.message_id, message.connection_id, q.query, trace_obj=q.trace_obj,
                        inline_tables=q.inline_tables, parameters=q.parameters,
                        response_format=q.response_format)  # fmt: skip


def _agrees(data: bytes) -> None:
    fast = read_query(data)
    try:
        general = decode_general(data)
    except ProtocolViolation:
        assert fast is None, f"read {fast!r} where the general reader refuses"
        return
    assert fast is None or fast == general


@settings(deadline=None, max_examples=400)
@given(messages())
def test_reads_every_query_without_inline_tables(message: HttpMessage) -> None:
    frame = _frame(message)
    assert read_query(frame) == message == decode_general(frame)
    assert decode_message(frame) == message


@settings(deadline=None, max_examples=200)
@given(messages(inline=True))
def test_declines_inline_tables_and_the_general_reader_takes_them(message: HttpMessage) -> None:
    frame = _frame(message)
    q = message.command
    assert isinstance(q, HttpQuery)
    assert (read_query(frame) is None) == (q.inline_tables is not None)
    assert decode_message(frame) == message


@settings(deadline=None, max_examples=600)
@given(messages(), st.data())
def test_corrupted_messages_are_declined_or_read_alike(
    message: HttpMessage, data: st.DataObject
) -> None:
    frame = bytearray(_frame(message))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
        frame[at] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(frame)))
    _agrees(bytes(frame))
    _agrees(bytes(frame[:cut]))


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_are_declined_or_read_alike(data: bytes) -> None:
    _agrees(data)


def test_many_parameters_go_to_the_general_reader() -> None:
    values = tuple(range(MAX_FAST_PARAMETERS + 1))
    frame = encode_query(7, "c", "CACHE GET ?", parameters=values)
    assert read_query(frame) is None
    assert decode_message(frame) == HttpMessage(7, HttpQuery("CACHE GET ?", parameters=values), "c")
    fits = encode_query(7, "c", "CACHE GET ?", parameters=values[:-1])
    assert read_query(fits) == decode_general(fits)


def test_other_commands_are_declined() -> None:
    from cubequeue.server.cubews.answers import error_frame, result_set_frame

    assert read_query(error_frame(1, "c", "boom")) is None
    assert read_query(result_set_frame(1, None, ["a"], [["x"]])) is None
