"""COPY's statement reader and its text / CSV row formatting, without a server."""

from __future__ import annotations

import csv
import io
from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue, QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.pgtypes import oids
from cubequeue.server.pgwire.encoder import COPY_DONE, encode_copy_data, encode_copy_out_response
from cubequeue.server.sql.copy import CopyOptions, copy_lines, parse_copy, run_copy
from cubequeue.server.sql.outcome import PlainOutcome

_S, _I, _B, _T = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP


def result(*rows: tuple[object, ...]) -> ResultSet:
    cols = (Column("id", _S), Column("n", _I), Column("ok", _B), Column("at", _T))
    return ResultSet(cols, list(rows))  # type: ignore[arg-type]


OIDS = (oids.TEXT, oids.INT8, oids.BOOL, oids.TIMESTAMPTZ)


@pytest.mark.parametrize(("sql", "query", "opts"), [
    ("COPY (SELECT 1) TO STDOUT", "SELECT 1", CopyOptions()),
    ("copy ( select (1) ) to stdout;", "select (1)", CopyOptions()),
    ("COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER)", "SELECT 1",
     CopyOptions("csv", True, ",", "", '"', '"')),
    ("COPY (SELECT 1) TO STDOUT (FORMAT csv, HEADER false, DELIMITER ';', NULL 'NULL')",
     "SELECT 1", CopyOptions("csv", False, ";", "NULL", '"', '"')),
    ("COPY (SELECT 1) TO STDOUT WITH CSV HEADER", "SELECT 1",
     CopyOptions("csv", True, ",", "", '"', '"')),
    ("COPY (SELECT 1) TO STDOUT DELIMITER AS '|' NULL ''", "SELECT 1",
     CopyOptions("text", False, "|", "", '"', '"')),
])
def test_parse(sql, query, opts):
    request = parse_copy(sql)
    assert (request.query, request.options) == (query, opts)


@pytest.mark.parametrize(("sql", "error"), [
    ("COPY t FROM STDIN", FeatureNotSupported),
    ("COPY (SELECT 1) TO '/tmp/f'", FeatureNotSupported),
    ("COPY (SELECT 1) TO PROGRAM 'cat'", FeatureNotSupported),
    ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", FeatureNotSupported),
    ("COPY (SELECT 1) TO STDOUT (FORMAT xml)", InvalidParameterValue),
    ("COPY (SELECT 1) TO STDOUT (DELIMITER ',,')", InvalidParameterValue),
    ("COPY (SELECT 1) TO STDOUT (QUOTE '''')", FeatureNotSupported),
    ("COPY (SELECT 1) TO STDOUT (FORMAT csv, FORMAT text)", QueueError),
    ("COPY (SELECT 1 TO STDOUT", QueueError),
    ("COPY () TO STDOUT", QueueError),
    ("COPY (SELECT 1) TO STDOUT extra", QueueError),
])
def test_refused(sql, error):
    with pytest.raises(error) as info:
        parse_copy(sql)
    assert info.value.sqlstate in ("0A000", "22023", "42601")


def test_text_format_escapes_and_nulls():
    rs = result(("a\tb", 1, True, 0), ("back\\slash\nnl", None, False, None))
    assert copy_lines(rs, OIDS, CopyOptions(), UTC) == [
        b"a\\tb\t1\tt\t1970-01-01 00:00:00+00\n",
        b"back\\\\slash\\nnl\t\\N\tf\t\\N\n",
    ]


def test_csv_quotes_what_needs_it():
    opts = CopyOptions("csv", True, ",", "", '"', '"')
    rs = result(('say "hi", ok', 1, True, None), ("", 2, False, None))
    assert copy_lines(rs, OIDS, opts, UTC) == [
        b"id,n,ok,at\n", b'"say ""hi"", ok",1,t,\n', b'"",2,f,\n',
    ]


@settings(deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.integers(
    min_value=-(2**63), max_value=2**63 - 1)))))
def test_csv_reads_back_with_the_csv_module(rows):
    rs = ResultSet((Column("a", _S), Column("b", _I)), list(rows))
    opts = CopyOptions("csv", False, ",", "", '"', '"')
    data = b"".join(copy_lines(rs, (oids.TEXT, oids.INT8), opts, UTC)).decode()
    back = list(csv.reader(io.StringIO(data, newline="")))
    # csv cannot tell an unquoted empty field (NULL) from a quoted one (""): compare as text
    assert back == [["" if a is None else a, "" if b is None else str(b)] for a, b in rows]


def _unescape_text(field: str) -> str | None:
    if field == "\\N":
        return None
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\":
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(field[i + 1], field[i + 1]))
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


@settings(deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))))
def test_text_format_reads_back(rows):
    rs = ResultSet((Column("a", _S), Column("b", _S)), list(rows))
    lines = copy_lines(rs, (oids.TEXT, oids.TEXT), CopyOptions(), UTC)
    back = [tuple(_unescape_text(f) for f in line.decode()[:-1].split("\t")) for line in lines]
    assert back == list(rows)


def test_run_copy_counts_rows_not_the_header():
    def select(query: str) -> PlainOutcome:
        assert query == "SELECT id FROM system.queue"
        return PlainOutcome(ResultSet((Column("id", _S),), [("a",), ("b",)]), "SELECT 2",
                            type_oids=(oids.TEXT,))

    out = run_copy("COPY (SELECT id FROM system.queue) TO STDOUT (FORMAT csv, HEADER)", select)
    assert (out.column_count, out.lines, out.tag) == (1, [b"id\n", b"a\n", b"b\n"], "COPY 2")


def test_wire_frames():
    # the layout of "Message Formats" (PostgreSQL 15 docs) for COPY (SELECT 1, 2) TO STDOUT
    assert encode_copy_out_response(0, (0, 0)).hex() == "480000000b000002" + "0000" + "0000"
    assert encode_copy_data(b"1\t2\n").hex() == "6400000008" + "3109320a"
    assert COPY_DONE.hex() == "6300000004"
