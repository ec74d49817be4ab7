"""Lark's LALR tables and callbacks, run over :class:`StatementLexer` matches in one loop.

Why not ``Lark.parse``: per statement it builds a ``TextSlice``, a lexer state with a line
counter and a lexer thread, and per token it goes through a generator and
``ParserState.feed_token`` (with an ``assert`` that compares a ``Rule`` to an ``int`` and a
``Rule``-keyed callback lookup on every reduction). Together that was most of an
uncached QUEUE ADD's time (issue 3, "Speed"). This loop does the same steps with the
same data: the parse table Lark's LALR analyser built from ``queue.lark``, the callbacks
Lark made from the transformer given to the ``Lark`` constructor (child filtering
included), and the lexer's per-state regexes. It differs only in bookkeeping:

* a reduction is looked up as a ready ``(callback, size, rule name)`` tuple;
* a token whose terminal every rule filters out (``_QUEUE``, ``_ADD``, ``_SEMI``…) is
  pushed as its text: Lark's child filters drop it unread, so it never becomes a Token.

Errors are Lark's own exception types with the same contents ``Lark.parse`` gives
(``tests/grammar/test_grammar_lexer.py`` checks both paths against each other), so
``diagnostics.from_lark`` words them the same way. On top of that each carries, as
``diagnostics.EXPECTED_ATTR``, what the failing slot takes in sqlparser's words (worked
out from the state stack by ``diagnostics.SlotWording``; error path only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, UnexpectedToken
from lark.grammar import Terminal
from lark.parsers.lalr_analysis import Shift

from cubequeue.grammar.diagnostics import EXPECTED_ATTR, SlotWording
from cubequeue.grammar.lexer import Finisher, StatementLexer, make_param_token, make_token
from cubequeue.grammar.placeholders import Placeholders

__all__ = ["Driver"]

_new_str = str.__new__
# markers in Driver._kinds, compared with ``is`` (the dict holds these very objects)
_TOKEN = 1
_PARAM = 2

#: a state's action on a symbol: the next state (shift or goto), or a reduction
_Reduce = tuple[Callable[[list[Any]], Any], int, str]
_Action = int | _Reduce


class Driver:
    """``parse(text)`` with a built ``Lark(parser="lalr", lexer=StatementLexer)``."""

    def __init__(self, lark: Lark, start: str = "start") -> None:
        frontend = lark.parser
        lexer = frontend.lexer
        if not isinstance(lexer, StatementLexer):
            raise TypeError("the Lark instance must use StatementLexer")
        lalr = frontend.parser.parser  # lark.parsers.lalr_parser._Parser
        table = lalr.parse_table
        callbacks = lalr.callbacks
        states = table.states
        if sorted(states) != list(range(len(states))):
            raise TypeError("expected Lark's IntParseTable (states numbered 0..n-1)")
        self._lexer = lexer
        lexer.prepare(states)
        self._skip = lexer.skip.match
        self._finishers = lexer.finishers
        self._start: int = table.start_states[start]
        self._end: int = table.end_states[start]
        self._states = states
        self._slots = SlotWording(states, lark.rules, self._start, self._end)
        # Lists indexed by state: faster to index than dicts in the loop below. A
        # reduction is (callback, -size, rule name): the loop slices with -size.
        self._matchers = [lexer.matchers[state] for state in range(len(states))]
        self._actions: list[dict[str, _Action]] = [
            {
                symbol: arg
                if action is Shift
                else (callbacks[arg], -len(arg.expansion), arg.origin.name)
                for symbol, (action, arg) in states[state].items()
            }
            for state in range(len(states))
        ]
        # What the loop does with a match, by group name: nothing for a terminal every
        # rule filters out (absent), make a Token (_TOKEN) or a ParamToken (_PARAM) for
        # one some callback reads, or finish a literal whose opening alone matched
        # (a (terminal, finisher) pair; literal terminals are all read by callbacks).
        kept = {
            sym.name
            for rule in lark.rules
            for sym in rule.expansion
            if isinstance(sym, Terminal) and (rule.options.keep_all_tokens or not sym.filter_out)
        }
        self._kinds: dict[str, int | tuple[str, Finisher]] = {
            name: _PARAM if name == "PARAM" else _TOKEN for name in kept
        }
        for group, (name, finish) in lexer.finishers.items():
            if name not in kept:
                raise TypeError(f"literal terminal {name} is filtered out of every rule")
            self._kinds[group] = (name, finish)

    def parse(self, text: str) -> tuple[Any, Placeholders | None]:
        """The start rule's value for ``text``, and its placeholders (if it has any).

        Raises Lark's ``UnexpectedToken`` / ``UnexpectedCharacters``, or whatever a
        callback raises.
        """
        matchers = self._matchers
        actions = self._actions
        kinds = self._kinds
        state = self._start
        stack = [state]
        values: list[Any] = []
        push_state = stack.append
        push_value = values.append
        placeholders: Placeholders | None = None
        pos = 0
        n = len(text)
        last = 0  # start of the last token, as Lark's $END token borrows it
        while pos < n:
            m = matchers[state](text, pos)
            if m is None:
                end = self._skip(text, pos).end()  # type: ignore[union-attr]  # a star always matches
                if end == n:
                    break
                raise self._failed(self._lexer.error(text, end, state, None, None), stack)
            kind: Any = m.lastgroup
            how = kinds.get(kind)
            if how.__class__ is tuple:  # only the opening of a literal matched: find its end
                group = kind
                kind, finish = how
                end = finish(text, m.end(), m.group(group))
                if end >= 0:
                    value = text[m.start(group) : end]
                    pos = end
                else:  # the complete terminal regexes decide, as Lark's lexer would
                    m = self._lexer.exact(state)(text, pos)
                    if m is None:
                        end = self._skip(text, pos).end()  # type: ignore[union-attr]
                        raise self._failed(self._lexer.error(text, end, state, None, None), stack)
                    kind = m.lastgroup
                    value = m.group(kind)
                    pos = m.end()
                how = kinds.get(kind)
            else:
                value = m.group(kind)
                pos = m.end()
            last = pos - len(value)
            token: Any = value
            if how is _TOKEN:
                # make_token(), inlined: this is the hottest line of a parse
                token = _new_str(Token, value)
                token.type = kind
                token.value = value
                token.start_pos = last
                token.end_pos = pos
                token.line = token.column = token.end_line = token.end_column = None
            elif how is _PARAM:
                if placeholders is None:
                    placeholders = Placeholders()
                token = make_param_token(value, last, placeholders)
            while True:
                try:
                    action = actions[state][kind]
                except KeyError:
                    raise self._failed(
                        self._unexpected(state, make_token(kind, value, last)), stack
                    ) from None
                if action.__class__ is int:
                    state = action
                    push_state(state)
                    push_value(token)
                    break
                callback, size, origin = action  # type: ignore[misc]
                if size:
                    children = values[size:]
                    del stack[size:]
                    del values[size:]
                else:
                    children = []
                push_value(callback(children))
                state = actions[stack[-1]][origin]  # type: ignore[assignment]
                push_state(state)
        end_state = self._end
        while True:
            state = stack[-1]
            final = actions[state].get("$END")
            if final is None or final.__class__ is int:
                raise self._failed(self._unexpected(state, make_token("$END", "", last)), stack)
            callback, size, origin = final  # type: ignore[misc]
            if size:
                children = values[size:]
                del stack[size:]
                del values[size:]
            else:
                children = []
            push_value(callback(children))
            state = actions[stack[-1]][origin]  # type: ignore[assignment]
            push_state(state)
            if state == end_state:
                return values[-1], placeholders

    def _failed(self, exc: UnexpectedInput, stack: list[int]) -> UnexpectedInput:
        """``exc`` with the failing slot's wording attached (for ``diagnostics.from_lark``)."""
        setattr(exc, EXPECTED_ATTR, self._slots.expected(stack))
        return exc

    def _unexpected(self, state: int, token: Token) -> UnexpectedToken:
        """Lark's error for a token the state has no action on (as ``feed_token``)."""
        expected = {s for s in self._states[state] if s.isupper()}
        return UnexpectedToken(token, expected, state=state, interactive_parser=None)  # type: ignore[no-untyped-call]
