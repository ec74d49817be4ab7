"""bind() and param_slots() (INTERFACES.md "grammar API", dialect doc §8 rule 5)."""

from __future__ import annotations

import pytest

from cubequeue.grammar import Param, Slot, bind, param_slots, parse
from cubequeue.grammar.commands import QueueAck, QueueAdd, QueueGet, QueueRetrieve, QueueToCancel
from cubequeue.storage.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    ProtocolViolation,
)


def test_param_slots_ordered_by_index_and_deduplicated():
    cmd = parse("QUEUE ADD PRIORITY $2 $1 $1")
    assert param_slots(cmd) == [Param(1, Slot.TEXT), Param(2, Slot.INT8)]
    assert param_slots(parse("QUEUE GET 1")) == []


def test_bind_equals_literal_text():
    cmd = parse("QUEUE ADD PRIORITY ? ORPHANED ? EXTERNAL_ID ? ? ?")
    bound = bind(cmd, [-5, "60", "ext", "p:1", '{"a":1}'])
    assert bound == parse("QUEUE ADD PRIORITY -5 ORPHANED 60 EXTERNAL_ID 'ext' 'p:1' '{\"a\":1}'")


@pytest.mark.parametrize(
    ("sql", "value", "expected"),
    [
        ("QUEUE GET $1", 5, QueueGet(key=5)),  # int (int2/int4/int8 declared) → id
        ("QUEUE GET $1", "5", QueueGet(key="5")),  # text → path, even all digits
        ("QUEUE GET $1::int8", "5", QueueGet(key=5)),
        ("QUEUE GET $1::bigint", "5", QueueGet(key=5)),
        ("QUEUE GET $1::int", " 7 ", QueueGet(key=7)),
        ("QUEUE GET $1::smallint", 3, QueueGet(key=3)),
        ("QUEUE GET $1::text", "p:1", QueueGet(key="p:1")),
    ],
)
def test_key_slot(sql, value, expected):
    assert bind(parse(sql), [value]) == expected


def test_int2_declared_int_is_an_id():
    # the server decodes an int2/int4/int8 parameter to a Python int
    assert bind(parse("QUEUE ACK $1 $2"), [7, "r"]) == QueueAck(key=7, result="r")


def test_null_result_means_no_result():
    assert bind(parse("QUEUE ACK $1 $2"), ["p:1", None]) == QueueAck(key="p:1", result=None)


def test_text_slot_takes_numbers_as_text():
    assert bind(parse("QUEUE ADD $1 $2"), ["p", 12]) == QueueAdd(path="p", payload="12")
    assert bind(parse("QUEUE ADD $1 $2"), ["p", True]) == QueueAdd(path="p", payload="true")


def test_int_slot_from_text():
    assert bind(parse("QUEUE RETRIEVE CONCURRENCY $1 $2"), ["3", "p"]) == QueueRetrieve(path="p", concurrency=3)
    assert bind(parse("QUEUE RETRIEVE CONCURRENCY $1 $2"), [3.0, "p"]) == QueueRetrieve(path="p", concurrency=3)


@pytest.mark.parametrize(
    ("sql", "values", "kind", "message"),
    [
        ("QUEUE GET $1", [], ProtocolViolation, 'bind message supplies 0 parameters, but prepared statement "" requires 1'),
        ("QUEUE GET 1", [1], ProtocolViolation, "supplies 1 parameters, but prepared statement \"\" requires 0"),
        ("QUEUE ADD $1 $2", ["a"], ProtocolViolation, "requires 2"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", ["x"], InvalidTextRepresentation, 'invalid input syntax for type bigint: "x"'),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [1.5], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [True], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE GET $1::int8", ["abc"], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [-1], InvalidParameterValue, "concurrency must be a positive integer, actual: -1"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [2**32], InvalidParameterValue, "concurrency must be a valid integer, error: number too large"),
        ("QUEUE ADD PRIORITY $1 'p' 'v'", [-(2**63) - 1], InvalidParameterValue, "number too small"),
        ("QUEUE GET $1", [-5], InvalidParameterValue, "id must be a positive integer, actual: -5"),
        ("QUEUE ADD $1 $2", ["p", None], InvalidParameterValue, "null value"),
        ("QUEUE GET $1", [None], InvalidParameterValue, "null value"),
        ("QUEUE STALLED $1 'p'", [None], InvalidParameterValue, "null value"),
    ],
)
def test_bind_errors(sql, values, kind, message):
    with pytest.raises(kind) as info:
        bind(parse(sql), values)
    assert message in info.value.message


def test_same_index_in_two_slots():
    assert bind(parse("QUEUE ACK $1 $1"), ["p"]) == QueueAck(key="p", result="p")


def test_to_cancel_names_in_range_errors():
    cmd = parse("QUEUE TO_CANCEL $1 $2 $3")
    assert bind(cmd, [1, 2, "p"]) == QueueToCancel(prefix="p", heartbeat_timeout=1, orphaned_timeout=2)
    with pytest.raises(InvalidParameterValue, match="orphaned timeout must be"):
        bind(cmd, [1, -2, "p"])


def test_bind_without_params_returns_the_command():
    cmd = parse("QUEUE TRUNCATE")
    assert bind(cmd, []) is cmd
