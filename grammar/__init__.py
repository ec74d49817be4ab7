"""The QUEUE / CACHE / SYS dialect: statement text → typed, immutable commands.

Public API: :func:`parse`, :func:`parse_cached`,
:func:`is_dialect`, :func:`split_statements`, :func:`param_slots` and :func:`bind`, plus
the command classes of :mod:`cubequeue.grammar.commands`.
"""

from __future__ import annotations

from cubequeue.grammar.binding import bind, param_slots
from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.grammar.parser import is_dialect, parse, parse_cached
from cubequeue.grammar.split import split_statements

__all__ = [
    "Command",
    "Param",
    "Slot",
    "bind",
    "is_dialect",
    "param_slots",
    "parse",
    "parse_cached",
    "split_statements",
]
