"""QUEUE MERGE_EXTRA's JSON rules (``docs/dialect.md`` §3.8).

The first write is stored verbatim; later writes parse both sides, shallow-merge two
objects (the argument's top-level keys win), clear on JSON ``null`` and otherwise replace,
and write the result back as Cube Store does (serde_json with a BTreeMap): compact, object
keys sorted. Cube reads ``extra`` back with ``JSON.parse``, so only that text is
observable, and its numbers are printed as serde_json prints them:

* an integer in u64 range, or a negative one in i64 range, stays an integer; ``-0`` and
  every other integer become floats, as do numbers with a fraction or an exponent;
* a float is printed by ryu (serde_json's printer): the shortest round-trip digits, which
  are ``repr``'s, in ``repr``'s layout except that ``1e-5 <= |x| < 1e-4`` is written out
  in full (``0.00001``) and exponents carry no ``+`` and no padding (``1e16``, ``1e-7``).

A number too large for a float is refused (``number out of range``). Invalid JSON is
22P02; the message names Python's reason and position rather than serde_json's wording.
The first write is validated too (Cube Store parses it), and text nested deeper than
:data:`~cubequeue.storage.limits.MAX_EXTRA_DEPTH` is refused with 54000 before any parser
sees it: Python's recursive decoder and our printer would otherwise raise RecursionError
(an internal error) on every later merge.
"""

from __future__ import annotations

import json
import math
import re

from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.storage.limits import MAX_EXTRA_DEPTH

__all__ = ["check_depth", "dump_json", "format_f64", "merge_extra", "parse_json"]

#: a JSON string (skipped whole, brackets inside it do not nest) or one bracket
_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)


class _OutOfRange(ValueError):
    pass


def _integer(text: str) -> int | float:
    value = int(text)
    if _I64_MIN <= value <= _U64_MAX and not (value == 0 and text.startswith("-")):
        return value
    try:
        return float(value) if value else -0.0
    except OverflowError:
        raise _OutOfRange(text) from None


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _OutOfRange(text)
    return value


def _constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python accepts them, JSON not


def check_depth(text: str, limit: int = MAX_EXTRA_DEPTH) -> None:
    """Refuse ``text`` nested deeper than ``limit`` (54000), in one linear regex scan that
    never recurses; malformed text is left for the parser to name (22P02)."""
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for match in _NESTING.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                raise LimitExceeded(
                    f"JSON nesting depth of extra exceeds the limit of {limit} "
                    f"(MAX_EXTRA_DEPTH={limit})"
                )
        elif token in "]}":
            depth -= 1


def parse_json(text: str) -> object:
    """Parse JSON with serde_json's number kinds, raising 22P02 on bad input."""
    try:
        return json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InvalidTextRepresentation(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except _OutOfRange as exc:
        raise InvalidTextRepresentation(f"invalid JSON: number out of range: {exc}") from None
    except ValueError as exc:  # a constant, or an integer past Python's digit limit
        raise InvalidTextRepresentation(f"invalid JSON: {exc}") from None


def format_f64(x: float) -> str:
    """``x`` as serde_json prints a finite float (see the module docstring)."""
    if not math.isfinite(x):
        raise ValueError(f"serde_json prints no JSON number for {x!r}")
    text = repr(x)
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    power = int(exponent)
    if power == -5:  # ryu: decimal down to 1e-5, repr: scientific below 1e-4
        sign, digits = ("-", mantissa[1:]) if mantissa[0] == "-" else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e{power}"


def dump_json(value: object) -> str:
    """``value`` as ``serde_json::to_string`` writes it: compact, keys sorted (code point
    order, which is UTF-8 byte order), floats by :func:`format_f64`, strings escaped as
    ``json.dumps`` does with ``ensure_ascii=False`` (serde_json's escaping)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: object, out: list[str]) -> None:
    if isinstance(value, float):
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
    else:  # None, booleans, ints and strings print as json.dumps prints them
        out.append(json.dumps(value, ensure_ascii=False))


def merge_extra(old: str | None, new: str) -> str | None:
    """The item's next ``extra`` after MERGE_EXTRA ``new`` on ``old``; raises before any
    change when ``new`` is invalid JSON or too deep (``old`` passed the same checks)."""
    check_depth(new)
    new_value = parse_json(new)
    if old is None:
        return new
    old_value = parse_json(old)
    if new_value is None:
        return None
    if isinstance(old_value, dict) and isinstance(new_value, dict):
        return dump_json({**old_value, **new_value})
    return dump_json(new_value)
