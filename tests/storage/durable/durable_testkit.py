"""Shared pieces of the durable tests: valid records, and a log recorded frame by frame."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.grammar.results import ResultSet
from cubequeue.storage.durable import layout
from cubequeue.storage.durable import records as r
from cubequeue.storage.durable.frames import encode_frame
from cubequeue.storage.durable.image import Image
from cubequeue.storage.durable.records import Record
from cubequeue.storage.durable.segments import SegmentWriter

DIR = "/data"
T0 = 1_700_000_000_000

texts = st.text(max_size=12)
ids = st.integers(1, 40)
stamps = st.integers(T0, T0 + 10_000)


@st.composite
def item_puts(draw: st.DrawFn) -> Record:
    activated = draw(st.none() | stamps)
    heartbeat = None if activated is None else draw(stamps)
    return (r.ITEM_PUT, draw(ids), "q:" + draw(texts), draw(texts), draw(st.integers(-5, 5)),
            draw(stamps), draw(st.none() | stamps), T0 + 14_400_000, draw(st.none() | texts),
            draw(st.booleans()), draw(st.none() | texts), draw(st.none() | texts), heartbeat,
            activated)


@st.composite
def item_sets(draw: st.DrawFn) -> Record:
    activated = draw(stamps)
    return (r.ITEM_SET, draw(ids), activated, draw(stamps), draw(st.none() | texts))


records = st.one_of(
    item_puts(),
    item_sets(),
    st.tuples(st.just(r.ITEM_DEL), ids),
    st.tuples(st.just(r.RESULT_PUT), ids, texts.map(lambda t: "q:" + t), texts,
              st.just(T0 + 60_000), st.none() | texts.filter(lambda t: len(t) < 12),
              st.booleans()),
    st.tuples(st.just(r.RESULT_FLAG), ids),
    st.tuples(st.just(r.RESULT_DEL), ids),
    st.tuples(st.just(r.CACHE_PUT), ids, texts.map(lambda t: "c:" + t), texts,
              st.none() | st.just(T0 + 100_000)),
    st.tuples(st.just(r.CACHE_DEL), texts.map(lambda t: "c:" + t)),
    st.tuples(st.just(r.TRUNCATE), st.sampled_from(["queue", "cache"])),
    st.tuples(st.just(r.ID_RESERVE), st.integers(1, 100_000)),
    st.tuples(st.just(r.PURGE), st.just("queue"), st.sampled_from(["q", "", "q:x"]),
              st.sampled_from([None, "pending", "active"]), ids),
    st.tuples(st.just(r.PURGE), st.just("cache"), st.sampled_from(["c", ""]), st.none(), ids),
    st.tuples(st.just(r.PREFIX), st.sampled_from(["q", "", "q:x"]), st.none() | ids,
              st.none(), st.none()),  # all null: the prefix was forgotten
    st.tuples(st.just(r.PREFIX), st.sampled_from(["q", "", "q:x"]), st.none() | ids,
              st.integers(0, 10**6), st.none() | st.integers(0, 10**6)),
)
frame_lists = st.lists(st.lists(records, min_size=1, max_size=5), min_size=1, max_size=8)


def image_of(frames: list[list[Record]]) -> Image:
    image = Image()
    for frame in frames:
        for rec in frame:
            image.apply(rec)
    return image


def record_log(files, frames: list[list[Record]], directory: uuid.UUID,
               segment_bytes: int = 1 << 16) -> tuple[str, list[int]]:
    """Write ``frames`` into one segment; its name and each frame's end offset."""
    files.makedirs(DIR)
    files.put(f"{DIR}/DIRECTORY_ID", f"{directory}\n".encode())
    writer = SegmentWriter(files, DIR, directory, segment_bytes, 1)
    ends = []
    offset = layout.HEADER_BYTES
    lsn = 1
    for recs in frames:
        data = encode_frame(lsn, recs)
        writer.write(data, lsn)
        offset += len(data)
        ends.append(offset)
        lsn += len(recs)
    writer.sync()
    writer.close()
    return writer.name, ends


async def run_sql(durable: Any, sql: str) -> list[Any]:
    """The rows of one dialect statement on a durable store, awaiting its reply when the
    fsync policy makes it wait."""
    out = durable.execute(parse(sql))
    if inspect.isawaitable(out):
        out = await out
    assert isinstance(out, ResultSet)
    return out.rows


def record_segments(files, frames: list[list[Record]], directory: uuid.UUID,
                    segment_bytes: int = 512) -> list[str]:
    """Write ``frames`` as the log would, rotating into new segments when one is full;
    the segments' names, oldest first."""
    files.makedirs(DIR)
    files.put(f"{DIR}/DIRECTORY_ID", f"{directory}\n".encode())
    writer = SegmentWriter(files, DIR, directory, segment_bytes, 1)
    lsn = 1
    for recs in frames:
        writer.write(encode_frame(lsn, recs), lsn)
        lsn += len(recs)
    writer.sync()
    writer.close()
    return [name for name in files.listdir(DIR) if name.startswith("log-")]
