"""Lark's exceptions → one 42601 :class:`SyntaxError` with Cube Store's wording.

No Lark exception ever leaves the grammar package. The message says where the error is
(``at Line: L, Column: C``, 1-based, sqlparser's wording of ``docs/dialect.md`` §1.7) and
names the offending token; ``position`` is the 1-based character offset (ErrorResponse
field P).

Before the generic text, the statement head is inspected to give the specific messages the
contract quotes (§1.1, §4.7, §5.1): ``Unknown queue command: foo``,
``Unknown cache command: …, available: SET|GET|KEYS|INCR|REMOVE|TRUNCATE|PURGE`` (Cube
Store's list says ``INC``, which it refuses, and has no PURGE: the list is built from the
commands the grammar takes, issue 27),
``Unknown cachestore command``, ``Unknown system command`` and
``Invalid token: <token>, expected Word (command)``. This runs only on the error path, so
valid statements pay nothing for it.

Two hints help a psql user act on the error (PostgreSQL's field H; the message keeps
Cube Store's wording): an unknown command names the nearest known one
(``did you mean ADD?``, by :func:`difflib.get_close_matches`), and a path or key written
without quotes (``CACHE GET c:k``: the word ends at ``:``) is shown quoted.

The generic text names what the failing *slot* takes in sqlparser's words, as the contract
quotes them (§1.3, §3.4, §8 rule 10): ``Expected: identifier`` for an IDENT / IDENT-P slot
(paths, prefixes, cache keys), ``Expected: literal string`` for a STR / STR-P slot
(payloads, values, ACK's result, MERGE_EXTRA's JSON, EXTERNAL_ID's value) and
``Expected: literal number`` for an INT slot and for a queue key (QKEY: anything that is
not a word or a quoted string is parsed as INT(id)). Optional keywords that could also
come there are not listed, as sqlparser would not list them. The slot is found with
Lark's public interactive parser, which the exception carries: a copy of the failed parse
is fed each of ``queue.lark``'s never-lexed ``SLOT_*`` terminals in turn, and the one it
takes names the slot (the end of input, when it takes that instead). Feeding a token
first completes the reductions the failing token did not trigger, so this is right even
where LALR merged a value's last state across every place the value is used.
"""

from __future__ import annotations

import difflib
import re

from lark import Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cubequeue.grammar import tokens as t
from cubequeue.grammar.errors import QueueError, SyntaxError

__all__ = ["from_lark"]

_QUEUE_COMMANDS = frozenset(
    [
        "add",
        "add_and_retrieve",
        "retrieve",
        "ack",
        "cancel",
        "get",
        "heartbeat",
        "merge_extra",
        "list",
        "pending",
        "active",
        "to_cancel",
        "stalled",
        "orphaned",
        "result",
        "result_blocking",
        "truncate",
        "purge",
    ]
)
#: in the order the "available:" list gives them (Cube Store's, with PURGE added)
_CACHE_ORDER = ("set", "get", "keys", "incr", "remove", "truncate", "purge")
_CACHE_COMMANDS = frozenset(_CACHE_ORDER)
_CACHE_AVAILABLE = "|".join(c.upper() for c in _CACHE_ORDER)
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

IDENTIFIER = "identifier"
LITERAL_STRING = "literal string"
LITERAL_NUMBER = "literal number"

#: the never-lexed terminal each kind of value slot takes, and its wording (§1.3)
_SLOT_PROBES = (
    ("SLOT_IDENT", IDENTIFIER),
    ("SLOT_STRING", LITERAL_STRING),
    ("SLOT_NUMBER", LITERAL_NUMBER),
)


def _slot_wording(exc: UnexpectedInput) -> str | None:
    """What the statement needed where it failed, or ``None`` if no value slot is next.

    A probe that runs into a range or duplicate-option error (the statement has that
    error as well) raises it.
    """
    parser = getattr(exc, "interactive_parser", None)
    if parser is None:
        return None
    for terminal, wording in _SLOT_PROBES:
        try:
            parser.copy(deepcopy_values=False).feed_token(Token(terminal, ""))
        except UnexpectedInput:
            continue
        return wording
    try:
        parser.copy(deepcopy_values=False).feed_eof()
    except UnexpectedInput:
        return None
    return "end of statement"


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


def _token_at(sql: str, pos: int) -> tuple[str, int, str]:
    """The token at (or after blanks from) ``pos``: (text, start, kind)."""
    tok = t.next_token(sql, pos)
    if tok is None:
        return "", len(sql.rstrip()), "$END"
    kind, start, end = tok
    return sql[start:end], start, kind


