"""QUEUE MERGE_EXTRA's JSON rules (dialect doc §3.8).

The first write is stored verbatim; later writes parse both sides, shallow-merge two
objects (the argument's top-level keys win), clear on JSON ``null`` and otherwise replace,
and re-serialize compactly with sorted keys, as serde_json with a BTreeMap does. Invalid
JSON is an internal error (22P02, §8 rule 10) whose message imitates serde_json's
(``expected value at line 1 column 1``).
"""

from __future__ import annotations

import json

from cubequeue.storage.errors import InvalidTextRepresentation

__all__ = ["merge_extra", "parse_json"]

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


def _reject_constant(name: str) -> object:
    # serde_json has no NaN / Infinity literals
    raise ValueError(name)


def parse_json(text: str) -> object:
    """Parse like serde_json, raising :class:`InvalidTextRepresentation` on bad input."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        message = _SERDE_MESSAGES.get(exc.msg, exc.msg)
        if exc.msg == "Expecting value" and not text[exc.pos :].strip():
            message = "EOF while parsing a value"
        raise InvalidTextRepresentation(
            f"{message} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError:
        raise InvalidTextRepresentation("expected value at line 1 column 1") from None


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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
        return _dump({**old_value, **new_value})
    return _dump(new_value)
