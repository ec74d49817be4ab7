"""MERGE_EXTRA's merged text (``docs/dialect.md`` §3.8): compact, sorted keys, and numbers
printed as serde_json (default features) prints them, since that text is what Cube reads.

The float layout is ryu's ``format64`` (ryu ``src/pretty/mod.rs``, used by serde_json's
``Formatter::write_f64``): with ``kk`` such that ``10^(kk-1) <= v < 10^kk`` and ``k`` the
exponent of the shortest digits: ``0 <= k && kk <= 16`` → ``1234e7 -> 12340000000.0``;
``0 < kk <= 16`` → ``1234e-2 -> 12.34``; ``-5 < kk <= 0`` → ``1234e-6 -> 0.001234``;
else ``1e30`` / ``1.234e33`` (``-`` sign only, no padding). Zero is ``0.0`` / ``-0.0``.
serde_json's ``parse_number`` keeps u64 and i64 integers as integers and makes ``-0`` and
anything past those ranges a float.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_testkit import harness

from cubequeue.grammar.errors import InvalidTextRepresentation
from cubequeue.storage.extra_json import dump_json, format_f64, merge_extra, parse_json

# -- format_f64: ryu's layout -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (-1.0, "-1.0"),
        (100.0, "100.0"),
        (0.1, "0.1"),
        (0.3, "0.3"),
        (1.5, "1.5"),
        (12.34, "12.34"),
        (2.718281828459045, "2.718281828459045"),
        (1e100, "1e100"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "1e-6"),
        (1e-5, "0.00001"),
        (1.234e-5, "0.00001234"),
        (0.0001, "0.0001"),
        (0.001234, "0.001234"),
        (1e15, "1000000000000000.0"),
        (1.234e15, "1234000000000000.0"),
        (9.0608011534336e15, "9060801153433600.0"),
        (1e16, "1e16"),
        (1.234e16, "1.234e16"),
        (-2.109808898695963e16, "-2.109808898695963e16"),
        (1.2345678901234568e22, "1.2345678901234568e22"),
        (1e21, "1e21"),
        (1.1e128, "1.1e128"),
        (1.1e-64, "1.1e-64"),
        (5e-324, "5e-324"),
        (2.2250738585072014e-308, "2.2250738585072014e-308"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (2.9802322387695312e-8, "2.9802322387695312e-8"),
        (123456.0, "123456.0"),
    ],
)
def test_format_f64_table(value: float, expected: str) -> None:
    assert format_f64(value) == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_format_f64_rejects_non_finite(value: float) -> None:
    with pytest.raises(ValueError):
        format_f64(value)


def _expected_layout(x: float) -> re.Pattern[str]:
    """ryu's layout for ``x``, derived from the decimal value of ``repr(x)``."""
    _sign, digits, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    assert isinstance(exp, int)
    k, length = exp, len(digits)
    kk = length + k
    d = "".join(map(str, digits))
    neg = "-" if str(x).startswith("-") else ""
    if k >= 0 and kk <= 16:
        body = re.escape(d + "0" * k) + r"\.0"
    elif 0 < kk <= 16:
        body = re.escape(d[:kk]) + r"\." + re.escape(d[kk:])
    elif -5 < kk <= 0:
        body = r"0\." + "0" * -kk + re.escape(d)
    else:
        mant = d if length == 1 else d[0] + r"\." + d[1:]
        body = mant + "e" + str(kk - 1)
    return re.compile(re.escape(neg) + body)


@settings(deadline=None, max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_f64_round_trips_with_ryu_layout(x: float) -> None:
    text = format_f64(x)
    back = float(text)
    assert back == x and str(back)[0] == str(x)[0]  # same value, same sign (-0.0)
    if x != 0:
        assert _expected_layout(x).fullmatch(text), (x, text)
    assert "+" not in text and "E" not in text and not re.search(r"e-?0", text)
    assert re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?(e-?[1-9][0-9]*)?", text)
    # never a trailing zero after the point except the single ".0" of integral values
    mantissa = text.split("e")[0]
    assert "e" in text or "." in mantissa
    if "." in mantissa and not mantissa.endswith(".0"):
        assert not mantissa.endswith("0")


# -- parsing: serde_json's integer / float split ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("7", 7),
        ("-1", -1),
        ("18446744073709551615", 18446744073709551615),  # u64::MAX
        ("-9223372036854775808", -9223372036854775808),  # i64::MIN
        ("-0", -0.0),
        ("18446744073709551616", 1.8446744073709552e19),
        ("-9223372036854775809", -9.223372036854776e18),
        ("12345678901234567890123", 1.2345678901234568e22),
        ("1.0", 1.0),
        ("1e2", 100.0),
        ("1E+2", 100.0),
        ("-0.0", -0.0),
        ("1e-400", 0.0),
        ("-1e-400", -0.0),
    ],
)
def test_number_kinds(text: str, expected: float) -> None:
    got = parse_json(text)
    assert type(got) is type(expected)
    assert got == expected and str(got)[0] == str(expected)[0]


