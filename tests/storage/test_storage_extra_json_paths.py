"""MERGE_EXTRA's two printers and its depth check (``storage/extra_json.py``).

``merge_extra`` prints with ``json.dumps`` unless a float read needs ryu's layout; it must
give the very text of ``reference_merge_extra`` (the tree walk) for every input, errors
included. The depth check is a regex; it must agree with a plain token loop.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_testkit import harness

from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.storage.extra_json import (
    _NumberKinds,
    check_depth,
    dump_json,
    merge_extra,
    parse_json,
    reference_merge_extra,
)
from cubequeue.storage.limits import MAX_EXTRA_DEPTH, Limits

# -- generated JSON texts -------------------------------------------------------------------

_WS = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


def _number_text(sign: str, whole: str, fraction: str | None, exponent: str | None) -> str:
    text = sign + whole
    if fraction is not None:
        text += "." + fraction
    if exponent is not None:
        text += exponent
    return text


_WHOLE = st.one_of(
    st.just("0"),
    st.integers(1, 9).map(str),
    st.from_regex(r"[1-9][0-9]{0,24}", fullmatch=True),
)
_NUMBER = st.one_of(
    st.builds(
        _number_text,
        st.sampled_from(["", "-"]),
        _WHOLE,
        st.none() | st.from_regex(r"0{0,6}[0-9]{1,18}", fullmatch=True),
        st.none() | st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True),
    ),
    st.integers(-(1 << 70), 1 << 70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["-0", "-0.0", "0.0", "1e16", "9999999999999999.5", "0.0001", "1e-5",
                     "18446744073709551615", "18446744073709551616", "-9223372036854775808",
                     "-9223372036854775809", "1E+2", "1e400", "123456789012345678.0"]),
)
_STRING = st.one_of(
    st.text().map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text().map(json.dumps),  # \uXXXX escapes
    st.sampled_from(['"\\u00e9\\n\\t\\/\\"\\\\"', '"1e400"', '"[{"', '"\\ud83d\\ude00"', '"€"']),
)
_SCALAR = st.one_of(_NUMBER, _STRING, st.sampled_from(["true", "false", "null"]))


def _array(items: list[tuple[str, str]]) -> str:
    return "[" + ",".join(ws + item for ws, item in items) + "]"


def _object(pairs: list[tuple[str, str, str]]) -> str:
    return "{" + ",".join(f"{ws}{key}{ws}:{value}" for key, ws, value in pairs) + "}"


_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(st.tuples(_WS, inner), max_size=5).map(_array),
        st.lists(st.tuples(_STRING, _WS, inner), max_size=5).map(_object),
    ),
    max_leaves=20,
)
#: mostly objects (a merge then mixes both sides' keys), sometimes anything
_TEXT = st.one_of(
    st.lists(st.tuples(st.sampled_from(['"a"', '"b"', '"c"', '"é"']), _WS, _VALUE),
             max_size=4).map(_object),
    _VALUE,
    st.sampled_from(["nope", "{", '{"a":', "NaN", "[1,]", '"x'])
)


def _outcome(merge: object, old: str | None, new: str) -> tuple[str, str | None]:
    try:
        return ("ok", merge(old, new))  # type: ignore[operator]
    except (InvalidTextRepresentation, LimitExceeded) as exc:
        return (type(exc).__name__, str(exc))


@settings(deadline=None, max_examples=300)
@given(st.none() | _TEXT, _TEXT)
def test_fast_path_gives_the_reference_text(old: str | None, new: str) -> None:
    if old is not None:
        try:  # an item's stored extra passed the same checks when it was written
            reference_merge_extra(None, old)
        except (InvalidTextRepresentation, LimitExceeded):
            old = None
    assert _outcome(merge_extra, old, new) == _outcome(reference_merge_extra, old, new)


@settings(deadline=None, max_examples=1000)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_float_is_noted_exactly_when_repr_writes_an_exponent(x: float) -> None:
    kinds = _NumberKinds()
    assert kinds.float_(repr(x)) == x
    assert kinds.ryu == ("e" in repr(x))


# -- each rule sends a text to the tree walk, and the walk is needed there ------------------


@pytest.mark.parametrize(
    "text",
    [
        "[1e16]",  # repr 1e+16, ryu 1e16
        "[12345678901234567.0]",  # 17 integer digits: repr switches to an exponent
        "[0.00001]",  # repr 1e-05, ryu 0.00001
        "[1.5e-7]",  # repr 1.5e-07
        "[18446744073709551616]",  # past u64: a float, 1.8446744073709552e19
        "[-9223372036854775809]",  # past i64
        "[2.5E+300]",
    ],
)
def test_each_rule_routes_to_the_tree_walk(text: str) -> None:
    kinds = _NumberKinds()
    value = json.loads(text, parse_int=kinds.integer, parse_float=kinds.float_)
    assert kinds.ryu
    shortcut = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert shortcut != dump_json(value)  # the rule is needed: json.dumps would differ
    assert merge_extra("{}", text) == reference_merge_extra("{}", text) == dump_json(value)


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ('[-0, -0.0, 0.0]', "[-0.0,-0.0,0.0]"),  # -0 is -0.0 either way
        ("[1E+2, 1e2, 0.0001]", "[100.0,100.0,0.0001]"),  # an exponent alone is no reason
        ('["1e400", "0.00001"]', '["1e400","0.00001"]'),  # in strings: no false alarm
        ("[9999999999999998.0, 18446744073709551615]", "[9999999999999998.0,18446744073709551615]"),
        ('{"b": 1, "a": "é\\n"}', '{"a":"é\\n","b":1}'),
    ],
)
def test_plain_numbers_take_json_dumps(text: str, stored: str) -> None:
    kinds = _NumberKinds()
    json.loads(text, parse_int=kinds.integer, parse_float=kinds.float_)
    assert not kinds.ryu
    assert merge_extra("{}", text) == reference_merge_extra("{}", text) == stored


def test_old_text_floats_choose_the_walk_too() -> None:
    stored = merge_extra('{"t": 1e16}', '{"a": 1}')
    assert stored == '{"a":1,"t":1e16}'
    assert merge_extra(stored, '{"b": 2}') == '{"a":1,"b":2,"t":1e16}'


def test_errors_keep_the_reference_wording() -> None:
    for text, message in [("[1, 2e400]", "number out of range: 2e400"),
                          ("[1,]", "Expecting value at line 1 column 4"),
                          ("NaN", "NaN is not JSON")]:
        with pytest.raises(InvalidTextRepresentation) as err:
            merge_extra('{"a": 1}', text)
        assert str(err.value) == f"invalid JSON: {message}"


# -- the depth check ------------------------------------------------------------------------


def _naive_too_deep(text: str, limit: int) -> bool:
    """The check as a token loop: strings skipped to their closing quote (or the end),
    a closer at depth 0 ends the scan (the parser stops there)."""
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            if depth == 0:
                return False
            depth -= 1
        i += 1
    return False


def _too_deep(text: str, limit: int) -> bool:
    try:
        check_depth(text, limit)
    except LimitExceeded as exc:
        assert f"exceeds the limit of {limit} (MAX_EXTRA_DEPTH={limit})" in str(exc)
        return True
    return False


@settings(deadline=None, max_examples=1000)
@given(st.text(alphabet='[]{}"\\ a,\n', max_size=60), st.integers(1, 4))
def test_depth_check_agrees_with_a_token_loop(text: str, limit: int) -> None:
    assert _too_deep(text, limit) == _naive_too_deep(text, limit)


def _text_depth(text: str) -> int:
    """How deep the brackets of a valid JSON text nest (duplicate keys included)."""
    depth = deepest = 0
    for token in re.findall(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


@settings(deadline=None, max_examples=300)
@given(_VALUE, st.integers(1, 4))
def test_valid_json_is_refused_exactly_when_deeper_than_the_limit(text: str, limit: int) -> None:
    try:
        parse_json(text)
    except InvalidTextRepresentation:
        return
    assert _too_deep(text, limit) == (_text_depth(text) > limit)


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("[" * (MAX_EXTRA_DEPTH + 1), "deep"),  # never closed: the parser would recurse
        ("[" * MAX_EXTRA_DEPTH + "{" * 10 + '"', "deep"),
        ("[" * MAX_EXTRA_DEPTH, "22P02"),  # shallow enough: the parser names it
        ("[" * MAX_EXTRA_DEPTH + "]" * MAX_EXTRA_DEPTH + "[" * 100, "deep"),  # extra data too
        ("]" + "[" * 100, "22P02"),  # the parser stops at the first character
        ("[" * 10 + '"\\"' + "[" * 100, "22P02"),  # unterminated string to the end
        ('["' + "[" * 100 + '"]', "ok"),
        ("[" * MAX_EXTRA_DEPTH + "]" * MAX_EXTRA_DEPTH, "ok"),
    ],
)
def test_depth_check_cases(text: str, outcome: str) -> None:
    assert _too_deep(text, MAX_EXTRA_DEPTH) == (outcome == "deep")
    if outcome == "ok":
        assert merge_extra('{"a": 1}', text) == dump_json(parse_json(text))
    else:
        expected = LimitExceeded if outcome == "deep" else InvalidTextRepresentation
        with pytest.raises(expected):
            merge_extra('{"a": 1}', text)


@pytest.mark.timeout(60)
def test_depth_check_is_linear_on_escaped_quotes() -> None:
    """An unterminated string of escaped quotes: a string pattern that can fail is retried
    at every quote (quadratic: the old check took 78 s on 128 KiB; this is 2 MiB)."""
    text = '"' + '\\"' * (1 << 20) + "[" * (MAX_EXTRA_DEPTH + 1)
    check_depth(text)  # one string to the end: nothing nests
    with pytest.raises(InvalidTextRepresentation):
        merge_extra('{"a": 1}', text)
    deep = "[" * (MAX_EXTRA_DEPTH + 1) + '"' + '\\"' * (1 << 20)
    with pytest.raises(LimitExceeded):
        check_depth(deep)


# -- the size cap -----------------------------------------------------------------------------


def test_default_extra_cap_is_64_kib_and_named() -> None:
    h = harness()
    h.add("q:a")
    cap = Limits().max_extra_bytes
    assert cap == 65_536
    text = '{"k": "' + "x" * (cap - 8) + '"}'  # cap + 1 bytes
    with pytest.raises(LimitExceeded) as err:
        h.merge("q:a", text)
    assert str(err.value).endswith(f"exceeds the limit of {cap} bytes (max_extra_bytes={cap})")
    h.merge("q:a", text[:-3] + '"}')
    assert h.get(1) == [("p", text[:-3] + '"}')]


def test_deep_first_write_under_the_cap_names_the_depth_limit() -> None:
    h = harness()
    h.add("q:a")
    deep = "[" * 10_000 + "]" * 10_000  # 20 KB: under the size cap, far too deep
    with pytest.raises(LimitExceeded) as err:
        h.merge("q:a", deep)
    assert f"MAX_EXTRA_DEPTH={MAX_EXTRA_DEPTH}" in str(err.value)
    assert h.get(1) == [("p", None)]
