"""``json`` and ``jsonb`` values in plain SQL, with the standard ``json`` module.

A value is its JSON text (a ``str``), as PostgreSQL keeps ``json``: a ``::json`` cast
checks the text and keeps it as written; a ``::jsonb`` cast keeps PostgreSQL's normal form
(``{"a": 1, "bb": [1, 2]}``: keys shortest first then by their bytes, the last of a
duplicate key kept, numbers as ``numeric`` prints them). ``->`` gives a member's JSON
(for ``json``, the member's text as written), ``->>`` its text (a string unquoted, JSON
null as SQL NULL), as PostgreSQL's ``json_object_field`` / ``json_array_element`` do.

Bounds: a value is a stored payload, so at most ``--max-payload-bytes``; each operation is
one pass of the C decoder over it (linear), and nesting deeper than the decoder's recursion
limit is refused as PostgreSQL refuses it (54001), not raised as a Python error. Numbers
are kept as their text (never ``int()`` of a 5,000-digit literal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from cubequeue.grammar.errors import InvalidTextRepresentation, QueueError

__all__ = ["JsonDepth", "check_json", "member", "to_jsonb"]

_BLANK: Final = re.compile(r"[ \t\n\r]*")


class JsonDepth(QueueError, sqlstate="54001"):
    """A JSON value nested deeper than the decoder goes (PostgreSQL: stack depth)."""


class _Number(str):
    """A JSON number, kept as the text it was written as."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"Token \"{name}\" is invalid.")


def _decoder(pairs: Callable[[list[tuple[str, Any]]], Any] | None) -> json.JSONDecoder:
    return json.JSONDecoder(parse_float=_Number, parse_int=_Number,
                            parse_constant=_no_constant, object_pairs_hook=pairs)


_KEEP: Final = _decoder(None)
_PAIRS: Final = _decoder(list)


def _invalid(exc: Exception) -> InvalidTextRepresentation:
    detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
    return InvalidTextRepresentation("invalid input syntax for type json", detail=detail)


def _decode(decoder: json.JSONDecoder, text: str) -> Any:
    try:
        return decoder.decode(text)
    except RecursionError:
        raise JsonDepth("stack depth limit exceeded",
                        hint="The JSON value is nested too deeply to be read.") from None
    except ValueError as exc:
        raise _invalid(exc) from None


def check_json(text: str) -> str:
    """``text::json``: the same text, once it is known to be JSON (22P02 otherwise)."""
    _decode(_KEEP, text)
    return text


def _numeric(text: str) -> str:
    """A JSON number as ``numeric`` prints it (``1e2`` is ``100``, ``1.50`` stays)."""
    try:
        d = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the decoder checked the syntax
        return text
    out = format(d, "f")
    return out[1:] if d == 0 and out.startswith("-") else out


def _key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode("utf-8", "surrogatepass")
    return len(raw), raw


class _Raw(str):
    """Text :func:`_jsonb` emits as it is (punctuation, keys)."""


def _scalar(value: Any) -> str:
    if isinstance(value, _Number):
        return _numeric(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    return "true" if value is True else "false"


def _jsonb(root: Any) -> str:
    """PostgreSQL's jsonb text of a decoded value; iterative, so a value the decoder
    could nest is never too deep to print."""
    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item)
        elif isinstance(item, _Object):
            members = dict(item.pairs)  # the last of a duplicate key wins
            todo: list[Any] = [_Raw("{")]
            for i, key in enumerate(sorted(members, key=_key_order)):
                todo.append(_Raw((", " if i else "") + json.dumps(key, ensure_ascii=False)
                                 + ": "))
                todo.append(members[key])
            todo.append(_Raw("}"))
            stack.extend(reversed(todo))
        elif isinstance(item, list):
            todo = [_Raw("[")]
            for i, element in enumerate(item):
                if i:
                    todo.append(_Raw(", "))
                todo.append(element)
            todo.append(_Raw("]"))
            stack.extend(reversed(todo))
        else:
            out.append(_scalar(item))
    return "".join(out)


class _Object:
    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


_OBJECTS: Final = _decoder(_Object)


def to_jsonb(text: str) -> str:
    """``text::jsonb``: PostgreSQL's normal form of the JSON ``text``."""
    return _jsonb(_decode(_OBJECTS, text))


def _skip(text: str, pos: int) -> int:
    m = _BLANK.match(text, pos)
    return m.end() if m else pos


def _raw(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _OBJECTS.raw_decode(text, pos)
    except RecursionError:
        raise JsonDepth("stack depth limit exceeded") from None
    except ValueError as exc:  # pragma: no cover - checked when it became json
        raise _invalid(exc) from None


def _slices(text: str) -> tuple[str, list[tuple[str | None, int, int]]]:
    """The top-level container of ``text`` ("{" or "[") and its members' (key, start,
    end) in the text; ``("", [])`` for a scalar."""
    pos = _skip(text, 0)
    opener = text[pos : pos + 1]
    if opener not in ("{", "["):
        return "", []
    out: list[tuple[str | None, int, int]] = []
    pos = _skip(text, pos + 1)
    closer = "}" if opener == "{" else "]"
    while pos < len(text) and text[pos] != closer:
        key: str | None = None
        if opener == "{":
            key, pos = _raw(text, pos)
            pos = _skip(text, pos) + 1  # the ':'
            pos = _skip(text, pos)
        _value, end = _raw(text, pos)
        out.append((key, pos, end))
        pos = _skip(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
    return opener, out


def _text_of(json_text: str) -> str | None:
    """``->>``'s text of one member's JSON: a string unquoted, null as NULL."""
    value, _end = _raw(json_text, 0)
    if value is None:
        return None
    if isinstance(value, str) and not isinstance(value, _Number):
        return value
    return json_text


def member(text: str, key: str | int, as_text: bool) -> str | None:
    """``text -> key`` (``as_text`` False) or ``text ->> key``: the member named ``key``
    of an object, or element ``key`` of an array (negative counts from the end); NULL
    when there is none or the container is of the other kind. ``text`` is a ``json``
    value or a ``jsonb`` one (already in normal form, so its slices are too)."""
    opener, members = _slices(text)
    found: str | None = None
    if opener == "{" and isinstance(key, str):
        for name, start, end in members:
            if name == key:
                found = text[start:end]  # the last of a duplicate key, as PostgreSQL
    elif opener == "[" and isinstance(key, int):
        index = key + len(members) if key < 0 else key
        if 0 <= index < len(members):
            _name, start, end = members[index]
            found = text[start:end]
    if found is None:
        return None
    return _text_of(found) if as_text else found