@settings(deadline=None)
@given(st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1))
def test_machine_integers_stay_integers(n: int) -> None:
    got = parse_json(str(n))
    assert type(got) is int and got == n
    assert merge_extra("1", f"[{n}]") == f"[{n}]"


@settings(deadline=None)
@given(
    st.one_of(
        st.integers(min_value=1 << 64, max_value=10**30),
        st.integers(min_value=-(10**30), max_value=-(1 << 63) - 1),
    )
)
def test_integers_past_u64_i64_become_floats(n: int) -> None:
    got = parse_json(str(n))
    assert type(got) is float and got == float(n)


# -- merge_extra / dump_json ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "stored"),
    [
        ('{"n": 12345678901234567890123}', '{"n":1.2345678901234568e22,"z":1}'),
        ('{"n": -0}', '{"n":-0.0,"z":1}'),
        ('{"n": 0}', '{"n":0,"z":1}'),
        ('{"n": 1e100}', '{"n":1e100,"z":1}'),
        ('{"n": 1E+100}', '{"n":1e100,"z":1}'),
        ('{"n": 0.1}', '{"n":0.1,"z":1}'),
        ('{"n": 100.0}', '{"n":100.0,"z":1}'),
        ('{"n": 1e2}', '{"n":100.0,"z":1}'),
        ('{"n": 1e-7}', '{"n":1e-7,"z":1}'),
        ('{"n": 0.00001}', '{"n":0.00001,"z":1}'),
        ('{"n": 1e16}', '{"n":1e16,"z":1}'),
        ('{"n": [1.5, -2, 18446744073709551615]}', '{"n":[1.5,-2,18446744073709551615],"z":1}'),
        ('{"n": {"b": -0.0, "a": 2.50}}', '{"n":{"a":2.5,"b":-0.0},"z":1}'),
    ],
)
def test_merge_reserializes_numbers_like_serde(new: str, stored: str) -> None:
    assert merge_extra('{"z": 1}', new) == stored


def test_merge_non_object_number_replaces() -> None:
    assert merge_extra('{"a": 1}', "-0") == "-0.0"
    assert merge_extra('{"a": 1}', "1e21") == "1e21"


def test_old_extra_is_reserialized_too() -> None:
    assert merge_extra('{"a": 1.0, "b": 1E3}', '{"c": 3}') == '{"a":1.0,"b":1000.0,"c":3}'


def test_first_write_still_verbatim() -> None:
    assert merge_extra(None, '{"n": -0, "m": 1e+100}') == '{"n": -0, "m": 1e+100}'


def test_store_level_merge_uses_serde_numbers() -> None:
    h = harness()
    h.add("q:a")
    h.merge("q:a", '{"a": 1}')
    h.merge("q:a", '{"big": 12345678901234567890123, "neg": -0, "f": 1e100}')
    assert h.get(1) == [("p", '{"a":1,"big":1.2345678901234568e22,"f":1e100,"neg":-0.0}')]


@pytest.mark.parametrize(
    "new",
    ["1e400", '{"a": [1, 2e400]}', '{"a":\n 1e309}', '{"x": "1e400", "y": -1e400}',
     "1e99999999999", "[1e400, nope]", "123" + "0" * 400],
)
def test_out_of_range_is_22p02(new: str) -> None:
    with pytest.raises(InvalidTextRepresentation) as err:
        merge_extra('{"a": 1}', new)
    assert err.value.sqlstate == "22P02"
    assert "number out of range" in str(err.value)


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ("[nope, 1e400]", "invalid JSON: Expecting value at line 1 column 2"),
        ('{"a":\n x}', "invalid JSON: Expecting value at line 2 column 2"),
        ("Infinity", "invalid JSON: Infinity is not JSON"),
        ("9" * 5000, "invalid JSON: "),
    ],
)
def test_invalid_json_is_22p02_naming_the_place(new: str, message: str) -> None:
    with pytest.raises(InvalidTextRepresentation) as err:
        merge_extra('{"a": 1}', new)
    assert err.value.sqlstate == "22P02"
    assert str(err.value).startswith(message)


_JSON_NO_FLOATS = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(deadline=None)
@given(_JSON_NO_FLOATS)
def test_dump_json_matches_compact_sorted_json_without_floats(value: object) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert dump_json(value) == expected
