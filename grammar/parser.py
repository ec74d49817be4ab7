"""``parse(sql) -> Command``: one QUEUE / CACHE / SYS statement (``cubestore-dialect.md``
§3-§5, with cubequeue's §8 rules and issue 9's PURGE and SYS CLOCK).

Speed is a stated requirement (issue 3): Lark's LALR parser with the contextual lexer runs
the :class:`~cubequeue.grammar.transform.CommandBuilder` callbacks during the parse, so no
tree is built, and :func:`parse_cached` keeps an LRU of statement text → command (commands
are immutable, so sharing them is safe).
"""

from __future__ import annotations

import functools
import re
import threading
from pathlib import Path

from lark import Lark
from lark.exceptions import LarkError

from cubequeue.grammar.commands import Command
from cubequeue.grammar.diagnostics import from_lark
from cubequeue.grammar.transform import CommandBuilder

__all__ = ["CACHED_TEXT_LIMIT", "is_dialect", "parse", "parse_cached"]

_GRAMMAR = Path(__file__).with_name("queue.lark")

_builder = CommandBuilder()
_lark = Lark(
    _GRAMMAR.read_text(encoding="utf-8"),
    parser="lalr",
    lexer="contextual",
    transformer=_builder,
    maybe_placeholders=False,
    propagate_positions=False,
    cache=False,
)
# The builder holds per-statement placeholder state (see transform.py), so parses of
# different threads must not interleave. Uncontended, this costs well under a microsecond.
_lock = threading.Lock()


def parse(sql: str) -> Command:
    """Parse one statement (one trailing ``;`` allowed); raises only ``QueueError``."""
    with _lock:
        _builder.begin()
        try:
            command = _lark.parse(sql)
        except LarkError as exc:
            raise from_lark(sql, exc) from None
        _builder.finish()
    assert isinstance(command, Command)
    return command


#: Statements longer than this bypass the LRU: a cache of 4096 megabyte payloads would
#: pin gigabytes, and such statements are practically never repeated.
CACHED_TEXT_LIMIT = 16 * 1024


@functools.lru_cache(maxsize=4096)
def _parse_lru(sql: str) -> Command:
    return parse(sql)


def parse_cached(sql: str) -> Command:
    """:func:`parse` behind an LRU keyed by the statement text (errors are not cached)."""
    if len(sql) > CACHED_TEXT_LIMIT:
        return parse(sql)
    return _parse_lru(sql)


_DIALECT_HEAD = re.compile(
    r"(?:[ \t\r\n\f\v]|--[^\n]*|/\*[\s\S]*?\*/)*+(?i:queue|cache|sys)(?![A-Za-z0-9_$\u0080-\U0010FFFF])"
)


def is_dialect(sql: str) -> bool:
    """True when the first token is QUEUE, CACHE or SYS (§1.1), after whitespace/comments."""
    return _DIALECT_HEAD.match(sql) is not None
