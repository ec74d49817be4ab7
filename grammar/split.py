"""``split_statements``: a simple-Query string → its statements, split on ``;``.

A ``;`` inside a literal, a quoted word or a comment does not split. The quoting rules are
the dialect's (``cubestore-dialect.md`` §1.2, §8 rule 4) with
``standard_conforming_strings = off``, so a backslash escapes the next character inside
``'…'`` as well as ``E'…'``: ``'…'``, ``E'…'``, ``"…"``, `` `…` ``, ``$$…$$`` /
``$tag$…$tag$``, ``--`` line comments and ``/* */`` block comments (nested, as PostgreSQL
nests them). An unterminated literal runs to the end of the text; the parser reports it.

Statements are returned stripped of surrounding whitespace; blank ones (whitespace and
comments only) are dropped, so an all-blank string gives ``[]`` and the server answers
EmptyQueryResponse.
"""

from __future__ import annotations

import re

from cubequeue.grammar.lexical import ID_CHAR, ID_START, TAG_CHAR

__all__ = ["split_statements"]

# One scan step: the next character that could start something interesting.
_INTERESTING = re.compile(r"[;'\"`$/\-]")
_SQ_BODY = re.compile(r"[^'\\]*+(?:(?:\\[\s\S]|'')[^'\\]*+)*+'")
_DQ_BODY = re.compile(r'[^"]*+(?:""[^"]*+)*+"')
_BT_BODY = re.compile(r"[^`]*+(?:``[^`]*+)*+`")
_DOLLAR_TAG = re.compile(rf"\$((?:{ID_START}{TAG_CHAR}*)?)\$")
_IDENT_END = re.compile(ID_CHAR)
_COMMENT_EDGE = re.compile(r"/\*|\*/")
# possessive, single-character whitespace steps: no backtracking blow-up on long runs
_BLANK = re.compile(r"(?:[ \t\r\n\f\v]|--[^\n]*|/\*[\s\S]*?\*/)*+")


def _skip_block_comment(sql: str, pos: int) -> int:
    """``pos`` is just after ``/*``; returns the index after the matching ``*/``."""
    depth = 1
    while depth:
        m = _COMMENT_EDGE.search(sql, pos)
        if m is None:
            return len(sql)
        depth += 1 if m.group(0) == "/*" else -1
        pos = m.end()
    return pos


def _skip(sql: str, pos: int, ch: str) -> int:
    """Given the interesting character ``ch`` at ``pos``, the index after its construct."""
    n = len(sql)
    if ch == "'":
        m = _SQ_BODY.match(sql, pos + 1)
        return m.end() if m else n
    if ch == '"':
        m = _DQ_BODY.match(sql, pos + 1)
        return m.end() if m else n
    if ch == "`":
        m = _BT_BODY.match(sql, pos + 1)
        return m.end() if m else n
    if ch == "$":
        # `$` inside an identifier (a$b$) is part of the word, not a dollar quote
        if pos > 0 and _IDENT_END.match(sql, pos - 1):
            return pos + 1
        tag = _DOLLAR_TAG.match(sql, pos)
        if tag is None:
            return pos + 1
        end = sql.find(tag.group(0), tag.end())
        return n if end < 0 else end + len(tag.group(0))
    if ch == "-":
        if sql.startswith("--", pos):
            nl = sql.find("\n", pos)
            return n if nl < 0 else nl + 1
        return pos + 1
    # ch == "/"
    if sql.startswith("/*", pos):
        return _skip_block_comment(sql, pos + 2)
    return pos + 1


def _keep(statement: str, out: list[str]) -> None:
    if _BLANK.match(statement).end() != len(statement):  # type: ignore[union-attr]  # a star always matches
        out.append(statement.strip())


def split_statements(sql: str) -> list[str]:
    """The non-blank statements of ``sql`` without their ``;`` (see module docstring)."""
    out: list[str] = []
    start = pos = 0
    while True:
        m = _INTERESTING.search(sql, pos)
        if m is None:
            break
        pos = m.start()
        ch = m.group(0)
        if ch == ";":
            _keep(sql[start:pos], out)
            start = pos = pos + 1
            continue
        pos = _skip(sql, pos, ch)
    _keep(sql[start:], out)
    return out
