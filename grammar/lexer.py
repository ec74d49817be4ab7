"""The lexer Lark runs for ``queue.lark``: one compiled regex per parser state.

Why not Lark's own contextual lexer: it costs several microseconds per token (a Python
loop over the scanner, a line counter fed with every token, whitespace lexed as tokens of
its own, an eight-field :class:`~lark.lexer.Token` built through ``*args/**kwargs``),
and a typical QUEUE ADD spent ~9 µs per token in it and the parser (issue 3, "Speed").
This lexer keeps Lark's contextual behaviour exactly and does the work in one
``re.match`` per token:

* per LALR state, the terminals that state accepts, in Lark's own precedence order
  (priority, then longest possible match, then pattern length, then name), joined as
  named alternatives, as Lark's ``Scanner`` does (the *exact* regex of the state);
* the ignored terminals (whitespace and comments) folded in front as one possessive
  ``(?:WS|LINE_COMMENT|BLOCK_COMMENT)*+``, so they never become tokens. That is the same
  as Lark's alternation because no kept terminal of the grammar can match where an
  ignored one starts (none begins with white space, ``--`` or ``/*``);
* the *fast* regex of a state, which :class:`~cubequeue.grammar.driver.Driver` uses,
  matches a short quoted literal whole but a long one only up to its opening; the end
  is then found with ``str.find`` (:data:`_DELIMITED`), and whenever that cannot decide
  (a backslash, no closing quote) the exact regex is matched instead;
* tokens carry ``type``, ``value``, ``start_pos`` and ``end_pos``; ``line`` and
  ``column`` are left ``None`` (``diagnostics.py`` works them out from the text for
  messages; only the error tokens this lexer raises get them);
* a statement with placeholders gets one :class:`Placeholders`, which every ``PARAM``
  token carries (see ``placeholders.py``).

Errors are Lark's, exactly as its contextual lexer raises them: when no terminal the
state accepts matches, the text is matched against every terminal; a match is an
:class:`~lark.exceptions.UnexpectedToken` (a token that exists but is not allowed here),
otherwise an :class:`~lark.exceptions.UnexpectedCharacters`, both listing what the state
allows. ``tests/grammar/test_grammar_lexer.py`` compares token streams and errors with
Lark's contextual lexer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lark.common import LexerConf
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import Lexer, LexerState, TerminalDef, Token
from lark.utils import TextSlice

from cubequeue.grammar.placeholders import ParamToken, Placeholders

__all__ = ["Finisher", "Matcher", "StatementLexer", "make_param_token", "make_token"]

#: ``pattern.match`` of a state's compiled regex
Matcher = Callable[[str, int], "re.Match[str] | None"]

_new_str = str.__new__
#: what Lark's contextual lexer reports as allowed in a state that takes no terminal
_END_ONLY = frozenset(("<END-OF-FILE>",))


def make_token(kind: str, value: str, start: int) -> Token:
    """A :class:`Token` built without ``Token.__new__``'s ``*args/**kwargs`` dispatch."""
    tok = _new_str(Token, value)
    tok.type = kind
    tok.value = value
    tok.start_pos = start
    tok.end_pos = start + len(value)
    tok.line = tok.column = tok.end_line = tok.end_column = None
    return tok


def make_param_token(value: str, start: int, placeholders: Placeholders) -> ParamToken:
    tok = _new_str(ParamToken, value)
    tok.type = "PARAM"
    tok.value = value
    tok.start_pos = start
    tok.end_pos = start + len(value)
    tok.line = tok.column = tok.end_line = tok.end_column = None
    tok.placeholders = placeholders
    return tok


#: ``finish(text, end_of_opening, opening) -> end of the token``, or -1 when the complete
#: terminal regex has to decide (it may still match, or fail)
Finisher = Callable[[str, int, str], int]


def _quoted(quote: str, backslash_escapes: bool) -> Finisher:
    r"""End of a ``quote``-delimited body where a doubled quote stands for one.

    Equals the possessive regex body ``[^Q\]*+(?:(?:\[\s\S]|QQ)[^Q\]*+)*+Q`` (without
    the backslash parts when there are no backslash escapes): the first lone quote ends
    it, and a pair is consumed whole even when it is the last thing in the text. With
    a backslash in the body it gives up (-1), and the regex scans it.
    """

    def finish(text: str, i: int, opening: str) -> int:
        while True:
            j = text.find(quote, i)
            if j < 0 or (backslash_escapes and text.find("\\", i, j) >= 0):
                return -1
            if text.startswith(quote, j + 1):
                i = j + 2
                continue
            return j + 1

    return finish


