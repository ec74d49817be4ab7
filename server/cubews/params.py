"""Typed WebSocket parameters (``HttpQuery.parameters``) → the values the binder takes.

Cube's driver sends ``?`` values as a typed union. Over this wire
the union member decides what a value means (dialect doc §8 rule 5): in a queue-key
slot an Int64 is a numeric id and a String a path; a Null bound to ACK's result means
"no result". Everything else is checked here, before :func:`cubequeue.grammar.bind`, so
the errors keep Cube Store's texts (dialect doc §1.4):

* ``Empty parameters, please send parameters within query``
* ``Placeholder index is out of bound, actual: N, parameters length: M`` (N counts the
  placeholders from 0, as Cube Store's binder indexes its parameter list)
* ``Wrong parameters type, actual: <t>, expected: int64 parameter`` /
  ``string parameter`` / ``string or integer parameter``

Parameters beyond the last placeholder are ignored, as Cube Store ignores them.

Plain SQL gets the same values as text (:func:`plain_params`): Cube 1.x sends refresh-key
queries such as ``SELECT … CAST(? as TIMESTAMP)`` with the values in
``HttpQuery.parameters``, and plain SQL reads its parameters as text, the way the
PostgreSQL wire's text format delivers them, so both wires answer alike. Statements only a
pre-aggregation store gets are refused by what they ask for, on both wires, in
:mod:`cubequeue.server.sql.refusals`: a dialect statement is never checked (its payload
may mention anything), and neither is a word inside plain SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from cubequeue.grammar.binding import BindValue, param_text
from cubequeue.grammar.commands import Param, Slot
from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.server.cubews.messages import ParamType, ParamValue, param_type
from cubequeue.server.errors import ProtocolViolation

__all__ = ["plain_params", "ws_values"]

#: the union members each slot accepts, and how Cube Store names the expectation
_ACCEPTS: dict[Slot, tuple[frozenset[ParamType], str]] = {
    Slot.INT8: (frozenset({ParamType.INT64}), "int64 parameter"),
    Slot.TEXT: (frozenset({ParamType.STRING}), "string parameter"),
    Slot.KEY: (frozenset({ParamType.STRING, ParamType.INT64}), "string or integer parameter"),
    Slot.RESULT: (frozenset({ParamType.STRING, ParamType.NULL}), "string parameter"),
}


def ws_values(params: Sequence[Param], values: Sequence[ParamValue] | None) -> list[BindValue]:
    """The positional values for ``bind`` (index 1 first), type-checked per slot."""
    if not params:
        return []
    if not values:
        raise ProtocolViolation("Empty parameters, please send parameters within query")
    needed = max(p.index for p in params)
    bound: list[BindValue] = [None] * needed
    for param in sorted(params, key=lambda p: p.index):
        position = param.index - 1
        if position >= len(values):
            raise ProtocolViolation(
                f"Placeholder index is out of bound, actual: {position}, "
                f"parameters length: {len(values)}"
            )
        value = values[position]
        kind = param_type(value)
        accepted, expected = _ACCEPTS[param.slot]
        if kind not in accepted:
            raise InvalidParameterValue(
                f"Wrong parameters type, actual: {kind.wire_name}, expected: {expected}"
            )
        assert not isinstance(value, bytes)  # no slot accepts Binary
        bound[position] = value
    return bound


def plain_params(values: Sequence[ParamValue] | None) -> list[str | None]:
    """Each ``?`` value as plain SQL reads it (:func:`cubequeue.grammar.binding.param_text`;
    NULL stays None), in order."""
    return [param_text(v) for v in values or ()]
