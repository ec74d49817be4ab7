"""QUEUE MERGE_EXTRA's JSON rules (dialect doc §3.8).

The first write is stored verbatim; later writes parse both sides, shallow-merge two
objects (the argument's top-level keys win), clear on JSON ``null`` and otherwise replace,
and re-serialize compactly with sorted keys, as serde_json with a BTreeMap does. Invalid
JSON is an internal error (22P02, §8 rule 10) whose message imitates serde_json's
(``expected value at line 1 column 1``).

Numbers follow serde_json built with default features (no ``arbitrary_precision``, no
``float_roundtrip``), because the re-serialized text is observable:

* parsing (serde_json ``src/de.rs`` ``parse_integer`` / ``parse_number`` /
  ``f64_from_parts``): an integer in u64 range, or a negative one in i64 range, stays an
  integer; ``-0``, any other integer, and every number with a fraction or exponent become
  an f64, computed as "first 19-20 significant digits as u64, times or divided by a power
  of ten" (not always correctly rounded; reproduced exactly here). A result that
  overflows is the error ``number out of range``;
* printing (serde_json ``src/ser.rs`` ``write_f64`` → ``ryu::Buffer::format_finite``,
  ryu ``src/pretty/mod.rs`` ``format64``): see :func:`format_f64`.
"""

from __future__ import annotations

import json
import math
import re

from cubequeue.grammar.errors import InvalidTextRepresentation

__all__ = [
    "NumberOutOfRange",
    "dump_json",
    "format_f64",
    "merge_extra",
    "parse_json",
    "serde_number",
]

#: Python's json messages → serde_json's wording (serde_json/src/error.rs)
_SERDE_MESSAGES = {
    "Expecting value": "expected value",
    "Extra data": "trailing characters",
    "Expecting property name enclosed in double quotes": "key must be a string",
    "Expecting ':' delimiter": "expected `:`",
    "Expecting ',' delimiter": "expected `,` or `}`",
    "Unterminated string starting at": "EOF while parsing a string",
    "Invalid control character at": "control character (\\u0000-\\u001F) found while parsing a string",
    "Invalid \\escape": "invalid escape",
    "Invalid \\uXXXX escape": "invalid escape",
}

_DIGITS = frozenset("0123456789")  # ASCII only, as the json scanner and serde_json
_U64_MAX = (1 << 64) - 1
_I32_MAX = (1 << 31) - 1
_I32_MIN = -(1 << 31)
#: serde_json's POW10 table: the f64 literals 1e0 … 1e308 (nearest doubles)
_POW10 = tuple(float(f"1e{i}") for i in range(309))
#: a string or a number token; only used on text the json scanner already accepted
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')


class NumberOutOfRange(Exception):
    """serde_json's ``NumberOutOfRange``. ``consumed`` = characters of the literal read
    when serde_json gave up (its error position); ``ordinal`` = which number literal of
    the document (0-based, text order), filled in by :func:`parse_json`."""

    def __init__(self, consumed: int) -> None:
        super().__init__(consumed)
        self.consumed = consumed
        self.ordinal = 0


def _overflows(acc: int, digit: int, limit: int) -> bool:
    # serde_json's overflow! macro: acc * 10 + digit > limit
    return acc >= limit // 10 and (acc > limit // 10 or digit > limit % 10)


def _f64_from_parts(positive: bool, significand: int, exponent: int, consumed: int) -> float:
    # de.rs f64_from_parts, cfg(not(feature = "float_roundtrip"))
    f = float(significand)  # u64 as f64: round to nearest even, like Python
    while True:
        if abs(exponent) <= 308:
            pow10 = _POW10[abs(exponent)]
            if exponent >= 0:
                f *= pow10
                if math.isinf(f):
                    raise NumberOutOfRange(consumed)
            else:
                f /= pow10
            break
        if f == 0.0:
            break
        if exponent >= 0:
            raise NumberOutOfRange(consumed)
        f /= 1e308
        exponent += 308
    return f if positive else -f


def _parse_exponent(text: str, i: int, positive: bool, significand: int, start: int) -> float:
    # de.rs parse_exponent: text[i] is 'e' or 'E'
    i += 1
    positive_exp = True
    if text[i] in "+-":
        positive_exp = text[i] == "+"
        i += 1
    exp = 0
    while i < len(text):
        digit = ord(text[i]) - 48
        i += 1
        if _overflows(exp, digit, _I32_MAX):
            # parse_exponent_overflow: error instead of infinity, else a signed zero
            if significand != 0 and positive_exp:
                raise NumberOutOfRange(i)
            return 0.0 if positive else -0.0
        exp = exp * 10 + digit
    final = start + exp if positive_exp else start - exp
    final = max(_I32_MIN, min(_I32_MAX, final))  # i32 saturating_add / saturating_sub
    return _f64_from_parts(positive, significand, final, len(text))