def _dollar(text: str, i: int, opening: str) -> int:
    r"""``$tag$…$tag$``: the lazy ``[\s\S]*?`` ends at the first closing ``$tag$``."""
    j = text.find(opening, i)
    return -1 if j < 0 else j + len(opening)


@dataclass(frozen=True)
class _Delimited:
    """How the fast regexes match a literal terminal (see :data:`_DELIMITED`)."""

    #: the terminal's regex must be some opening followed by exactly this body
    body: str
    #: a body regex for short, plain literals, tried right after the opening; when it
    #: matches, it ends where ``body`` would (no finisher call needed)
    short: str | None
    finish: Finisher


#: Literal terminals, whose bodies ``re`` scans at ~16 ns a character where ``str.find``
#: takes a fraction of that (a 3000-byte payload: ~35 µs → ~15 µs per statement; a
#: 64 MB one: a second → tens of milliseconds). A fast regex tries the terminal as
#: opening + ``short`` first (group ``NAME``), then the opening alone (group
#: ``NAME__open``), after which ``finish`` finds the end, or the complete regexes decide.
#: A terminal whose regex is not opening + ``body`` is matched by regex like any other.
_DELIMITED: dict[str, _Delimited] = {
    "STRING": _Delimited(
        r"[^'\\]*+(?:(?:\\[\s\S]|'')[^'\\]*+)*+'", r"[^'\\]{0,64}+'(?!')", _quoted("'", True)
    ),
    "ESTRING": _Delimited(
        r"[^'\\]*+(?:(?:\\[\s\S]|'')[^'\\]*+)*+'", r"[^'\\]{0,64}+'(?!')", _quoted("'", True)
    ),
    "DQ": _Delimited(r'[^"]*+(?:""[^"]*+)*+"', r'[^"]{0,64}+"(?!")', _quoted('"', False)),
    "BT": _Delimited(r"[^`]*+(?:``[^`]*+)*+`", r"[^`]{0,64}+`(?!`)", _quoted("`", False)),
    # no short form: the opening holds the named group dollar_tag, which can occur once
    "DOLLAR": _Delimited(r"[\s\S]*?\$(?P=dollar_tag)\$", None, _dollar),
}
#: suffix of the group that matched only a literal's opening
OPEN = "__open"


