"""The QUEUE / CACHE / SYS dialect: statement text → typed, immutable commands.

Public API: :func:`parse`, :func:`parse_cached` and :func:`prepare` (the shape-keyed
cache of ``shapes.py``), :func:`is_dialect`, :func:`split_statements`,
:func:`param_slots` and :func:`bind`, the tokenizer helpers :func:`first_word` and
:func:`strip_leading_comments`, plus the command classes of
:mod:`cubequeue.grammar.commands`.

The names are loaded when first read (a module ``__getattr__``), so importing the
dialect's data types (``grammar.commands``, ``grammar.results``, ``grammar.errors``), as
every store does, does not load the parser and Lark with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cubequeue.grammar.binding import bind, param_slots
    from cubequeue.grammar.commands import Command, Param, Slot
    from cubequeue.grammar.parser import is_dialect, parse
    from cubequeue.grammar.shapes import Prepared, StatementCache, parse_cached, prepare
    from cubequeue.grammar.split import split_statements
    from cubequeue.grammar.tokens import first_word, strip_leading_comments

#: each public name and the submodule that defines it
_HOME = {
    "Command": "commands",
    "Param": "commands",
    "Prepared": "shapes",
    "Slot": "commands",
    "StatementCache": "shapes",
    "bind": "binding",
    "first_word": "tokens",
    "is_dialect": "parser",
    "param_slots": "binding",
    "parse": "parser",
    "parse_cached": "shapes",
    "prepare": "shapes",
    "split_statements": "split",
    "strip_leading_comments": "tokens",
}

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


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # read once: later reads are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
