"""The QUEUE / CACHE / SYS dialect: statement text → typed, immutable commands.

Public API (INTERFACES.md, "grammar API"): :func:`parse`, :func:`parse_cached`,
:func:`is_dialect`, :func:`split_statements`, :func:`param_slots` and :func:`bind`, plus
the command classes of :mod:`cubequeue.grammar.commands`.
"""

from __future__ import annotations

# Import order matters: cubequeue.storage's package __init__ imports its store, which
# imports grammar.commands, which imports storage.results. Loading the storage package
# first lets that cycle resolve whichever package a program imports first.
import cubequeue.storage  # noqa: F401  # isort: skip
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