def serde_number(text: str) -> int | float:
    """The value serde_json (default features) gives a JSON number literal: ``int`` for
    its U64 / I64 cases, ``float`` for F64. Raises :class:`NumberOutOfRange` where
    serde_json fails with ``number out of range``. ``text`` must match JSON's number
    grammar (``json``'s scanner has checked it)."""
    positive = not text.startswith("-")
    i = 0 if positive else 1
    n = len(text)
    significand = 0
    exponent = 0
    # parse_integer: digits before '.', kept as u64 until the next one would overflow
    while i < n and text[i] in _DIGITS:
        digit = ord(text[i]) - 48
        if _overflows(significand, digit, _U64_MAX):
            break
        significand = significand * 10 + digit
        i += 1
    if i < n and text[i] in _DIGITS:
        # parse_long_integer: further integer digits only scale by ten
        while i < n and text[i] in _DIGITS:
            exponent += 1
            i += 1
    elif i == n:
        # parse_number: a plain integer
        if positive:
            return significand
        if significand == 0 or significand > 1 << 63:
            return -float(significand)  # "Convert into a float if we underflow, or on -0"
        return -significand
    if i < n and text[i] == ".":
        # parse_decimal; on u64 overflow (parse_decimal_overflow) later digits are dropped
        i += 1
        while i < n and text[i] in _DIGITS:
            digit = ord(text[i]) - 48
            if _overflows(significand, digit, _U64_MAX):
                while i < n and text[i] in _DIGITS:
                    i += 1
                break
            significand = significand * 10 + digit
            exponent -= 1
            i += 1
    if i < n:
        return _parse_exponent(text, i, positive, significand, exponent)
    return _f64_from_parts(positive, significand, exponent, n)


def format_f64(x: float) -> str:
    """``x`` as serde_json prints a finite f64 (ryu ``format64``).

    Shortest round-trip digits (``repr`` gives the same digits as ryu), laid out with
    ``kk`` = decimal exponent such that ``10**(kk-1) <= |x| < 10**kk``:
    ``0 <= k and kk <= 16`` → integer digits plus ``.0`` (``100.0``, ``1e15`` →
    ``1000000000000000.0``); ``0 < kk <= 16`` → plain decimal (``12.34``);
    ``-5 < kk <= 0`` → ``0.000ddd`` (``0.0001``); otherwise scientific with a lowercase
    ``e``, no ``+`` and no exponent padding (``1e16``, ``1.5e-7``, ``1e100``). Zero is
    ``0.0`` / ``-0.0``.
    """
    if not math.isfinite(x):
        raise ValueError(f"serde_json prints no JSON number for {x!r}")
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    k = int(exp_text or "0") - len(frac_part)
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    length = len(digits)
    kk = length + k
    if k >= 0 and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def _reject_constant(name: str) -> object:
    # serde_json has no NaN / Infinity literals
    raise ValueError(name)


def _out_of_range_message(text: str, ordinal: int, consumed: int) -> str:
    """serde_json's ``number out of range at line L column C``: C is the column of the
    last character read, found by locating the ``ordinal``-th number token."""
    numbers = (m for m in _TOKEN.finditer(text) if not m.group().startswith('"'))
    pos = 0
    for index, match in enumerate(numbers):
        if index == ordinal:
            pos = match.start() + consumed
            break
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1)
    return f"number out of range at line {line} column {column}"


def parse_json(text: str) -> object:
    """Parse like serde_json, raising :class:`InvalidTextRepresentation` on bad input."""
    seen = 0

    def number(literal: str) -> int | float:
        nonlocal seen
        try:
            return serde_number(literal)
        except NumberOutOfRange as exc:
            exc.ordinal = seen
            raise
        finally:
            seen += 1

    try:
        return json.loads(
            text, parse_constant=_reject_constant, parse_int=number, parse_float=number
        )
    except json.JSONDecodeError as exc:
        message = _SERDE_MESSAGES.get(exc.msg, exc.msg)
        if exc.msg == "Expecting value" and not text[exc.pos :].strip():
            message = "EOF while parsing a value"
        raise InvalidTextRepresentation(
            f"{message} at line {exc.lineno} column {exc.colno}"
        ) from None
    except NumberOutOfRange as exc:
        message = _out_of_range_message(text, exc.ordinal, exc.consumed)
        raise InvalidTextRepresentation(message) from None
    except ValueError:
        raise InvalidTextRepresentation("expected value at line 1 column 1") from None


def dump_json(value: object) -> str:
    """``value`` as ``serde_json::to_string`` writes a ``Value``: compact, object keys in
    BTreeMap order (code point order = UTF-8 byte order), ints as decimal, floats via
    :func:`format_f64`; strings escaped as json.dumps does with ``ensure_ascii=False``
    (``\\"``, ``\\\\``, ``\\b\\f\\n\\r\\t``, other controls as lowercase
    ``\\u00xx``), which is serde_json's escaping."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_f64(value))
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for index, key in enumerate(sorted(value)):
            if index:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def merge_extra(old: str | None, new: str) -> str | None:
    """The item's next ``extra`` after MERGE_EXTRA ``new`` on ``old``; raises before any
    change when either side is invalid JSON."""
    if old is None:
        return new
    old_value = parse_json(old)
    new_value = parse_json(new)
    if new_value is None:
        return None
    if isinstance(old_value, dict) and isinstance(new_value, dict):
        return dump_json({**old_value, **new_value})
    return dump_json(new_value)
