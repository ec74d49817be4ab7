"""Megabyte payloads lex in linear time (a 64 MB '…' string must be practical).

Bounds are generous (a busy 2-core machine); a backtracking regex would take minutes."""

from __future__ import annotations

import time

import pytest

from cubequeue.grammar import parse, split_statements
from cubequeue.grammar.commands import QueueAdd
from cubequeue.grammar.errors import SyntaxError

MB5 = 5 * 1024 * 1024


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("'" + "x" * MB5 + "'", "x" * MB5),
        ("'" + '{\\"a\\": 1}' * (MB5 // 12) + "'", '{"a": 1}' * (MB5 // 12)),
        ("E'" + "y" * MB5 + "'", "y" * MB5),
        ('"' + "z" * MB5 + '"', "z" * MB5),
        ("$$" + "$w" * (MB5 // 2) + "$$", "$w" * (MB5 // 2)),
    ],
    ids=["sq", "sq-escapes", "e", "dq", "dollar"],
)
def test_five_megabyte_payload(literal, value):
    start = time.perf_counter()
    cmd = parse("QUEUE ADD 'p' " + literal)
    assert time.perf_counter() - start < 10
    assert cmd == QueueAdd(path="p", payload=value)


def test_unterminated_five_megabytes_fails_fast():
    start = time.perf_counter()
    with pytest.raises(SyntaxError, match="Unterminated string literal"):
        parse("QUEUE ADD 'p' '" + "x" * MB5)
    assert time.perf_counter() - start < 10


def test_split_five_megabytes():
    start = time.perf_counter()
    assert len(split_statements("CACHE SET k '" + "a;" * (MB5 // 2) + "';CACHE GET k")) == 2
    assert time.perf_counter() - start < 10
