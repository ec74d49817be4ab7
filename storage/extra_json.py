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

Two printers give the same text. The reference one is a Python tree walk that prints
every float with :func:`format_f64`: slow per MiB of strings and slower per MiB of
numbers (bench/RESULTS-notes.md), all of it on the event loop. ``json.dumps`` (compact, sorted, no ASCII escaping)
prints the same text at C speed unless a float would print with an exponent, the only
place where ``repr``'s layout (``json.dumps`` prints floats by ``repr``) and ryu's differ.
The parse callbacks already see every number, so they note such a float
(:attr:`_NumberKinds.ryu`: ``|x| >= 1e16`` or ``0 < |x| < 1e-4``, integers past u64/i64
included) and only then is the tree walk used. The choice is exact: no false alarm from a
string that merely looks like a number, and the callbacks cost little over
``json.loads`` itself.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache

from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.storage.limits import MAX_EXTRA_DEPTH

__all__ = [
    "check_depth",
    "dump_json",
    "format_f64",
    "merge_extra",
    "parse_json",
    "reference_merge_extra",
]

#: a JSON string. For every string JSON accepts it spans exactly what the parser reads
#: (escapes are a backslash and one character; ``\uXXXX`` is ``\u`` and four plain ones);
#: past the parser's first error nothing matters, since the parser reads no further
_STRING = r'"[^"\\]*+(?:\\[\s\S][^"\\]*+)*+"'
#: anything but a bracket, strings whole (brackets inside them do not nest)
_FILL = rf'(?:[^\[\]{{}}"]++|{_STRING})*+'

_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
#: ``repr`` prints a nonzero float with an exponent exactly outside [1e-4, 1e16)
_REPR_FIXED_MIN = 1e-4
_REPR_FIXED_MAX = 1e16


class _OutOfRange(ValueError):
    pass


class _NumberKinds:
    """``json.loads`` callbacks giving serde_json's number kinds, noting whether a float
    was read that ``json.dumps`` would print unlike serde_json (:attr:`ryu`)."""

    __slots__ = ("ryu",)

    def __init__(self) -> None:
        self.ryu = False

    def integer(self, text: str) -> int | float:
        value = int(text)
        if _I64_MIN <= value <= _U64_MAX and not (value == 0 and text.startswith("-")):
            return value
        if not value:
            return -0.0  # "-0": repr and ryu both print -0.0
        self.ryu = True  # |value| >= 2^63: an exponent either way, in two layouts
        try:
            return float(value)
        except OverflowError:
            raise _OutOfRange(text) from None

    def float_(self, text: str) -> float:
        value = float(text)
        if not _REPR_FIXED_MIN <= abs(value) < _REPR_FIXED_MAX:
            if math.isinf(value):
                raise _OutOfRange(text)
            if value:
                self.ryu = True
        return value


def _constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python accepts them, JSON not


@cache
def _nesting(limit: int) -> re.Pattern[str]:
    """Text whose brackets nest at most ``limit`` deep: ``limit`` levels of groups, every
    loop possessive and every branch decided by its first character, so matching is
    linear and never backtracks."""
    group = rf"[\[{{]{_FILL}[\]}}]"
    for _ in range(limit - 1):
        group = rf"[\[{{]{_FILL}(?:{group}{_FILL})*+[\]}}]"
    return re.compile(rf"{_FILL}(?:{group}{_FILL})*+")


_nesting(MAX_EXTRA_DEPTH)  # compiled at import (it takes a while), not on the first merge's step


def _matched(pattern: re.Pattern[str], text: str) -> int:
    match = pattern.match(text)
    assert match is not None  # (?:…)*+ matches the empty string
    return match.end()


def check_depth(text: str, limit: int = MAX_EXTRA_DEPTH) -> None:
    """Refuse ``text`` nested deeper than ``limit`` (54000), in at most three linear regex
    passes that never recurse; malformed text is left for the parser to name (22P02).

    The text is matched by :func:`_nesting` from its start (``match``, never a search,
    so a string is never rescanned from a later quote: the old ``finditer`` scan was
    quadratic on an unterminated string of escaped quotes, 78 s for 128 KiB). The match
    stops at the end, at a stray closer or an unterminated string (the parser stops
    there too), or at an opening bracket whose group is too deep or still open at the end
    of the text. Closing it tells which: ``limit`` closers appended, or a character and a
    quote first, for a text that ends inside a string (perhaps after a backslash)."""
    if text.count("[") + text.count("{") <= limit:
        return
    nesting = _nesting(limit)
    stop = _matched(nesting, text)
    if stop == len(text) or text[stop] not in "[{":
        return
    rest, closers = text[stop:], "]" * limit
    if _closes(nesting, rest + closers) or _closes(nesting, rest + ' "' + closers):
        return
    raise LimitExceeded(
        f"JSON nesting depth of extra exceeds the limit of {limit} (MAX_EXTRA_DEPTH={limit})"
    )


def _closes(nesting: re.Pattern[str], text: str) -> bool:
    stop = _matched(nesting, text)
    return stop == len(text) or text[stop] in "]}"


def parse_json(text: str) -> object:
    """Parse JSON with serde_json's number kinds, raising 22P02 on bad input."""
    return _parse(text, _NumberKinds())


def _parse(text: str, kinds: _NumberKinds) -> object:
    try:
        return json.loads(
            text, parse_int=kinds.integer, parse_float=kinds.float_, parse_constant=_constant
        )
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
    change when ``new`` is invalid JSON or too deep (``old`` passed the same checks).

    The text of :func:`reference_merge_extra`, printed by ``json.dumps`` when no float
    read needs ryu's layout (see the module docstring)."""
    check_depth(new)
    kinds = _NumberKinds()
    new_value = _parse(new, kinds)
    if old is None:
        return new
    old_value = _parse(old, kinds)
    if new_value is None:
        return None
    if isinstance(old_value, dict) and isinstance(new_value, dict):
        new_value = {**old_value, **new_value}
    if kinds.ryu:
        return dump_json(new_value)
    return json.dumps(new_value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def reference_merge_extra(old: str | None, new: str) -> str | None:
    """:func:`merge_extra` printed by the tree walk always: the definition that the
    ``json.dumps`` shortcut is tested against."""
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
