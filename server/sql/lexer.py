"""A small PostgreSQL-flavoured tokenizer for the session statements, and the literal
rewrite that lets sqlglot read our strings.

Why not sqlglot for ``SET``/``SHOW``/``DISCARD``…: sqlglot parses most of them as an opaque
``Command`` (with a logged warning) or as nonsense (``DISCARD ALL`` is a column alias), and
its import costs ~0.2 s; these statements sit on the hot path of every driver
(postgres-wire.md §2.4), so they are read here with a few dozen lines.

Strings follow cubequeue's lexical rules (dialect doc §8 rule 4): the server reports
``standard_conforming_strings = off``, so backslash escapes apply in plain ``'…'`` as in
``E'…'``; ``$$…$$`` / ``$tag$…$tag$`` are verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError

__all__ = ["Token", "decode_escapes", "first_word", "for_sqlglot", "tokenize"]

TokenKind = Literal["word", "ident", "string", "number", "param", "op"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    #: words are lower-cased (PostgreSQL folds unquoted identifiers); strings decoded.
    value: str
    #: 0-based offset in the statement (ErrorResponse position is this + 1).
    pos: int


_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$))+")
_WORD = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_PARAM = re.compile(r"\$(\d+)")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_SIMPLE_ESC = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)


def _syntax(msg: str, pos: int) -> SqlSyntaxError:
    return SqlSyntaxError(msg, position=pos + 1)


def decode_escapes(body: str) -> str:
    """PostgreSQL escape-string rules (``\\n``, octal, ``\\xHH``, ``\\uXXXX``, else the char)."""

    def sub(m: re.Match[str]) -> str:
        octal, hex2, u4, u8, other = m.groups()
        if octal is not None:
            return chr(int(octal, 8) & 0xFF)
        if hex2 is not None:
            return chr(int(hex2, 16))
        if u4 is not None or u8 is not None:
            return chr(int(u4 or u8, 16))
        return _SIMPLE_ESC.get(other, other)

    return _ESCAPE.sub(sub, body)


def _skip_block_comment(sql: str, i: int) -> int:
    depth, j = 1, i + 2
    while depth:
        if j >= len(sql):
            raise _syntax("unterminated /* comment at or near \"/*\"", i)
        if sql.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif sql.startswith("*/", j):
            depth, j = depth - 1, j + 2
        else:
            j += 1
    return j


def _read_quoted(sql: str, i: int, quote: str, escapes: bool) -> tuple[str, int]:
    """Read ``quote…quote`` from ``sql[i]``; returns (raw body, index after the end)."""
    j = i + 1
    while True:
        if j >= len(sql):
            raise _syntax("unterminated quoted string at or near " + repr(sql[i:i + 20]), i)
        c = sql[j]
        if escapes and c == "\\":
            j += 2
        elif c == quote:
            if sql.startswith(quote, j + 1):
                j += 2
            else:
                return sql[i + 1:j], j + 1
        else:
            j += 1


def _string_at(sql: str, i: int) -> tuple[str, int] | None:
    """A string literal starting at ``i`` → (decoded value, end), else None."""
    c = sql[i]
    if c in "eE" and sql.startswith("'", i + 1):
        body, end = _read_quoted(sql, i + 1, "'", True)
        return decode_escapes(body.replace("''", "'")), end
    if c == "'":
        body, end = _read_quoted(sql, i, "'", True)
        return decode_escapes(body.replace("''", "'")), end
    if c == "$":
        m = _DOLLAR.match(sql, i)
        if m:
            close = sql.find(m.group(0), m.end())
            if close < 0:
                raise _syntax("unterminated dollar-quoted string at or near " + repr(m.group(0)), i)
            return sql[m.end():close], close + len(m.group(0))
    return None


def tokenize(sql: str) -> list[Token]:
    """Tokens of one statement; a trailing ``;`` is dropped, any other ``;`` is an op."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        m = _SPACE.match(sql, i)
        if m:
            i = m.end()
            continue
        if sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
            continue
        s = _string_at(sql, i)
        if s is not None:
            out.append(Token("string", s[0], i))
            i = s[1]
            continue
        c = sql[i]
        if c == '"':
            body, end = _read_quoted(sql, i, '"', False)
            out.append(Token("ident", body.replace('""', '"'), i))
            i = end
            continue
        m = _WORD.match(sql, i)
        if m:
            out.append(Token("word", m.group(0).lower(), i))
            i = m.end()
            continue
        m = _NUMBER.match(sql, i)
        if m:
            out.append(Token("number", m.group(0), i))
            i = m.end()
            continue
        m = _PARAM.match(sql, i)
        if m:
            out.append(Token("param", m.group(1), i))
            i = m.end()
            continue
        out.append(Token("op", c, i))
        i += 1
    if out and out[-1] == Token("op", ";", out[-1].pos):
        out.pop()
    return out


def first_word(sql: str) -> str:
    """The first keyword (lower-cased) after whitespace and comments; '' when none."""
    i, n = 0, len(sql)
    while i < n:
        m = _SPACE.match(sql, i)
        if m:
            i = m.end()
        elif sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
        else:
            break
    m = _WORD.match(sql, i)
    return m.group(0).lower() if m else sql[i:i + 1]


def for_sqlglot(sql: str) -> str:
    """Rewrite every string literal into standard form (``'…'`` with ``''``), decoded.

    sqlglot's postgres dialect reads ``'…'`` as standard-conforming (a backslash is a
    plain character) and turns ``E'…'`` into a byte string; our strings follow §8 rule 4,
    so they are decoded here first. Identifiers, comments and dollar quotes are kept.
    """
    if "\\" not in sql and "'" not in sql and "$" not in sql:
        return sql
    parts: list[str] = []
    i, n, last = 0, len(sql), 0
    while i < n:
        c = sql[i]
        if c == '"':
            i = _read_quoted(sql, i, '"', False)[1]
            continue
        if sql.startswith("--", i):
            nl = sql.find("\n", i)
            i = n if nl < 0 else nl + 1
            continue
        if sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
            continue
        prev_is_word = i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")
        if (c == "'" or c == "$" or (c in "eE" and not prev_is_word)) and not (
            c == "$" and prev_is_word
        ):
            s = _string_at(sql, i)
            if s is not None:
                parts.append(sql[last:i])
                parts.append("'" + s[0].replace("'", "''") + "'")
                i = last = s[1]
                continue
        i += 1
    parts.append(sql[last:])
    return "".join(parts)
