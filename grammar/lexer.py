"""The Lark lexer of ``queue.lark``: the one tokenizer (``tokens.py``), keywords in context.

Lark runs it through its public custom-lexer interface (``Lark(parser="lalr",
lexer=DialectLexer)``, ``__future_interface__ = 2``: :meth:`DialectLexer.lex` gets the
lexer state and the parser state). Tokens are made with Lark's public ``Token``
constructor.

A word is a keyword only where the grammar takes that keyword next, and a value
elsewhere (``CACHE SET k ttl`` sets the value ``ttl``; ``docs/dialect.md`` §8 rule 12),
which is what Lark's own contextual lexer does: the terminals the parser accepts in its
current state are the keys of the parser state's action table, the table
``InteractiveParser.choices()`` returns. Keywords are ASCII and case-insensitive; a
quoted word is never a keyword.

:func:`dialect_tokens` is the token stream both the parser and the shape-keyed cache
(``shapes.py``) read, so they agree on where each literal is: it joins ``::`` with its
type name into one ``CAST`` token, and turns a number or ``$n`` running into a word
(``5abc``) into one ``JUNK`` token, which no rule takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lark.common import LexerConf
from lark.lexer import Lexer, LexerState, Token
from lark.utils import TextSlice

from cubequeue.grammar import tokens as t
from cubequeue.grammar.placeholders import ParamToken, Placeholders

__all__ = ["JUNK", "DialectLexer", "LiftedToken", "ShapeText", "dialect_tokens", "next_dialect_token"]

#: a token no rule takes (a number or placeholder running into a word)
JUNK = "JUNK"
_ID_CHAR = re.compile(t.ID_CHAR)
_JUNK_TAIL = re.compile(r"[0-9A-Za-z_.$]*")
_OPS = {"-": "MINUS", ";": "_SEMI"}
_CAST_NAME = re.compile(rf"{t.ID_START}{t.ID_CHAR}*\Z")
#: terminals a word never stands for (the tokenizer's kinds and diagnostics' probes)
_NOT_KEYWORDS = frozenset(
    (t.STRING, t.ESTRING, t.DQ, t.BT, t.DOLLAR, t.NUMBER, t.WORD, t.PARAM, t.CAST, "MINUS")
    + ("SLOT_IDENT", "SLOT_STRING", "SLOT_NUMBER")
)


def next_dialect_token(sql: str, pos: int) -> t.RawToken | None:
    """The dialect's token at ``pos`` or after the blanks there (``None`` at the end)."""
    tok = t.next_token(sql, pos)
    if tok is None:
        return None
    kind, start, end = tok
    if kind == t.NUMBER or kind == t.PARAM:
        if _ID_CHAR.match(sql, end):
            return (JUNK, start, _JUNK_TAIL.match(sql, end).end())  # type: ignore[union-attr]  # a star
    elif kind == t.CAST:
        name = t.next_token(sql, end)
        if name is None or name[0] != t.WORD:
            return (t.OP, start, start + 1)
        return (t.CAST, start, name[2])
    elif kind == t.OP:
        return (_OPS.get(sql[start], t.OP), start, end)
    return tok


def dialect_tokens(sql: str) -> Iterator[t.RawToken]:
    """The dialect's tokens of ``sql``: :func:`tokens.tokenize`, with casts and junk joined."""
    pos = 0
    while True:
        tok = next_dialect_token(sql, pos)
        if tok is None:
            return
        yield tok
        pos = tok[2]


class ShapeText(str):
    """Statement text to parse as a template: its literals become :class:`LiftedToken`."""

    __slots__ = ()


class LiftedToken(Token):
    """A literal of a statement parsed as a template: ``index`` is its literal ordinal."""

    __slots__ = ("index",)
    index: int


def _accepts(parser_state: Any) -> Any:
    """The terminals (and rules) the parser takes in its current state, as keys."""
    return parser_state.parse_conf.parse_table.states[parser_state.position]


class DialectLexer(Lexer):
    """Contextual keywords over :func:`dialect_tokens` (see the module docstring)."""

    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        pass  # the keywords are the parser's: a word ``add`` is ``_ADD`` or ``ADD`` there

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:
        text: Any = lexer_state.text
        if isinstance(text, TextSlice):
            if not text.is_complete_text():  # type: ignore[no-untyped-call]
                raise TypeError("DialectLexer lexes whole statements, not text slices")
            text = text.text
        if not isinstance(text, str):
            raise TypeError("DialectLexer lexes str only")
        return self._tokens(text, parser_state)

    def _tokens(self, text: str, parser_state: Any) -> Iterator[Token]:
        lifted = 0 if isinstance(text, ShapeText) else -1
        placeholders: Placeholders | None = None
        for kind, start, end in dialect_tokens(text):
            value = text[start:end]
            if kind == t.WORD:
                if value.isascii():
                    accepts = _accepts(parser_state)
                    upper = value.upper()
                    if upper in accepts and upper not in _NOT_KEYWORDS:
                        kind = upper
                    elif "_" + upper in accepts and upper != "SEMI":
                        kind = "_" + upper
            elif kind == t.CAST:  # "::" and the type name, without what lies between
                value = "::" + _CAST_NAME.search(value).group()  # type: ignore[union-attr]
            elif kind == t.PARAM:
                if placeholders is None:
                    placeholders = Placeholders()
                tok = ParamToken(kind, value, start_pos=start, end_pos=end)
                tok.placeholders = placeholders
                yield tok
                continue
            elif lifted >= 0 and kind in t.LITERAL_KINDS:
                lift = LiftedToken(kind, "", start_pos=start, end_pos=end)
                lift.index = lifted
                lifted += 1
                yield lift
                continue
            yield Token(kind, value, start_pos=start, end_pos=end)
