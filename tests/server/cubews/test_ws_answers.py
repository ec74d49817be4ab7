"""The answer writer (``server/cubews/answers.py``) against ``flatbuffers.Builder``.

``codec.encode`` still builds ``HttpResultSet`` / ``HttpError`` with the Builder, so the
two must give the same bytes for any columns, rows (NULLs, empty strings, non-ASCII,
long texts that need padding), message ids and connection ids; the golden dumps of
Cube Store are checked in ``test_ws_codec.py``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.results import ColumnType
from cubequeue.server.cubews import answers
from cubequeue.server.cubews.answers import ResultSetWriter, error_frame, result_set_frame
from cubequeue.server.cubews.codec import cell_text, cell_texts, decode_message, encode
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


@settings(deadline=None, max_examples=300)
@given(result_sets(), ids, conn_ids, st.lists(st.integers(min_value=0, max_value=6), max_size=4))
def test_rows_written_in_slices_give_the_same_frame(
    rs: tuple[tuple[str, ...], tuple[tuple[str | None, ...], ...]],
    message_id: int,
    connection_id: str | None,
    cuts: list[int],
) -> None:
    columns, rows = rs
    writer = ResultSetWriter(columns)
    at = 0
    for cut in sorted(cuts):
        writer.add(rows[at:cut])
        at = max(at, cut)
    writer.add(rows[at:])
    assert writer.finish(message_id, connection_id) == encode(
        HttpMessage(message_id, HttpResultSet(columns, rows), connection_id)
    )


def test_a_cached_column_header_gives_the_bytes_of_a_fresh_one() -> None:
    columns, rows = ("id", "queue_id", "status"), (("a", "1", None), ("bé", "22", "x"))
    answers._HEADS.clear()
    fresh = result_set_frame(3, "c", columns, rows)
    assert tuple(columns) in answers._HEADS
    assert result_set_frame(3, "c", columns, rows) == fresh
    assert fresh == encode(HttpMessage(3, HttpResultSet(columns, rows), "c"))


def test_the_header_cache_is_bounded() -> None:
    answers._HEADS.clear()
    for i in range(answers.MAX_CACHED_HEADS + 5):
        result_set_frame(1, None, (f"c{i}",), ())
    assert len(answers._HEADS) <= answers.MAX_CACHED_HEADS


_types = st.sampled_from(list(ColumnType))
_values = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
           | texts | st.floats(allow_nan=False))  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(st.lists(_types, max_size=4), st.lists(st.lists(_values, max_size=6), max_size=5), ids,
       conn_ids)  # fmt: skip
def test_values_converted_in_the_cell_loop_match_cell_texts_first(
    types: list[ColumnType], rows: list[list[object]], message_id: int, connection_id: str | None
) -> None:
    """``add(rows, types, cell_text, STRING)`` writes what ``add(cell_texts(rows, types))``
    writes: a typed value as its text, a cell past the columns as a string, str and NULL
    as they are."""
    fused = ResultSetWriter(["a", "b"])
    fused.add(rows, types, cell_text, ColumnType.STRING)
    texts_first = ResultSetWriter(["a", "b"])
    texts_first.add(cell_texts(rows, types))  # type: ignore[arg-type]
    assert fused.finish(message_id, connection_id) == texts_first.finish(message_id, connection_id)


def test_a_value_without_convert_is_refused() -> None:
    writer = ResultSetWriter(["a"])
    with pytest.raises(TypeError, match="not text"):
        writer.add([[7]])
