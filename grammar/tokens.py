"""The one tokenizer: where each token of a statement starts and ends, and what kind it is.

Every reader of statement text uses it: the grammar's Lark lexer (``lexer.py``), the
statement splitter (``split.py``), error wording (``diagnostics.py``), the shape-keyed
statement cache (``shapes.py``) and the plain-SQL lexer of the PostgreSQL wire. The
lexical rules are PostgreSQL's with the server's ``standard_conforming_strings = off``
(``docs/dialect.md`` §1.2 and §8 rule 4):

* whitespace and comments separate tokens and are never tokens: ``--`` runs to the end of
  the line, ``/* */`` comments **nest** as PostgreSQL nests them;
* ``'…'`` and ``E'…'``: a backslash escapes the next character, ``''`` is one quote;
* ``"…"`` (and, in the dialect, `` `…` ``): a doubled quote is one quote, no escapes;
* ``$$…$$`` / ``$tag$…$tag$``: verbatim up to the same tag;
* ``$n`` and ``?`` placeholders, ``::`` casts, numbers, words (an ASCII letter, ``_`` or
  any non-ASCII character, then those, digits and ``$``); any other character is an
  operator token of its own.

What a token *means* (a ``"…"`` is a value in the dialect and an identifier in SQL; a word
is a keyword only where the grammar takes one) is for the parser to decide, not for this
module. Token bodies are found with ``str.find``, so a 64 MB literal costs tens of
milliseconds, and nothing here backtracks.

A literal whose closing quote is missing is one :data:`UNTERMINATED` token running to the
end of the text, and so is a ``/*`` comment that never closes (:data:`OPEN_COMMENT`):
callers word the error, or (the splitter) let the statement run to the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = [
    "BT",
    "CAST",
    "DOLLAR",
    "DQ",
    "ESTRING",
    "ID_CHAR",
    "ID_START",
    "JUNK",
    "LITERAL_KINDS",
    "NUMBER",
    "OP",
    "OPEN_COMMENT",
    "PARAM",
    "STRING",
    "TAG_CHAR",
    "UNTERMINATED",
    "WORD",
    "RawToken",
    "first_word",
    "literal_runs",
    "next_token",
    "skip_blank",
    "strip_leading_comments",
    "tokenize",
]

# Identifier characters as regex classes. Negated ASCII classes compile at once, where
# Python's re compiles the equivalent [A-Za-z_\u0080-\U0010FFFF] far more slowly (figures
# in bench/RESULTS-notes.md); tests/grammar/test_grammar_tokens.py checks every code point.
#: a word's first character: an ASCII letter, ``_``, or any non-ASCII character
ID_START: Final = r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f]"
#: a word's later characters: ID_START, digits and ``$``
ID_CHAR: Final = r"[^\x00-\x23\x25-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
#: a dollar-quote tag's later characters: ID_START and digits (no ``$``)
TAG_CHAR: Final = r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"

# Token kinds. They are the grammar's terminal names, so the Lark lexer passes them on.
STRING: Final = "STRING"  # '…'
ESTRING: Final = "ESTRING"  # E'…'
DQ: Final = "DQ"  # "…"
BT: Final = "BT"  # `…`
DOLLAR: Final = "DOLLAR"  # $tag$…$tag$
NUMBER: Final = "NUMBER"
WORD: Final = "WORD"
PARAM: Final = "PARAM"  # $n or ?
CAST: Final = "CAST"  # ::
OP: Final = "OP"  # any other single character
UNTERMINATED: Final = "UNTERMINATED"  # a quote or dollar tag that never closes
OPEN_COMMENT: Final = "OPEN_COMMENT"  # a /* that never closes
JUNK: Final = "JUNK"  # a number or $n running into a word (5abc): no token of its own
#: kinds whose text is a value the statement carries (quoted literals and numbers)
LITERAL_KINDS: Final = frozenset((STRING, ESTRING, DQ, BT, DOLLAR, NUMBER))

#: (kind, start, end): the token is ``sql[start:end]``
RawToken = tuple[str, int, int]

_BLANK_CHARS = " \t\r\n\f\v"
_WS = re.compile(r"[ \t\r\n\f\v]+")
_COMMENT_EDGE = re.compile(r"/\*|\*/")
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
# Blanks (whitespace, line comments), then the opening of one token. A block comment is
# a token opening here because its end needs counting (comments nest).
_TOKEN = re.compile(
    r"[ \t\r\n\f\v]*+(?:--[^\n]*+[ \t\r\n\f\v]*+)*+"
    r"(?:(?P<ESTRING>[Ee]')"
    rf"|(?P<WORD>{ID_START}{ID_CHAR}*+)"
    r"|(?P<STRING>')"
    rf"|(?P<JUNK>(?>\$[0-9]+|{_NUMBER})(?={ID_CHAR})(?:{ID_CHAR}|\.)*+)"
    rf"|(?P<NUMBER>{_NUMBER})"
    r"|(?P<PARAM>\$[0-9]+|\?)"
    rf"|(?P<DOLLAR>\$(?:{ID_START}{TAG_CHAR}*+)?\$)"
    r'|(?P<DQ>")'
    r"|(?P<CAST>::)"
    r"|(?P<COMMENT>/\*)"
    r"|(?P<BT>`)"
    r"|(?P<OP>[\s\S])"
    r")?"
)
_WORD_RE = re.compile(rf"{ID_START}{ID_CHAR}*")

# literal_runs: the same rules, as one regex per literal. A run is the text between two
# literals: blanks, words (not an E'…' opening), junk, placeholders and operators, but no
# comment (a ``--`` or ``/*`` ends the run, so the caller falls back to tokenize). Every
# alternative is possessive and each character is read once. The literal after a run
# is matched up to its opening only; its body is found with str.find (_quoted_end),
# which reads a megabyte literal some ten times faster than a regex character class.
# The operator class leaves out \x00, \x01 (which joins a shape key's pieces) and
# \x1c-\x1f (blank to str.split, an operator here): such text goes the slow way too.
_RUN = (
    r"(?:[ \t\r\n\f\v]++"
    rf"|(?![Ee]'){ID_START}{ID_CHAR}*+"
    rf"|(?>\$[0-9]+|{_NUMBER})(?={ID_CHAR})(?:{ID_CHAR}|\.)*+"
    r"|\$[0-9]++|\?"
    r"|[\x02-\x08\x0e-\x1b!#%&()*+,:;<=>@\[\\\]^{|}~\x7f]"
    r"|-(?!-)|/(?!\*)|\.(?![0-9])"
    rf"|\$(?!\$|{ID_START}{TAG_CHAR}*+\$)"
    r")*+"
)
_RUN_THEN_LITERAL = re.compile(
    rf"({_RUN})(?:(?P<NUMBER>{_NUMBER})|(?P<DOLLAR>\$(?:{ID_START}{TAG_CHAR}*+)?\$)"
    r"|(?P<QUOTE>[Ee]?'|\"|`)|(?P<END>\Z))"
)
_QUOTED = {"'": (STRING, "'", True), '"': (DQ, '"', False), "`": (BT, "`", False)}


def _comment_end(sql: str, pos: int) -> int:
    """``pos`` is at ``/*``: the index after its matching ``*/``, or -1 if none (nesting)."""
    depth = 0
    while True:
        m = _COMMENT_EDGE.search(sql, pos)
        if m is None:
            return -1
        pos = m.end()
        if m.group() == "/*":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos


def skip_blank(sql: str, pos: int = 0) -> int:
    """The index of the first non-blank character at or after ``pos``.

    Blank is whitespace and complete comments; an unterminated ``/*`` is not skipped
    (:func:`next_token` reports it as :data:`OPEN_COMMENT`).
    """
    n = len(sql)
    while pos < n:
        c = sql[pos]
        if c in _BLANK_CHARS:
            pos = _WS.match(sql, pos).end()  # type: ignore[union-attr]  # c is blank
        elif c == "-" and sql.startswith("--", pos):
            nl = sql.find("\n", pos)
            pos = n if nl < 0 else nl + 1
        elif c == "/" and sql.startswith("/*", pos):
            end = _comment_end(sql, pos)
            if end < 0:
                return pos
            pos = end
        else:
            break
    return pos


def _quoted_end(sql: str, pos: int, quote: str, backslashes: bool) -> int:
    """``pos`` is just after an opening ``quote``: the index after the closing one, or -1.

    One ``str.find`` per quote character of the body, whatever the escapes: a quote is
    escaped when an odd run of backslashes stands right before it (each backslash
    escapes the next character, and a run begins after a character that is not a
    backslash). Cube's driver escapes every ``"`` of a JSON payload as ``\\"``, so
    stepping from escape to escape would cost a Python step per JSON string. Linear:
    each backslash is counted once, in the run before the quote it precedes.
    """
    find = sql.find
    j = find(quote, pos)
    while j >= 0:
        if backslashes and sql[j - 1] == "\\":
            k = j - 1
            while sql[k - 1] == "\\":  # the opening quote ends every run
                k -= 1
            if (j - k) % 2:  # an escaped quote
                j = find(quote, j + 1)
                continue
        if sql.startswith(quote, j + 1):  # a doubled quote stands for one
            j = find(quote, j + 2)
            continue
        return j + 1
    return -1


def tokenize(sql: str, pos: int = 0, *, backticks: bool = True) -> Iterator[RawToken]:
    """Every token of ``sql`` from ``pos`` on, in order (see the module docstring).

    ``backticks=False`` reads `` ` `` as an operator, as PostgreSQL does.
    """
    match = _TOKEN.match
    find = sql.find
    n = len(sql)
    while True:
        m = match(sql, pos)
        kind = m.lastgroup  # type: ignore[union-attr]  # every part is optional
        if kind is None:  # only blanks were left
            return
        start = m.start(kind)  # type: ignore[union-attr]
        pos = m.end()  # type: ignore[union-attr]
        if kind in (STRING, ESTRING):
            pos = _quoted_end(sql, pos, "'", True)
        elif kind in (WORD, OP, NUMBER, PARAM, CAST):
            pass
        elif kind == "COMMENT":
            pos = _comment_end(sql, start)
            if pos >= 0:
                continue
            yield (OPEN_COMMENT, start, n)
            return
        elif kind == DOLLAR:
            tag = sql[start:pos]
            close = find(tag, pos)
            pos = -1 if close < 0 else close + len(tag)
        elif kind == DQ:
            pos = _quoted_end(sql, pos, '"', False)
        elif kind == BT:
            if backticks:
                pos = _quoted_end(sql, pos, "`", False)
            else:
                kind = OP
        if pos < 0:
            yield (UNTERMINATED, start, n)
            return
        yield (kind, start, pos)


def literal_runs(sql: str) -> tuple[list[str], list[str]] | None:
    """``sql`` cut at its literals: ``(pieces, literals)``, where ``pieces`` alternates the
    runs between literals with each literal's kind (run, kind, run, …, run) and
    ``literals`` holds the literal texts, with the kinds and ends :func:`tokenize` gives.

    ``None`` when a run holds a comment, an operator the scan leaves out (see ``_RUN``),
    or the text ends in an unterminated literal: then only :func:`tokenize` reads it.
    One regex match per literal instead of one Python step per token: the shape-keyed
    statement cache (``shapes.py``) calls it for every statement.
    """
    match = _RUN_THEN_LITERAL.match
    find = sql.find
    pieces: list[str] = []
    add = pieces.append
    literals: list[str] = []
    pos = 0
    while True:
        m = match(sql, pos)
        if m is None:
            return None
        start = m.end(1)
        add(sql[pos:start])
        kind = m.lastgroup
        end = m.end()
        if kind == "QUOTE":
            kind, quote, backslashes = _QUOTED[sql[end - 1]]
            if end - start == 2:
                kind = ESTRING
            close = find(quote, end)  # the usual body: no escape, no doubled quote
            if close > 0 and sql[close + 1 : close + 2] != quote and not (
                backslashes and find("\\", end, close) >= 0
            ):
                end = close + 1
            else:
                end = _quoted_end(sql, end, quote, backslashes)
        elif kind == DOLLAR:
            close = find(sql[start:end], end)
            end = -1 if close < 0 else close + end - start
        elif kind == "END":
            return pieces, literals
        if end < 0:
            return None
        add(kind)  # type: ignore[arg-type]  # a group name
        literals.append(sql[start:end])
        pos = end


def next_token(sql: str, pos: int, *, backticks: bool = True) -> RawToken | None:
    """The token at ``pos`` or after the blanks there; ``None`` at the end of the text."""
    return next(tokenize(sql, pos, backticks=backticks), None)


def strip_leading_comments(sql: str) -> str:
    """``sql`` without its leading whitespace and comments (nested ``/* */`` included)."""
    return sql[skip_blank(sql):]


def first_word(sql: str) -> str:
    """The first token if it is a word, lower-cased (ASCII); ``""`` otherwise.

    For routing and logging: ``first_word("/* x */ queue add …") == "queue"``.
    """
    pos = skip_blank(sql)
    m = _WORD_RE.match(sql, pos)
    if m is None:
        return ""
    word = m.group()
    return word.lower() if word.isascii() else word
