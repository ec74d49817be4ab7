"""Every integer a client writes is range-checked by its digits before ``int()`` reads it.

Python refuses to convert more than 4,300 digits (ValueError, which the wires answered as
XX000) and converts shorter strings in quadratic time; no field needs more than 20 digits
(grammar.lexical.MAX_INT_DIGITS). So a literal or a bound text of any length gets the
field's own 22023, and the plain-SQL checks (server/sql) their 22003 / 42P02.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import bind, prepare
from cubequeue.grammar.errors import InvalidParameterValue, QueueError
from cubequeue.grammar.lexical import (
    INT_RANGES,
    MAX_INT_DIGITS,
    PAST_EVERY_RANGE,
    bounded_int,
    check_int_text,
    shown,
)

#: (statement with ``{n}`` where the number goes, the field's name in the message)
FIELDS = [
    ("QUEUE ADD PRIORITY {n} 'p:k' 'v'", "priority"),
    ("QUEUE ADD ORPHANED {n} 'p:k' 'v'", "orphaned"),
    ("CACHE SET TTL {n} 'k' 'v'", "ttl"),
    ("QUEUE RETRIEVE CONCURRENCY {n} 'p:k'", "concurrency"),
    ("QUEUE RESULT_BLOCKING {n} 'p:k'", "timeout"),
    ("QUEUE TO_CANCEL {n} 1 'p'", "heartbeat timeout"),
    ("QUEUE TO_CANCEL 1 {n} 'p'", "orphaned timeout"),
    ("QUEUE GET {n}", "id"),
    ("QUEUE ACK {n} 'r'", "id"),
    ("SYS CLOCK ADVANCE {n}", "ms"),
]
EDGES = [
    "9" * 5000,
    "-" + "9" * 5000,
    "9" * 34,
    "-" + "9" * 34,
    str(2**63),
    str(2**63 - 1),
    str(-(2**63)),
    str(-(2**63) - 1),
    str(2**64),
    str(2**64 - 1),
    str(2**32),
    str(2**32 - 1),
    "-1",
    "0",
    "0" * 5000 + "7",
    "-" + "0" * 5000 + "7",
    "1" + "0" * 20,
]


def _expected(text: str, field: str) -> int | None:
    """The value when ``text`` fits ``field``, else None (Python's own int, no limit)."""
    digits = text.lstrip("-").lstrip("0")
    if len(digits) > 40:
        return None
    value = int(digits or "0") * (-1 if text.startswith("-") else 1)
    lo, hi = INT_RANGES[field]
    return value if lo <= value <= hi else None


def _outcome(sql: str) -> QueueError | None:
    try:
        prepare(sql)
    except QueueError as err:
        return err
    return None


@pytest.mark.parametrize(("template", "field"), FIELDS)
@pytest.mark.parametrize("text", EDGES, ids=lambda t: t if len(t) < 25 else f"{len(t)}chars")
def test_a_literal_of_any_length_gets_the_fields_own_error(template: str, field: str,
                                                          text: str) -> None:
    err = _outcome(template.format(n=text))
    if _expected(text, field) is not None:
        assert err is None or f"{field} must" not in err.message
        return
    assert isinstance(err, InvalidParameterValue), err
    assert err.sqlstate == "22023"
    assert err.message.startswith(f"{field} must be a"), err.message
    assert len(err.message) < 200  # a 5,000-digit literal is not echoed back whole


@pytest.mark.parametrize(("template", "field"),
                         [(t, f) for t, f in FIELDS if f != "id"])  # a text id is a path
@pytest.mark.parametrize("text", EDGES, ids=lambda t: t if len(t) < 25 else f"{len(t)}chars")
def test_a_bound_text_of_any_length_gets_the_fields_own_error(template: str, field: str,
                                                             text: str) -> None:
    command = prepare(template.format(n="$1")).command
    expected = _expected(text, field)
    if expected is not None:
        bound = bind(command, [f" {text} "])
        assert expected in [getattr(bound, f.name) for f in dataclasses.fields(bound)]
        return
    with pytest.raises(InvalidParameterValue) as err:
        bind(command, [text])
    assert err.value.message.startswith(f"{field} must be a"), err.value.message


@pytest.mark.parametrize("text", EDGES, ids=lambda t: t if len(t) < 25 else f"{len(t)}chars")
def test_a_bound_id_cast_to_bigint(text: str) -> None:
    command = prepare("QUEUE GET $1::bigint").command
    if _expected(text, "id") is not None:
        assert bind(command, [text]).key == _expected(text, "id")  # type: ignore[attr-defined]
        return
    with pytest.raises(InvalidParameterValue, match=r"^id must be a"):
        bind(command, [text])


@settings(deadline=None, max_examples=300)
@given(sign=st.sampled_from(["", "-", "+"]), zeros=st.integers(0, 30),
       digits=st.text("0123456789", min_size=1, max_size=45))
def test_bounded_int_is_int_within_reach_and_past_every_range_beyond(
        sign: str, zeros: int, digits: str) -> None:
    text = sign + "0" * zeros + digits
    value = int(text)
    if len(digits.lstrip("0")) <= MAX_INT_DIGITS:
        assert bounded_int(text) == value
    else:
        assert bounded_int(text) == (-PAST_EVERY_RANGE if sign == "-" else PAST_EVERY_RANGE)
    for lo, hi in INT_RANGES.values():  # the sentinel decides every range as the value
        assert (lo <= bounded_int(text) <= hi) == (lo <= value <= hi)


@settings(deadline=None, max_examples=200)
@given(st.integers(min_value=-(10**60), max_value=10**60),
       st.sampled_from(sorted(INT_RANGES)))
def test_check_int_text_agrees_with_the_range(value: int, field: str) -> None:
    lo, hi = INT_RANGES[field]
    try:
        got = check_int_text(str(value), field)
    except InvalidParameterValue as err:
        assert not lo <= value <= hi
        assert err.message.startswith(f"{field} must be a")
    else:
        assert got == value and lo <= value <= hi


def test_shown_cuts_long_text() -> None:
    assert shown("123") == "123"
    long = shown("9" * 5000)
    assert long.endswith("(5000 characters)") and len(long) < 100
