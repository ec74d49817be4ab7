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

``::`` and the type name after it become one ``CAST`` token (``$1::int8``). A statement
parsed as a template (:class:`ShapeText`) gets its literals as :class:`LiftedToken` s,
numbered in text order as ``shapes.py`` numbers them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lark.common import LexerConf
from lark.lexer import Lexer, LexerState, Token

from cubequeue.grammar import tokens as t
from cubequeue.grammar.placeholders import ParamToken, Placeholders

__all__ = ["DialectLexer", "LiftedToken", "ShapeText"]

_OPS = {"-": "MINUS", ";": "_SEMI"}
#: terminals a word never stands for (the tokenizer's kinds and diagnostics' probes)
_NOT_KEYWORDS = frozenset(
    (t.STRING, t.ESTRING, t.DQ, t.BT, t.DOLLAR, t.NUMBER, t.WORD, t.PARAM, t.CAST, "MINUS", "SLOT_IDENT", "SLOT_STRING", "SLOT_NUMBER")
)


def _keyword(accepts: Any, upper: str) -> str:
    """The terminal an ASCII word stands for where the parser's actions are ``accepts``."""
    if upper in accepts and upper not in _NOT_KEYWORDS:
        return upper
    if "_" + upper in accepts and upper != "SEMI":
        return "_" + upper
    return t.WORD


class ShapeText(str):
    """Statement text to parse as a template: its literals become :class:`LiftedToken`."""

    __slots__ = ()


class LiftedToken(Token):
    """A literal of a statement parsed as a template: ``ordinal`` numbers it among the literals."""

    __slots__ = ("ordinal",)
    ordinal: int


class DialectLexer(Lexer):
    """Contextual keywords over :func:`dialect_tokens` (see the module docstring)."""

    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        # The keywords are the parser's: a word ``add`` is ``_ADD`` or ``ADD`` there. A
        # keyword found in a parser state is memoised per (state, upper-cased word); a
        # value word is not, so the memo stays within the grammar's states × keywords.
        self._keywords: dict[tuple[Any, str], str] = {}

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:
        text: Any = lexer_state.text
        if not isinstance(text, str):  # Lark 1.3 wraps the text in a TextSlice
            if not text.is_complete_text():
                raise TypeError("DialectLexer lexes whole statements, not text slices")
            text = text.text
        if not isinstance(text, str):
            raise TypeError("DialectLexer lexes str only")
        return self._tokens(text, parser_state)

    def _tokens(self, text: str, parser_state: Any) -> Iterator[Token]:
        lifted = 0 if isinstance(text, ShapeText) else -1
        placeholders: Placeholders | None = None
        states = parser_state.parse_conf.parse_table.states
        keywords = self._keywords
        literal_kinds = t.LITERAL_KINDS
        stream = t.tokenize(text)
        for kind, start, end in stream:
            if kind == t.WORD:
                value = text[start:end]
                if value.isascii():
                    state = parser_state.position
                    upper = value.upper()
                    kind = keywords.get((state, upper), "")
                    if not kind:
                        kind = _keyword(states[state], upper)
                        if kind != t.WORD:
                            keywords[(state, upper)] = kind
                yield Token(kind, value, start)
            elif kind in literal_kinds:
                if lifted < 0:
                    yield Token(kind, text[start:end], start)
                    continue
                lift = LiftedToken(kind, "", start)
                lift.ordinal = lifted
                lifted += 1
                yield lift
            elif kind == t.PARAM:
                if placeholders is None:
                    placeholders = Placeholders()
                param = ParamToken(kind, text[start:end], start)
                param.placeholders = placeholders
                yield param
            elif kind == t.CAST:  # "::" and the type name, as one token
                name = next(stream, None)
                if name is None or name[0] != t.WORD:
                    yield Token(t.OP, "::", start)
                    return  # no rule takes it: the parse ends here
                yield Token(kind, "::" + text[name[1] : name[2]], start)
            else:
                yield Token(_OPS.get(text[start], t.OP) if kind == t.OP else kind, text[start:end], start)