def _error(message: str, sql: str, pos: int, hint: str | None = None) -> SyntaxError:
    return SyntaxError(message, position=pos + 1, hint=hint)


def _nearest(word: str, known: frozenset[str]) -> str | None:
    """``did you mean ADD?`` for a misspelt command word, or ``None`` if none is close."""
    close = difflib.get_close_matches(word, sorted(known), n=1)
    return f"did you mean {close[0].upper()}?" if close else None


#: an unquoted path: word characters, then ``:`` and anything up to a blank or quote
_UNQUOTED_PATH = re.compile(r"[A-Za-z0-9_]+(?::[^\s'\"`;]*)+")


def _quote_hint(sql: str, pos: int) -> str | None:
    """For a ``:`` found right after a word: that word and what follows, quoted."""
    start = pos
    while start > 0 and (sql[start - 1].isalnum() or sql[start - 1] == "_"):
        start -= 1
    m = _UNQUOTED_PATH.match(sql, start)
    if start == pos or m is None:
        return None
    path = m.group()
    if len(path) > _MAX_SHOWN:
        return "paths and keys are string literals: quote them ('prefix:key')"
    return f"paths and keys are string literals: write '{path}'"


def _head_error(sql: str) -> SyntaxError | None:
    """The contract's specific messages for an unknown or missing command word."""
    first, pos, kind = _token_at(sql, 0)
    group = first.lower()
    if kind != t.WORD or group not in ("queue", "cache", "sys"):
        return None
    second, pos2, kind2 = _token_at(sql, pos + len(first))
    word = second.lower()
    if kind2 != t.WORD:
        if group == "sys":
            return _error("Unknown system command", sql, pos2)
        return _error(f"Invalid token: {_shown(second)}, expected Word (command)", sql, pos2)
    if group == "queue" and word not in _QUEUE_COMMANDS:
        return _error(f"Unknown queue command: {word}", sql, pos2, _nearest(word, _QUEUE_COMMANDS))
    if group == "cache" and word not in _CACHE_COMMANDS:
        return _error(
            f"Unknown cache command: {word}, available: {_CACHE_AVAILABLE}",
            sql,
            pos2,
            _nearest(word, _CACHE_COMMANDS),
        )
    if group == "sys":
        if word == "cachestore":
            third, pos3, _kind = _token_at(sql, pos2 + len(second))
            if third.lower() not in _CACHESTORE_COMMANDS:
                hint = _nearest(third.lower(), _CACHESTORE_COMMANDS)
                return _error("Unknown cachestore command", sql, pos3, hint)
        elif word != "clock":
            return _error("Unknown system command", sql, pos2)
    return None


def _expected(names: set[str] | frozenset[str]) -> str:
    shown = sorted({_FRIENDLY.get(n, n.lstrip("_")) for n in names if not n.startswith("SLOT_")})
    return " or ".join(shown) if shown else "nothing"


def from_lark(sql: str, exc: LarkError) -> QueueError:
    """Translate a Lark failure on ``sql`` into the dialect's 42601 error."""
    head = _head_error(sql)
    if head is not None:
        return head
    expected: set[str] = set()
    if isinstance(exc, UnexpectedToken):
        expected = set(exc.expected)
        if exc.token.type == "$END":
            found, pos, kind = "", len(sql.rstrip()), "$END"
        else:
            found, pos, kind = _token_at(sql, exc.token.start_pos or 0)
    elif isinstance(exc, UnexpectedCharacters):
        expected = set(exc.allowed or ())
        found, pos, kind = _token_at(sql, exc.pos_in_stream or 0)
    elif isinstance(exc, UnexpectedInput):
        found, pos, kind = _token_at(sql, exc.pos_in_stream or 0)
    else:  # pragma: no cover - Lark raises only UnexpectedInput while parsing
        return SyntaxError(f"syntax error: {exc}")
    line, col = _line_col(sql, pos)
    if kind == t.UNTERMINATED:
        return _error(
            f"Unterminated string literal, found: {_shown(found)} at Line: {line}, Column: {col}",
            sql,
            pos,
        )
    if kind == t.OPEN_COMMENT:
        return _error(
            f"Unterminated comment, found: {_shown(found)} at Line: {line}, Column: {col}",
            sql,
            pos,
        )
    try:
        what = _slot_wording(exc) if isinstance(exc, UnexpectedInput) else None
    except QueueError as probed:
        return probed
    if what is None:
        what = "end of statement" if expected & _END else _expected(expected)
    hint = _quote_hint(sql, pos) if found == ":" else None
    return _error(
        f"Expected: {what}, found: {_shown(found)} at Line: {line}, Column: {col}", sql, pos, hint
    )
