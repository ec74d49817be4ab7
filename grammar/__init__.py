"""The QUEUE / CACHE / SYS dialect: statement text → typed, immutable commands.

Public API: :func:`parse`, :func:`parse_cached` and :func:`prepare` (the shape-keyed
cache of ``shapes.py``), :func:`is_dialect`, :func:`split_statements`,
:func:`param_slots` and :func:`bind`, the tokenizer helpers :func:`first_word` and
:func:`strip_leading_comments`, plus the command classes of
:mod:`cubequeue.grammar.commands`.
"""

from __future__ import annotations

from cubequeue.grammar.binding import bind, param_slots
from cubequeue.grammar.commands import Command, Param, Slot
from cubequeue.grammar.parser import is_dialect, parse
from cubequeue.grammar.shapes import Prepared, StatementCache, parse_cached, prepare
from cubequeue.grammar.split import split_statements
from cubequeue.grammar.tokens import first_word, strip_leading_comments

__all__ = [
    "Command",
    "Param",
    "Prepared",
    "Slot",
    "StatementCache",
    "bind",
    "first_word",
    "is_dialect",
    "param_slots",
    "parse",
    "parse_cached",
    "prepare",
    "split_statements",
    "strip_leading_comments",
]
