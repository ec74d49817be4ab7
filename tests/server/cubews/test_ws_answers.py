"""The answer writer (``server/cubews/answers.py``) against ``flatbuffers.Builder``.

``codec.encode`` still builds ``HttpResultSet`` / ``HttpError`` with the Builder, so the
two must give the same bytes for any columns, rows (NULLs, empty strings, non-ASCII,
long texts that need padding), message ids and connection ids; the golden dumps of
Cube Store are checked in ``test_ws_codec.py``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.cubews.answers import error_frame, result_set_frame
from cubequeue.server.cubews.codec import decode_message, encode
from cubequeue.server.cubews.messages import HttpError, HttpMessage, HttpResultSet

texts = st.text(max_size=40)
ids = st.integers(min_value=0, max_value=2**32 - 1)
conn_ids = st.none() | texts


@st.composite
def result_sets(draw: st.DrawFn) -> tuple[tuple[str, ...], tuple[tuple[str | None, ...], ...]]:
    width = draw(st.integers(min_value=0, max_value=5))
    columns = tuple(draw(st.lists(texts, min_size=width, max_size=width)))
    rows = draw(st.lists(st.lists(st.none() | texts, min_size=width, max_size=width).map(tuple),
                         max_size=6))  # fmt: skip
    return columns, tuple(rows)


@settings(deadline=None, max_examples=300)
@given(result_sets(), ids, conn_ids)
def test_result_sets_match_the_builder(rs: tuple[tuple[str, ...], tuple[tuple[str | None, ...], ...]],
                                       message_id: int, connection_id: str | None) -> None:  # fmt: skip
    columns, rows = rs
    message = HttpMessage(message_id, HttpResultSet(columns, rows), connection_id)
    frame = result_set_frame(message_id, connection_id, columns, rows)
    assert frame == encode(message)
    assert decode_message(frame) == message


@settings(deadline=None, max_examples=200)
@given(texts, ids, conn_ids)
def test_errors_match_the_builder(text: str, message_id: int, connection_id: str | None) -> None:
    message = HttpMessage(message_id, HttpError(text), connection_id)
    frame = error_frame(message_id, connection_id, text)
    assert frame == encode(message)
    assert decode_message(frame) == message