def _lark_order(t: TerminalDef) -> tuple[int, int, int, str]:
    """The precedence of Lark's ``BasicLexer`` (first matching alternative wins)."""
    return (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset ``pos``, as Lark's line counter has them."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


class StatementLexer(Lexer):
    """Contextual lexer with one regex per LALR state (see the module docstring)."""

    #: Lark passes (lexer_state, parser_state) to :meth:`lex`, and uses this class as is
    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        terminals = sorted(conf.terminals, key=_lark_order)
        self.terminals_by_name: dict[str, TerminalDef] = dict(conf.terminals_by_name)
        self._regexps = [(t.name, t.pattern.to_regexp()) for t in terminals]
        self._ignore = frozenset(conf.ignore)
        skipped = "|".join(rx for name, rx in self._regexps if name in self._ignore)
        self._skip_source = f"(?:{skipped})*+" if skipped else ""
        #: whitespace and comments, as the grammar ignores them
        self.skip = re.compile(self._skip_source)
        #: ``NAME__open`` group → (terminal name, finisher), for the fast regexes
        self.finishers: dict[str, tuple[str, Finisher]] = {}
        self._fast: dict[str, str] = {}  # terminal → its alternatives in a fast regex
        for name, rx in self._regexps:
            literal = _DELIMITED.get(name)
            if literal is None or not rx.endswith(literal.body) or rx == literal.body:
                continue
            opening = rx[: -len(literal.body)]
            alternatives = f"(?P<{name}{OPEN}>{opening})"
            if literal.short is not None:
                alternatives = f"(?P<{name}>{opening}{literal.short})|{alternatives}"
            self._fast[name] = alternatives
            self.finishers[name + OPEN] = (name, literal.finish)
        self._compiled: dict[tuple[frozenset[str], bool], re.Pattern[str]] = {}
        self._accepts: dict[int, frozenset[str]] = {}
        #: parser state → the match function of its fast regex (delimited terminals
        #: matched up to their opening only; filled by :meth:`prepare` or on first use)
        self.matchers: dict[int, Matcher] = {}
        self._exact: dict[int, Matcher] = {}
        self._root = self._compile(frozenset(self.terminals_by_name) - self._ignore, False)

    # ---- per-state regexes -----------------------------------------------------------
    def _compile(self, accepts: frozenset[str], fast: bool) -> re.Pattern[str]:
        pattern = self._compiled.get((accepts, fast))
        if pattern is None:
            special = self._fast if fast else {}
            alternatives = "|".join(
                special.get(name) or f"(?P<{name}>{rx})"
                for name, rx in self._regexps
                if name in accepts
            )
            pattern = re.compile(f"{self._skip_source}(?:{alternatives or '(?!)'})")
            self._compiled[accepts, fast] = pattern
        return pattern

    def bind_state(self, state: int, actions: Mapping[str, object]) -> Matcher:
        """Compile (or reuse) the fast regex for an LALR state with these ``actions``."""
        accepts = frozenset(a for a in actions if a in self.terminals_by_name) - self._ignore
        self._accepts[state] = accepts
        match = self.matchers[state] = self._compile(accepts, True).match
        return match

    def exact(self, state: int) -> Matcher:
        """The state's regex with every terminal complete: Lark's own alternation.

        Compiled on first use: it is needed only when a finisher cannot decide (a
        backslash in a ``'…'`` string, an unterminated literal) and by :meth:`tokens`.
        """
        match = self._exact.get(state)
        if match is None:
            match = self._exact[state] = self._compile(self._accepts[state], False).match
        return match

    def prepare(self, states: Mapping[int, Mapping[str, object]]) -> None:
        """Build every state's fast regex now (``states``: the parse table's)."""
        for state, actions in states.items():
            if state not in self.matchers:
                self.bind_state(state, actions)

    # ---- Lark's Lexer interface ------------------------------------------------------
    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:
        """Lark's entry point: tokens of the whole text, lexed in the parser's state."""
        text: Any = lexer_state.text
        if isinstance(text, TextSlice):
            if not text.is_complete_text():  # type: ignore[no-untyped-call]
                raise TypeError("StatementLexer lexes whole statements, not text slices")
            text = text.text
        if not isinstance(text, str):
            raise TypeError("StatementLexer lexes str only")
        return self.tokens(text, parser_state)

    def tokens(
        self, text: str, parser_state: Any, found: list[Placeholders] | None = None
    ) -> Iterator[Token]:
        """Tokens of ``text``, each lexed in the state ``parser_state`` is in by then.

        The statement's :class:`Placeholders`, if it has any, is appended to ``found``
        (the caller checks the ``$n`` numbering for gaps once the parse is over).
        """
        stack: list[int] = parser_state.state_stack
        placeholders: Placeholders | None = None
        pos = 0
        state = stack[-1]
        last: Token | None = None
        while True:
            state = stack[-1]
            if state not in self._accepts:
                self.bind_state(state, parser_state.parse_conf.states[state])
            m = self.exact(state)(text, pos)
            if m is None:
                break
            kind: Any = m.lastgroup
            value = m.group(kind)
            pos = m.end()
            if kind == "PARAM":
                if placeholders is None:
                    placeholders = Placeholders()
                    if found is not None:
                        found.append(placeholders)
                last = make_param_token(value, pos - len(value), placeholders)
            else:
                last = make_token(kind, value, pos - len(value))
            yield last
        end = self.skip.match(text, pos).end()  # type: ignore[union-attr]  # a star always matches
        if end != len(text):
            raise self.error(text, end, state, parser_state, last)

    # ---- errors ----------------------------------------------------------------------
    def error(
        self, text: str, pos: int, state: int, parser_state: Any, last: Token | None
    ) -> UnexpectedInput:
        """What Lark's contextual lexer raises when nothing state ``state`` takes matches."""
        allowed = set(self._accepts[state] or _END_ONLY)
        line, column = line_col(text, pos)
        m = self._root.match(text, pos)
        if m is not None:
            kind: Any = m.lastgroup
            tok = make_token(kind, m.group(kind), pos)
            tok.line, tok.column = line, column
            return UnexpectedToken(  # type: ignore[no-untyped-call]
                tok,
                allowed,
                state=parser_state,
                token_history=[last] if last is not None else None,
                terminals_by_name=self.terminals_by_name,
            )
        return UnexpectedCharacters(  # type: ignore[no-untyped-call]
            text,
            pos,
            line,
            column,
            allowed=allowed,
            state=parser_state,
            token_history=[last] if last is not None else None,
            terminals_by_name=self.terminals_by_name,
        )
