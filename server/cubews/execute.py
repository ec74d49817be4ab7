"""Plain SQL over the WebSocket: the message's typed parameters as PostgreSQL text.

Cube 1.x sends refresh-key queries such as ``SELECT … CAST(? as TIMESTAMP)`` with the
values in ``HttpQuery.parameters``; plain SQL reads its parameters as text, the way the
PostgreSQL wire's text format delivers them, so both wires answer alike.

Statements only a pre-aggregation store gets are refused by what they ask for, on both
wires, in :mod:`cubequeue.server.sql.refusals`: a dialect statement is never checked
(its payload may mention anything), and neither is a word inside plain SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from cubequeue.server.cubews.messages import ParamValue

__all__ = ["plain_params"]


def _text(value: ParamValue) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):  # before int: a bool is an int; PostgreSQL spells it so
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def plain_params(values: Sequence[ParamValue] | None) -> list[str | None]:
    """Each ``?`` value as text (NULL stays None), in order."""
    return [_text(v) for v in values or ()]
