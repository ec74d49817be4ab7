"""Lark's exceptions → one 42601 :class:`SyntaxError` with Cube Store's wording.

No Lark exception ever leaves the grammar package (style.md, "grammar"). The message says
where the error is (``at Line: L, Column: C``, 1-based, sqlparser's wording of §1.7) and
names the offending token; ``position`` is the 1-based character offset (ErrorResponse
field P).

Before the generic text, the statement head is inspected to give the specific messages the
contract quotes (§1.1, §4.7, §5.1): ``Unknown queue command: foo``,
``Unknown cache command: …, available: SET|GET|KEYS|INC|REMOVE|TRUNCATE``,
``Unknown cachestore command``, ``Unknown system command`` and
``Invalid token: <token>, expected Word (command)``. This runs only on the error path, so
valid statements pay nothing for it.

The generic text names what the failing *slot* takes in sqlparser's words, as the contract
quotes them (§1.3, §3.4, §8 rule 10): ``Expected: identifier`` for an IDENT / IDENT-P slot
(paths, prefixes, cache keys), ``Expected: literal string`` for a STR / STR-P slot
(payloads, values, ACK's result, MERGE_EXTRA's JSON, EXTERNAL_ID's value) and
``Expected: literal number`` for an INT slot and for a queue key (QKEY: anything that is
not a word or a quoted string is parsed as INT(id)). Optional keywords that could also
come there are not listed, as sqlparser would not list them. :class:`SlotWording` finds
the slot from the LALR state stack the driver attaches to the exception
(:data:`EXPECTED_ATTR`), after finishing the reductions the failing token did not trigger:
LALR merges a value's last state across every place the value is used, so the state
itself may not say which slot comes next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cubequeue.grammar.errors import SyntaxError
from cubequeue.grammar.lexical import ID_CHAR, ID_START, TAG_CHAR

__all__ = ["EXPECTED_ATTR", "SKIP", "SlotWording", "from_lark"]

#: whitespace and comments, as the grammar ignores them
SKIP = re.compile(r"(?:[ \t\r\n\f\v]|--[^\n]*|/\*[\s\S]*?\*/)*+")
#: a complete quoted literal, exactly as queue.lark lexes it
_QUOTED = re.compile(
    r"[Ee]?'[^'\\]*+(?:(?:\\[\s\S]|'')[^'\\]*+)*+'"
    r'|"[^"]*+(?:""[^"]*+)*+"'
    r"|`[^`]*+(?:``[^`]*+)*+`"
    rf"|\$(?P<tag>(?:{ID_START}{TAG_CHAR}*)?)\$[\s\S]*?\$(?P=tag)\$"
)
#: the opening of a quoted literal (when _QUOTED fails here, it is unterminated)
_OPENING = re.compile(rf"[Ee]?'|\"|`|\$(?:{ID_START}{TAG_CHAR}*)?\$")
#: any other token, roughly as the lexer sees it (only used to name tokens in messages)
_OTHER = re.compile(
    rf"{ID_START}{ID_CHAR}*"
    r"|\$[0-9]+|[0-9.]+[A-Za-z0-9_.]*|::|[^ \t\r\n\f\v]"
)
_WORD = re.compile(rf"{ID_START}{ID_CHAR}*\Z")

_QUEUE_COMMANDS = frozenset(
    ["add", "add_and_retrieve", "retrieve", "ack", "cancel", "get", "heartbeat", "merge_extra", "list", "pending", "active", "to_cancel", "stalled", "orphaned", "result", "result_blocking", "truncate", "purge"]
)
_CACHE_COMMANDS = frozenset(["set", "get", "keys", "remove", "truncate", "incr", "purge"])
_CACHESTORE_COMMANDS = frozenset(["compaction", "persist", "healthcheck", "eviction", "info"])

_MAX_SHOWN = 40

_FRIENDLY = {
    "STRING": "literal string",
    "ESTRING": "literal string",
    "DQ": "identifier",
    "BT": "identifier",
    "DOLLAR": "literal string",
    "WORD": "identifier",
    "PARAM": "parameter",
    "NUMBER": "literal number",
    "MINUS": "-",
    "CAST": "::type",
    "_SEMI": ";",
    "$END": "end of statement",
    "<END-OF-FILE>": "end of statement",
}
_END = frozenset(("$END", "<END-OF-FILE>"))

#: the attribute the driver sets on a Lark exception: the failing slot's wording, or None
EXPECTED_ATTR = "cubequeue_expected"

IDENTIFIER = "identifier"
LITERAL_STRING = "literal string"
LITERAL_NUMBER = "literal number"

#: value rules of queue.lark whose slot kind does not depend on where they are used (§1.3)
_VALUE_RULES = {
    "key": LITERAL_NUMBER,  # QKEY: a non-word, non-string is parsed as INT(id)
    "result": LITERAL_STRING,  # ACK: NULL | STR-P (§3.4)
    "int": LITERAL_NUMBER,
    "add_int": LITERAL_NUMBER,
    "retrieve_int": LITERAL_NUMBER,
    "set_int": LITERAL_NUMBER,
    "add_ext_id": LITERAL_STRING,  # EXTERNAL_ID <STR>
    "result_ext_id": LITERAL_STRING,
}
#: ``text`` serves IDENT, IDENT-P, STR and STR-P: its kind by statement rule, in order of
#: appearance; a statement not listed takes one IDENT / IDENT-P (path, prefix or key)
_TEXT_SLOTS = {
    "queue_add": (IDENTIFIER, LITERAL_STRING),  # <IDENT-P:path> <STR-P:payload>
    "queue_add_and_retrieve": (IDENTIFIER, LITERAL_STRING),
    "queue_merge_extra": (LITERAL_STRING,),  # <QKEY> <STR:json>
    "cache_set": (IDENTIFIER, LITERAL_STRING),  # <IDENT-P:key> <STR-P:value>
}
_TEXT = "text"
_STATEMENT = re.compile(r"(?:queue|cache|sys)_")


class SlotWording:
    """Which slot a parse stopped at, from Lark's LALR table of ``queue.lark``.

    Built once per parser (a walk over the statement rules, well under a millisecond);
    consulted only when a parse fails.
    """

    __slots__ = ("_end", "_states", "_text_states")

    def __init__(
        self,
        states: dict[int, dict[str, tuple[Any, Any]]],
        rules: Sequence[Any],
        start: int,
        end: int,
    ) -> None:
        self._states = states
        self._end = end
        # the state where each ``text`` of each statement rule is expected: found by
        # shifting the rule's symbols from the start state (its closure holds every
        # statement rule; LALR states of different statements never merge here)
        text_states: dict[int, str] = {}
        for rule in rules:
            origin = rule.origin.name
            if not _STATEMENT.match(origin):
                continue
            kinds = iter(_TEXT_SLOTS.get(origin, (IDENTIFIER,)))
            state = start
            for symbol in rule.expansion:
                if symbol.name == _TEXT:
                    kind = next(kinds)
                    if text_states.setdefault(state, kind) != kind:
                        raise ValueError(f"queue.lark: state {state} is two kinds of text slot")
                state = states[state][symbol.name][1]
        self._text_states = text_states

    def expected(self, stack: Sequence[int]) -> str | None:
        """The wording for the slot after ``stack``, or ``None`` if no value slot is next.

        ``"end of statement"`` when the statement is complete. The reductions the failing
        token did not trigger are done first (every state of this grammar reduces by at
        most one rule, so this is unambiguous).
        """
        states = self._states
        stack = list(stack)
        for _ in range(256):  # a reduction chain is short; the cap only guards a cycle
            state = stack[-1]
            if state == self._end:
                return "end of statement"
            actions = states[state]
            if _TEXT in actions:
                return self._text_states.get(state)
            for name in actions:
                kind = _VALUE_RULES.get(name)
                if kind is not None:
                    return kind
            rules = {arg for action, arg in actions.values() if not isinstance(arg, int)}
            if len(rules) != 1:
                return "end of statement" if "$END" in actions else None
            rule = rules.pop()
            if rule.expansion:
                del stack[-len(rule.expansion) :]
            stack.append(states[stack[-1]][rule.origin.name][1])
        return None  # pragma: no cover - the grammar has no reduction cycle


def _shown(token: str) -> str:
    """Payloads can be megabytes: quote only the start of a long token."""
    if not token:
        return "EOF"
    if len(token) > _MAX_SHOWN:
        return token[:_MAX_SHOWN] + "…"
    return token


def _line_col(sql: str, pos: int) -> tuple[int, int]:
    line = sql.count("\n", 0, pos) + 1
    return line, pos - (sql.rfind("\n", 0, pos) + 1) + 1


def _token_at(sql: str, pos: int) -> tuple[str, int, bool]:
    """The token at (or after whitespace from) ``pos``: (text, start, unterminated)."""
    pos = SKIP.match(sql, pos).end()  # type: ignore[union-attr]  # a star always matches
    if pos >= len(sql):
        return "", len(sql.rstrip()), False
    m = _QUOTED.match(sql, pos)
    if m is not None:
        return m.group(0), pos, False
    if _OPENING.match(sql, pos):
        return sql[pos:], pos, True
    m = _OTHER.match(sql, pos)
    assert m is not None  # the last alternative matches any non-space character
    return m.group(0), pos, False


def _error(message: str, sql: str, pos: int) -> SyntaxError:
    return SyntaxError(message, position=pos + 1)


def _head_error(sql: str) -> SyntaxError | None:
    """The contract's specific messages for an unknown or missing command word."""
    first, pos, _ = _token_at(sql, 0)
    group = first.lower()
    if group not in ("queue", "cache", "sys"):
        return None
    second, pos2, _ = _token_at(sql, pos + len(first))
    word = second.lower()
    if not _WORD.match(second):
        if group == "sys":
            return _error("Unknown system command", sql, pos2)
        return _error(f"Invalid token: {_shown(second)}, expected Word (command)", sql, pos2)
    if group == "queue" and word not in _QUEUE_COMMANDS:
        return _error(f"Unknown queue command: {word}", sql, pos2)
    if group == "cache" and word not in _CACHE_COMMANDS:
        return _error(
            f"Unknown cache command: {word}, available: SET|GET|KEYS|INC|REMOVE|TRUNCATE",
            sql,
            pos2,
        )
    if group == "sys":
        if word == "cachestore":
            third, pos3, _ = _token_at(sql, pos2 + len(second))
            if third.lower() not in _CACHESTORE_COMMANDS:
                return _error("Unknown cachestore command", sql, pos3)
        elif word != "clock":
            return _error("Unknown system command", sql, pos2)
    return None


