"""``LIKE`` / ``ILIKE`` without backtracking.

A LIKE pattern compiled to a regular expression (``%`` → ``.*``) backtracks: ``'%a%a%b'``
against a few kilobytes without a ``b`` tries every way to place each ``a``, and one
more ``%a`` multiplies the time again, all on the server's one event loop. Here the
pattern is split at its unescaped ``%`` into *segments* of fixed length (literal
characters and ``_``). The first segment must match at the start, the last at the end,
and each one in between at its leftmost place after the previous one: taking the
leftmost place never loses a match, because whatever follows can only gain room. So
every segment is searched once, left to right, and never revisited.

A segment of literals is found with ``str.find`` (linear); one with ``_`` is found with
a regular expression of literals and ``.`` only, which has no quantifier and so cannot
backtrack (at most ``len(segment)`` steps per place); a segment of ``_`` only is a length.

PostgreSQL's rules (docs, "9.7.1. LIKE"): ``\\`` escapes by default, ``ESCAPE ''`` turns
escaping off, an escape string of more than one character is 22019 and a pattern that
ends with its escape character is 22025. ``ILIKE`` compares lower-cased text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cubequeue.grammar.errors import QueueError

__all__ = ["InvalidEscapeCharacter", "InvalidEscapeSequence", "LikePattern", "compile_like"]


class InvalidEscapeCharacter(QueueError, sqlstate="22019"):
    """``ESCAPE`` with more than one character."""


class InvalidEscapeSequence(QueueError, sqlstate="22025"):
    """A LIKE pattern that ends with its escape character."""


def fold(text: str) -> str:
    """Lower case, one character for one (``_`` must still count characters)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(lc := c.lower()) != 1 else lc for c in text)


@dataclass(frozen=True, slots=True)
class _Segment:
    """A run of the pattern between two ``%``: ``size`` characters."""

    size: int
    #: the literal text, when the segment has no ``_``
    text: str | None
    #: literals and ``.``, when it has ``_`` among literals
    rx: re.Pattern[str] | None

    def at(self, value: str, pos: int) -> bool:
        if self.text is not None:
            return value.startswith(self.text, pos)
        if self.rx is not None:
            return self.rx.match(value, pos) is not None
        return pos + self.size <= len(value)

    def find(self, value: str, lo: int, hi: int) -> int:
        """The leftmost start in ``[lo, hi - size]``, or -1."""
        if self.text is not None:
            return value.find(self.text, lo, hi)
        if self.rx is not None:
            found = self.rx.search(value, lo, hi)
            return -1 if found is None else found.start()
        return lo if lo + self.size <= hi else -1


def _segment(chars: list[tuple[str, bool]]) -> _Segment:
    """``chars``: (character, is the ``_`` wildcard)."""
    if not any(wild for _, wild in chars):
        return _Segment(len(chars), "".join(c for c, _ in chars), None)
    if all(wild for _, wild in chars):
        return _Segment(len(chars), None, None)
    body = "".join("." if wild else re.escape(c) for c, wild in chars)
    return _Segment(len(chars), None, re.compile(body, re.S))


@dataclass(frozen=True, slots=True)
class LikePattern:
    """A compiled pattern: ``segments[0]`` anchored at the start, ``segments[-1]`` at the
    end; a single segment (no ``%``) must be the whole value."""

    segments: tuple[_Segment, ...]
    insensitive: bool

    def matches(self, value: str) -> bool:
        if self.insensitive:
            value = fold(value)
        segs = self.segments
        first = segs[0]
        if len(segs) == 1:
            return len(value) == first.size and first.at(value, 0)
        last = segs[-1]
        lo, hi = first.size, len(value) - last.size
        if hi < lo or not first.at(value, 0) or not last.at(value, hi):
            return False
        for seg in segs[1:-1]:
            if seg.size == 0:
                continue
            start = seg.find(value, lo, hi)
            if start < 0:
                return False
            lo = start + seg.size
        return True


def compile_like(pattern: str, *, escape: str = "\\", insensitive: bool = False) -> LikePattern:
    """``pattern`` compiled; raises 22019 / 22025 as PostgreSQL does."""
    if len(escape) > 1:
        raise InvalidEscapeCharacter("invalid escape string",
                                     hint="Escape string must be empty or one character.")
    if insensitive:
        pattern, escape = fold(pattern), fold(escape)
    segments: list[_Segment] = []
    chars: list[tuple[str, bool]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if escape and c == escape:
            if i + 1 == n:
                raise InvalidEscapeSequence("LIKE pattern must not end with escape character")
            chars.append((pattern[i + 1], False))
            i += 2
            continue
        if c == "%":
            segments.append(_segment(chars))
            chars = []
        else:
            chars.append((c, c == "_"))
        i += 1
    segments.append(_segment(chars))
    return LikePattern(tuple(segments), insensitive)
