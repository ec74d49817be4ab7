"""bind() and param_slots() (dialect doc §8 rule 5)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import Param, Slot, bind, param_slots, parse
from cubequeue.grammar.binding import _convert, _field_names
from cubequeue.grammar.commands import QueueAck, QueueAdd, QueueGet, QueueRetrieve, QueueToCancel
from cubequeue.grammar.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    ParameterCountMismatch,
    QueueError,
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
        ("QUEUE GET $1", [], ParameterCountMismatch, "0 parameter values given, but the statement requires 1"),
        ("QUEUE GET 1", [1], ParameterCountMismatch, "1 parameter values given, but the statement requires 0"),
        ("QUEUE ADD $1 $2", ["a"], ParameterCountMismatch, "requires 2"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", ["x"], InvalidTextRepresentation, 'invalid input syntax for type bigint: "x"'),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [1.5], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [True], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE GET $1::int8", ["abc"], InvalidTextRepresentation, "invalid input syntax"),
        ("QUEUE RETRIEVE CONCURRENCY $1 'p'", [-1], InvalidParameterValue, "concurrency must be a non-negative integer, actual: -1"),
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


# -- the precomputed bind plan (fast paths) must agree with the general conversion -----

_TEMPLATES = [
    "QUEUE ADD PRIORITY $1 ORPHANED $2 EXTERNAL_ID $3 $4 $5",
    "QUEUE ADD_AND_RETRIEVE PRIORITY $1 $2 $3 $4",
    "QUEUE RETRIEVE EXTENDED CONCURRENCY $1 $2",
    "QUEUE ACK $1 $2",
    "QUEUE ACK $1::int8 $2",
    "QUEUE GET $1::smallint",
    "QUEUE RESULT_BLOCKING $1 $2",
    "QUEUE TO_CANCEL $1 $2 $3",
    "CACHE SET TTL $1 $2 $3",
    "SYS CLOCK ADVANCE $1",
]

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**65),
    st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["0", "7", "007", " 7 ", "+7", "-7", "4294967296", "18446744073709551616",
                     "p:1", "", "²", "١٢"]),
)


def _reference_bind(cmd, values):
    """The general path: dataclasses.replace with every field through ``_convert``."""
    changes = {}
    for name in _field_names(type(cmd)):
        param = getattr(cmd, name)
        if isinstance(param, Param):
            changes[name] = _convert(name, param, values[param.index - 1])
    return dataclasses.replace(cmd, **changes)


def _outcome(fn, cmd, values):
    try:
        return ("ok", fn(cmd, values))
    except QueueError as exc:
        return (type(exc), exc.message)


@settings(deadline=None, max_examples=400)
@given(template=st.sampled_from(_TEMPLATES), values=st.lists(_VALUES, min_size=5, max_size=5))
def test_bind_plan_agrees_with_the_general_conversion(template, values):
    cmd = parse(template)
    values = values[: len(param_slots(cmd))]
    expected = _outcome(_reference_bind, cmd, values)
    assert _outcome(bind, cmd, values) == expected
    assert _outcome(bind, cmd, values) == expected  # the cached plan gives the same


def test_bind_plan_per_template_object():
    # equal but distinct templates, and a template bound after another with its id
    first = parse("QUEUE ACK $1 $2")
    second = QueueAck(key=Param(1, Slot.KEY), result=Param(2, Slot.RESULT))
    assert bind(first, ["p:1", "r"]) == bind(second, ["p:1", "r"]) == QueueAck(key="p:1", result="r")
    other = parse("QUEUE GET $1")
    assert bind(other, [3]) == QueueGet(key=3)
    assert bind(first, [4, None]) == QueueAck(key=4, result=None)


def test_bound_command_is_frozen_and_hashable():
    bound = bind(parse("QUEUE ADD PRIORITY $1 $2 $3"), [1, "p:1", "v"])
    assert bound == QueueAdd(path="p:1", payload="v", priority=1)
    assert hash(bound) == hash(QueueAdd(path="p:1", payload="v", priority=1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        bound.path = "x"  # type: ignore[misc]