def _expected(names: set[str] | frozenset[str]) -> str:
    shown = sorted({_FRIENDLY.get(n, n.lstrip("_")) for n in names})
    return " or ".join(shown) if shown else "nothing"


def from_lark(sql: str, exc: LarkError) -> SyntaxError:
    """Translate a Lark failure on ``sql`` into the dialect's 42601 error."""
    head = _head_error(sql)
    if head is not None:
        return head
    expected: set[str] = set()
    if isinstance(exc, UnexpectedToken):
        expected = set(exc.expected)
        if exc.token.type == "$END":
            found, pos, open_quote = "", len(sql.rstrip()), False
        else:
            found, pos, open_quote = _token_at(sql, exc.token.start_pos or 0)
    elif isinstance(exc, UnexpectedCharacters):
        expected = set(exc.allowed or ())
        found, pos, open_quote = _token_at(sql, exc.pos_in_stream or 0)
    elif isinstance(exc, UnexpectedInput):
        found, pos, open_quote = _token_at(sql, exc.pos_in_stream or 0)
    else:  # pragma: no cover - Lark raises only UnexpectedInput while parsing
        return SyntaxError(f"syntax error: {exc}")
    line, col = _line_col(sql, pos)
    if open_quote:
        return _error(
            f"Unterminated string literal, found: {_shown(found)} at Line: {line}, Column: {col}",
            sql,
            pos,
        )
    what = getattr(exc, EXPECTED_ATTR, None)
    if what is None:
        what = "end of statement" if expected & _END else _expected(expected)
    return _error(
        f"Expected: {what}, found: {_shown(found)} at Line: {line}, Column: {col}", sql, pos
    )
