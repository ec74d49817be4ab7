"""Placeholders: which a command has (:func:`param_slots`) and filling them (:func:`bind`).

Binding yields exactly the command the literal text would have produced
(``docs/dialect.md`` §8 rule 5), including the same range errors:

* KEY slot: ``int`` → numeric id; ``str`` → path, unless the placeholder carries an integer
  cast (``$1::int8``), in which case the text must be an integer id. A client that declared
  an integer type (int2/int4/int8) sends a decoded ``int`` and so gets an id.
* INT8 slot: ``int``, or ``str``/integral ``float`` converted (else 22P02).
* TEXT slot: ``str``; an ``int`` or ``float`` becomes its decimal text, a ``bool`` ``true``
  or ``false``.
* RESULT slot (ACK): like TEXT, and ``None`` means "no result", as the keyword NULL.
* ``None`` anywhere else is 22023; a wrong number of values is 08P01
  (:class:`~cubequeue.grammar.errors.ParameterCountMismatch`; each wire words it).

:func:`param_text` is the one spelling of a value as text: a TEXT slot here, and plain
SQL's parameters from both wires (plain SQL reads its parameters as text, the way the
PostgreSQL wire's text format delivers them).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.grammar.errors import (
    InvalidParameterValue,
    InvalidTextRepresentation,
    ParameterCountMismatch,
)
from cubequeue.grammar.lexical import INT_RANGES, MAX_INT_DIGITS, bounded_int, check_int

__all__ = ["INTEGER_CASTS", "BindValue", "bind", "param_slots", "param_text"]

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


# -- bind: a precomputed plan per statement template ---------------------------------------
#
# A prepared statement's template is bound once per Bind message, so its shape is worked
# out once: which fields take which value, and how each is checked. Binding then writes
# the fields straight into a new instance through the slot descriptors (what the frozen
# dataclass's own ``__init__`` does, minus the keyword-argument machinery); a command
# class has no ``__post_init__``, so the result equals ``dataclasses.replace``'s.

#: fast-path kinds; anything the fast path does not take goes through :func:`_convert`
_TEXT = 0  # TEXT and RESULT slots: a ``str`` is taken as is
_INT = 1  # INT8 slots, and KEY slots with an integer cast: an ``int`` within range
_KEY = 2  # KEY slots without an integer cast: a ``str`` (path) or an ``int`` id within range

_Setter = Callable[[Command, object], None]
#: (setter, kind, 0-based value index, param, field name, lowest, highest)
_ParamStep = tuple[_Setter, int, int, Param, str, int, int]


class _Plan:
    __slots__ = ("cls", "consts", "params", "required", "template")

    def __init__(self, template: Command) -> None:
        cls = type(template)
        self.template = template
        self.cls = cls
        consts: list[tuple[_Setter, object]] = []
        params: list[_ParamStep] = []
        for name in _field_names(cls):
            value = getattr(template, name)
            setter = _setter(cls, name)
            if not isinstance(value, Param):
                consts.append((setter, value))
                continue
            if value.slot is Slot.KEY:
                kind, range_name = (_INT if value.cast in INTEGER_CASTS else _KEY), "id"
            elif value.slot is Slot.INT8:
                kind, range_name = _INT, _INT_FIELD_NAMES.get(name, "")
            else:
                kind, range_name = _TEXT, ""
            lo, hi = INT_RANGES.get(range_name, (0, -1))  # an empty range: always checked
            params.append((setter, kind, value.index - 1, value, name, lo, hi))
        self.consts = tuple(consts)
        self.params = tuple(params)
        self.required = max((p.index for _, _, _, p, _, _, _ in params), default=0)


def _setter(cls: type[Command], name: str) -> _Setter:
    """The slot descriptor's ``__set__`` for ``name`` (frozen classes refuse setattr)."""
    for klass in cls.__mro__:
        descriptor = klass.__dict__.get(name)
        if descriptor is not None and hasattr(descriptor, "__set__"):
            setter: _Setter = descriptor.__set__
            return setter
    raise TypeError(f"{cls.__name__}.{name} is not a slot")  # pragma: no cover - our bug


#: id(template) → plan; the plan holds the template, so the id is not reused meanwhile
_PLANS: dict[int, _Plan] = {}
#: templates come from the parse cache (bounded), so this is rarely reached
_MAX_PLANS = 4096


def _new_plan(cmd: Command) -> _Plan:
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    plan = _PLANS[id(cmd)] = _Plan(cmd)
    return plan


def bind(cmd: Command, values: Sequence[BindValue]) -> Command:
    """``cmd`` with every placeholder replaced by its value (see the module docstring)."""
    plan = _PLANS.get(id(cmd))
    if plan is None or plan.template is not cmd:
        plan = _new_plan(cmd)
    required = plan.required
    if len(values) != required:
        raise ParameterCountMismatch(len(values), required)
    if not required:
        return cmd
    out = _new(plan.cls)
    for setter, const in plan.consts:
        setter(out, const)
    for setter, kind, i, param, name, lo, hi in plan.params:
        value: Any = values[i]
        kind_of = type(value)
        if kind_of is str:
            if kind == _INT:  # an integer as text: plain ASCII digits are the usual case
                if (len(value) <= MAX_INT_DIGITS and value.isdigit() and value.isascii()
                        and int(value) <= hi):
                    value = int(value)
                else:
                    value = _convert(name, param, value)
        elif kind_of is int and kind != _TEXT:
            if not lo <= value <= hi:
                value = _convert(name, param, value)
        else:
            value = _convert(name, param, value)
        setter(out, value)
    return out


_new = object.__new__


def _convert(field: str, param: Param, value: BindValue) -> Any:
    slot = param.slot
    if value is None:
        if slot is Slot.RESULT:
            return None
        raise InvalidParameterValue(
            f"null value for parameter ${param.index} is not allowed here ({field})"
        )
    if slot is Slot.TEXT or slot is Slot.RESULT:
        return param_text(value)
    if slot is Slot.KEY:
        if isinstance(value, str) and param.cast not in INTEGER_CASTS:
            return value  # a path, even when all digits (§8 rule 5)
        return check_int(_integer(value, param), "id")
    return check_int(_integer(value, param), _INT_FIELD_NAMES[field])


def param_text(value: BindValue | bytes) -> str | None:
    """``value`` as PostgreSQL prints it: ``true``/``false`` for a bool, decimal text for
    a number, UTF-8 text for bytes (a WebSocket Binary; bad sequences replaced); NULL
    stays ``None``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):  # before int: a bool is an int
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
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
    return bounded_int(m.group(1))  # never int() of 4,300 digits: lexical.MAX_INT_DIGITS
