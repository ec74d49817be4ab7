"""Unwrapping a bound command's fields.

Commands may hold a :class:`~cubequeue.grammar.commands.Param` until the server binds the
statement's parameters; the store only ever executes bound commands, so a leftover
placeholder is our own bug (an internal error, §8 rule 10), never a user error.
"""

from __future__ import annotations

from cubequeue.grammar.commands import Param
from cubequeue.grammar.errors import InternalError

__all__ = ["key", "num", "opt_num", "opt_text", "text"]


def _unbound(value: Param) -> InternalError:
    return InternalError(f"placeholder ${value.index} was not bound before execution")


def text(value: str | Param) -> str:
    if isinstance(value, Param):
        raise _unbound(value)
    return value


def opt_text(value: str | Param | None) -> str | None:
    if isinstance(value, Param):
        raise _unbound(value)
    return value


def num(value: int | Param) -> int:
    if isinstance(value, Param):
        raise _unbound(value)
    return value


def opt_num(value: int | Param | None) -> int | None:
    if isinstance(value, Param):
        raise _unbound(value)
    return value


def key(value: int | str | Param) -> int | str:
    if isinstance(value, Param):
        raise _unbound(value)
    return value
