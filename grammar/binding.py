"""Placeholders: which a command has (:func:`param_slots`) and filling them (:func:`bind`).

Binding yields exactly the command the literal text would have produced
(``cubestore-dialect.md`` §8 rule 5), including the same range errors:

* KEY slot: ``int`` → numeric id; ``str`` → path, unless the placeholder carries an integer
  cast (``$1::int8``), in which case the text must be an integer id. A client that declared
  an integer type (int2/int4/int8) sends a decoded ``int`` and so gets an id.
* INT8 slot: ``int``, or ``str``/integral ``float`` converted (else 22P02).
* TEXT slot: ``str``; an ``int`` or ``float`` becomes its decimal text, a ``bool`` ``true``
  or ``false``.
* RESULT slot (ACK): like TEXT, and ``None`` means "no result", as the keyword NULL.
* ``None`` anywhere else is 22023; a wrong number of values is 08P01 with PostgreSQL's
  wording.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.grammar.lexical import check_int
from cubequeue.storage.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    ProtocolViolation,
)

__all__ = ["INTEGER_CASTS", "BindValue", "bind", "param_slots"]

BindValue = int | str | bool | float | None

#: casts that make a key placeholder a numeric id (§8 rule 5)
INTEGER_CASTS = frozenset(("int8", "bigint", "int", "int4", "integer", "int2", "smallint"))

#: the §1.3 integer name of each integer-valued field, for range errors after binding
_INT_FIELD_NAMES = {
    "priority": "priority",
    "orphaned": "orphaned",
    "concurrency": "concurrency",
    "heartbeat_timeout": "heartbeat timeout",
    "orphaned_timeout": "orphaned timeout",
    "timeout": "timeout",
    "ttl": "ttl",
    "ms": "ms",
    "key": "id",
}

_INT_TEXT = re.compile(r"[ \t\r\n]*([-+]?[0-9]+)[ \t\r\n]*")


_FIELD_NAMES: dict[type[Command], tuple[str, ...]] = {}


def _field_names(cls: type[Command]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _params(cmd: Command) -> list[tuple[str, Param]]:
    return [
        (name, value)
        for name in _field_names(type(cmd))
        if isinstance(value := getattr(cmd, name), Param)
    ]


def param_slots(cmd: Command) -> list[Param]:
    """The command's placeholders, one per index, ordered by index (1..n)."""
    by_index: dict[int, Param] = {}
    for _, param in _params(cmd):
        by_index.setdefault(param.index, param)
    return [by_index[i] for i in sorted(by_index)]


def bind(cmd: Command, values: Sequence[BindValue]) -> Command:
    """``cmd`` with every placeholder replaced by its value (see the module docstring)."""
    params = _params(cmd)
    required = max((p.index for _, p in params), default=0)
    if len(values) != required:
        raise ProtocolViolation(
            f'bind message supplies {len(values)} parameters, but prepared statement "" '
            f"requires {required}"
        )
    if not params:
        return cmd
    changes = {name: _convert(name, p, values[p.index - 1]) for name, p in params}
    return dataclasses.replace(cmd, **changes)


def _convert(field: str, param: Param, value: BindValue) -> Any:
    slot = param.slot
    if value is None:
        if slot is Slot.RESULT:
            return None
        raise InvalidParameterValue(
            f"null value for parameter ${param.index} is not allowed here ({field})"
        )
    if slot is Slot.TEXT or slot is Slot.RESULT:
        return _text(value)
    if slot is Slot.KEY:
        if isinstance(value, str) and param.cast not in INTEGER_CASTS:
            return value  # a path, even when all digits (§8 rule 5)
        return check_int(_integer(value, param), "id")
    return check_int(_integer(value, param), _INT_FIELD_NAMES[field])


def _text(value: int | str | bool | float) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _integer(value: int | str | bool | float, param: Param) -> int:
    if isinstance(value, bool):
        raise InvalidTextRepresentation(
            f"invalid input syntax for type bigint: \"{'true' if value else 'false'}\""
        )
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise InvalidTextRepresentation(f'invalid input syntax for type bigint: "{value}"')
    m = _INT_TEXT.fullmatch(value)
    if m is None:
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise InvalidTextRepresentation(
            f'invalid input syntax for type bigint: "{shown}" (parameter ${param.index})'
        )
    return int(m.group(1))
