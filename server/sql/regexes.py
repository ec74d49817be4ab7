"""``~``, ``~*``, ``!~`` and ``!~*``: regular expressions through RE2, in linear time.

Python's ``re`` backtracks: ``'aaaaaaaaaaaaaaaaaaaaaaaaaa' ~ '(a+)+b'`` tries every way to
split the run of ``a`` and held the server's one event loop for seconds. RE2 (the
``google-re2`` binding) compiles a pattern to an automaton and never backtracks, so a
match costs at most the text's length times the program's size, whatever the pattern.

Its syntax is Perl's, the common part of PostgreSQL's advanced regular expressions
(docs, "9.7.3. POSIX Regular Expressions"): literals, ``.``, classes (``[a-z]``,
``[[:alpha:]]``, ``\\d``, ``\\w``, ``\\s``), anchors, groups, alternation, greedy and lazy
quantifiers, ``{m,n}`` up to 1000, ``(?i)``. As in PostgreSQL, ``.`` matches a newline and
``^``/``$`` match only at the text's ends. What needs backtracking (back references,
lookahead and lookbehind) is 2201B, like any pattern that does not compile.

Bounds, each 54000 naming it: a pattern of more than :data:`MAX_REGEX_PATTERN_CHARS`
characters, and a match whose text length (UTF-8 bytes) times the pattern's program size
exceeds :data:`MAX_REGEX_WORK`, the most RE2 can spend on it (when its DFA gives up, the
NFA fallback takes about that many steps). RE2's own ``max_mem`` bounds a compiled
pattern's memory ("pattern too large" is 2201B).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from cubequeue.grammar.errors import LimitExceeded, QueueError
from cubequeue.grammar.lexical import shown

__all__ = [
    "MAX_REGEX_PATTERN_CHARS",
    "MAX_REGEX_WORK",
    "InvalidRegularExpression",
    "Regex",
    "compile_regex",
]

#: characters of one pattern
MAX_REGEX_PATTERN_CHARS: Final = 1000
#: text bytes x program instructions of one match: RE2's worst case (its NFA) stays a
#: few tens of milliseconds under it
MAX_REGEX_WORK: Final = 5_000_000
_UNSUPPORTED: Final = ("cubequeue matches with RE2 (linear time): back references, lookahead, "
                       "lookbehind and PostgreSQL's \\m \\M \\y \\Y \\Z escapes are not supported")
#: compiled patterns kept across statements (the catalog's ``\\d`` patterns repeat)
_CACHED: Final = 256


class InvalidRegularExpression(QueueError, sqlstate="2201B"):
    """A pattern RE2 cannot compile (PostgreSQL's invalid_regular_expression)."""


@dataclass(frozen=True, slots=True)
class Regex:
    """One compiled pattern; :meth:`search` is ``text ~ pattern``."""

    pattern: str
    program: re2._Regexp

    def search(self, text: str) -> bool:
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        work = size * max(int(self.program.programsize), 1)
        if work > MAX_REGEX_WORK:
            raise LimitExceeded(
                f"regular expression match of a {size}-byte text with a pattern of "
                f"{self.program.programsize} instructions ({work}) exceeds the limit of "
                f"{MAX_REGEX_WORK} (text bytes x pattern size)")
        return self.program.search(text) is not None


def compile_regex(pattern: str, *, insensitive: bool = False) -> Regex:
    """``pattern`` compiled for ``~`` (``~*`` when ``insensitive``); 2201B when it does not
    compile, 54000 when it is longer than :data:`MAX_REGEX_PATTERN_CHARS`."""
    if len(pattern) > MAX_REGEX_PATTERN_CHARS:
        raise LimitExceeded(
            f"regular expression of {len(pattern)} characters exceeds the limit of "
            f"{MAX_REGEX_PATTERN_CHARS}")
    return _compile(pattern, insensitive)


@lru_cache(maxsize=_CACHED)
def _compile(pattern: str, insensitive: bool) -> Regex:
    options = re2.Options()
    options.log_errors = False
    options.dot_nl = True  # PostgreSQL's default: '.' and [^x] match a newline
    options.never_capture = True  # a yes/no answer needs no groups: RE2's fastest path
    options.case_sensitive = not insensitive
    try:
        return Regex(pattern, re2.compile(pattern, options))
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise InvalidRegularExpression(
            f"invalid regular expression: {text}",
            detail=f"pattern: {shown(pattern)}",
            hint=_UNSUPPORTED if "invalid perl operator" in text or "invalid escape" in text
            else None,
        ) from None
    except UnicodeEncodeError:
        raise InvalidRegularExpression("invalid regular expression: not valid UTF-8",
                                       detail=f"pattern: {shown(pattern)}") from None
