"""PostgreSQL's tokens for the session statements, and the literal rewrite that lets
sqlglot read our strings.

Why not sqlglot for ``SET``/``SHOW``/``DISCARD``…: sqlglot parses most of them as an opaque
``Command`` (with a logged warning) or as nonsense (``DISCARD ALL`` is a column alias), and
its import costs ~0.2 s; these statements sit on the hot path of every driver, so they are
read here with a few dozen lines.

The tokens come from the grammar's one tokenizer (:mod:`cubequeue.grammar.tokens`) with
PostgreSQL's reading of them: a ``"…"`` is an identifier, a backtick an operator, an
unquoted word is folded to lower case (ASCII, as PostgreSQL folds in UTF-8). Strings follow
cubequeue's lexical rules (``docs/dialect.md`` §8 rule 4): the server reports
``standard_conforming_strings = off``, so backslash escapes apply in plain ``'…'`` as in
``E'…'``, decoded as PostgreSQL decodes them (:func:`~cubequeue.grammar.lexical.decode_pg_escapes`:
octal and hex escapes are bytes, the result must be valid UTF-8); ``$$…$$`` /
``$tag$…$tag$`` are verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cubequeue.grammar import tokens as t
from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.grammar.lexical import decode_dollar, decode_pg_escapes

__all__ = ["Token", "decode_escapes", "first_word", "for_sqlglot", "tokenize"]

TokenKind = Literal["word", "ident", "string", "number", "param", "op"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    #: words are lower-cased (PostgreSQL folds unquoted identifiers); strings decoded.
    value: str
    #: 0-based offset in the statement (ErrorResponse position is this + 1).
    pos: int


def _syntax(msg: str, pos: int) -> SqlSyntaxError:
    return SqlSyntaxError(msg, position=pos + 1)


def decode_escapes(body: str) -> str:
    """A ``'…'`` / ``E'…'`` body as PostgreSQL decodes it (``''`` and backslash escapes)."""
    return decode_pg_escapes(body)


def _unterminated(sql: str, start: int, kind: str) -> SqlSyntaxError:
    if kind == t.OPEN_COMMENT:
        return _syntax('unterminated /* comment at or near "/*"', start)
    if sql[start] == "$":
        tag = sql[start : sql.index("$", start + 1) + 1]
        return _syntax("unterminated dollar-quoted string at or near " + repr(tag), start)
    return _syntax("unterminated quoted string at or near " + repr(sql[start : start + 20]), start)


def _string_value(sql: str, kind: str, start: int, end: int) -> str:
    """The value of a STRING / ESTRING / DOLLAR token."""
    if kind == t.DOLLAR:
        return decode_dollar(sql[start:end])
    return decode_pg_escapes(sql[start + (2 if kind == t.ESTRING else 1) : end - 1])


def tokenize(sql: str) -> list[Token]:
    """Tokens of one statement; a trailing ``;`` is dropped, any other ``;`` is an op."""
    out: list[Token] = []
    for kind, start, end in t.tokenize(sql, backticks=False):
        if kind == t.WORD:
            word = sql[start:end]
            out.append(Token("word", word.lower() if word.isascii() else word, start))
        elif kind == t.STRING or kind == t.ESTRING or kind == t.DOLLAR:
            out.append(Token("string", _string_value(sql, kind, start, end), start))
        elif kind == t.DQ:
            out.append(Token("ident", sql[start + 1 : end - 1].replace('""', '"'), start))
        elif kind == t.NUMBER:
            out.append(Token("number", sql[start:end], start))
        elif kind == t.PARAM and sql[start] == "$":
            out.append(Token("param", sql[start + 1 : end], start))
        elif kind == t.UNTERMINATED or kind == t.OPEN_COMMENT:
            raise _unterminated(sql, start, kind)
        else:  # operators, ``?``, and ``::`` as two ``:``
            out.extend(Token("op", sql[i], i) for i in range(start, end))
    if out and out[-1] == Token("op", ";", out[-1].pos):
        out.pop()
    return out


def first_word(sql: str) -> str:
    """The first keyword (lower-cased) after whitespace and comments; else its first
    character ('' when there is none)."""
    word = t.first_word(sql)
    if word:
        return word
    pos = t.skip_blank(sql)
    return sql[pos : pos + 1]


def for_sqlglot(sql: str) -> str:
    """Rewrite every string literal into standard form (``'…'`` with ``''``), decoded.

    sqlglot's postgres dialect reads ``'…'`` as standard-conforming (a backslash is a
    plain character) and turns ``E'…'`` into a byte string; our strings follow §8 rule 4,
    so they are decoded here first. Identifiers and comments are kept.
    """
    if "\\" not in sql and "'" not in sql and "$" not in sql:
        return sql
    parts: list[str] = []
    last = 0
    interval_at = -1  # where the word INTERVAL just before this token starts
    for kind, start, end in t.tokenize(sql, backticks=False):
        if kind == t.STRING or kind == t.ESTRING or kind == t.DOLLAR:
            value = _string_value(sql, kind, start, end)
            literal = "'" + value.replace("'", "''") + "'"
            if interval_at >= 0 and not _ONE_INTERVAL_PART.fullmatch(value):
                parts.append(sql[last:interval_at])
                literal = f"CAST({literal} AS INTERVAL)"
            else:
                parts.append(sql[last:start])
            parts.append(literal)
            last = end
        elif kind == t.UNTERMINATED or kind == t.OPEN_COMMENT:
            raise _unterminated(sql, start, kind)
        interval_at = start if kind == t.WORD and sql[start:end].lower() == "interval" else -1
    parts.append(sql[last:])
    return "".join(parts)


#: an interval literal sqlglot reads whole (``'5'``, ``'5 minutes'``); any other
#: (``'1 day 02:00:00'``) it cuts to its first number and unit, so it is passed as
#: ``CAST('…' AS INTERVAL)``, which it keeps as written
_ONE_INTERVAL_PART = re.compile(r"\s*-?[0-9]+(?:\.[0-9]+)?\s*(?:[a-zA-Z]+)?\s*")
