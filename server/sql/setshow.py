"""SET / RESET / SHOW, read with the small tokenizer of :mod:`.lexer`.

Forms and tags as PostgreSQL 15 ("SET", "RESET", "SHOW" reference pages): ``SET [SESSION |
LOCAL] name {TO | =} {value [, …] | DEFAULT}``, ``SET TIME ZONE``, ``SET SCHEMA``, ``SET
NAMES``, ``SET TRANSACTION …`` / ``SET SESSION CHARACTERISTICS AS TRANSACTION …`` (accepted:
the store is not transactional), ``RESET {name | ALL | TIME ZONE}``, ``SHOW {name | ALL |
TIME ZONE | TRANSACTION ISOLATION LEVEL | SESSION AUTHORIZATION}``.
"""

from __future__ import annotations

import re

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue
from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.pgtypes.oids import TEXT

from .errors import UndefinedObject
from .gucs import GUCS, canonical_name
from .lexer import Token
from .outcome import HINT, Notice, PlainOutcome
from .session import PlainSession

__all__ = ["TokenReader", "run_reset", "run_set", "run_show", "show_columns"]

_ALIASES = {"time zone": "TimeZone", "transaction isolation level": "transaction_isolation",
            "session authorization": "session_authorization"}
_TX_MODES = frozenset({"isolation", "level", "serializable", "repeatable", "read", "committed",
                       "uncommitted", "write", "only", "not", "deferrable"})


class TokenReader:
    """A cursor over one statement's tokens."""

    __slots__ = ("i", "sql", "tokens")

    def __init__(self, tokens: list[Token], sql: str) -> None:
        self.tokens, self.sql, self.i = tokens, sql, 0

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def accept(self, *words: str) -> bool:
        """Consume the next tokens when they are exactly ``words`` (lower-case words)."""
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None or t.value != w or t.kind not in ("word", "op"):
                return False
        self.i += len(words)
        return True

    def at_end(self) -> bool:
        return self.i >= len(self.tokens)

    def error(self) -> SqlSyntaxError:
        t = self.peek()
        if t is None:
            return SqlSyntaxError("syntax error at end of input", position=len(self.sql) + 1)
        near = self.sql[t.pos:].split(None, 1)[0] if self.sql[t.pos:].strip() else t.value
        return SqlSyntaxError(f'syntax error at or near "{near}"', position=t.pos + 1)

    def name(self) -> str:
        """A (possibly dotted) parameter name."""
        parts = []
        while True:
            t = self.peek()
            if t is None or t.kind not in ("word", "ident"):
                raise self.error()
            parts.append(t.value)
            self.i += 1
            if not self.accept("."):
                return ".".join(parts)

    def end(self) -> None:
        if not self.at_end():
            raise self.error()

    def tx_modes(self) -> None:
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.value not in _TX_MODES and t.value != ",":
                raise self.error()
            self.i += 1


def _values(r: TokenReader) -> list[str] | None:
    """The value list of SET; None for DEFAULT."""
    if r.accept("default"):
        r.end()
        return None
    out: list[str] = []
    while True:
        t = r.peek()
        if t is None:
            raise r.error()
        sign = ""
        if t.kind == "op" and t.value in "+-":
            sign, r.i = ("-" if t.value == "-" else ""), r.i + 1
            t = r.peek()
            if t is None or t.kind != "number":
                raise r.error()
        if t.kind not in ("word", "ident", "string", "number"):
            raise r.error()
        out.append(sign + t.value if t.kind == "number" else t.value)
        r.i += 1
        if not r.accept(","):
            r.end()
            return out


def _quote_list_item(v: str) -> str:
    return v if re.fullmatch(r"[a-z_][a-z0-9_$]*", v) else '"' + v.replace('"', '""') + '"'


def _join(name: str, values: list[str]) -> str:
    g = GUCS.get(name.lower())
    if len(values) == 1 and not (g is not None and g.name == "search_path"):
        return values[0]
    if g is None or not g.is_list:
        raise InvalidParameterValue(f"SET {canonical_name(name)} takes only one argument")
    if g.name == "search_path":
        return ", ".join(_quote_list_item(v) for v in values)
    return ", ".join(values)


def run_set(r: TokenReader, session: PlainSession) -> PlainOutcome:
    """After the SET keyword."""
    local = r.accept("local")
    if not local:
        r.accept("session")
    if r.accept("role") or r.accept("authorization") or r.accept("session", "authorization"):
        raise FeatureNotSupported("cubequeue does not support this statement: SET ROLE / SESSION AUTHORIZATION",
                                  hint=HINT)
    per_tx = r.accept("transaction")
    if per_tx or r.accept("characteristics", "as", "transaction"):
        r.tx_modes()
        notices = []
        if session.tx_status == "I" and per_tx:
            notices.append(Notice("WARNING", "25P01", "SET TRANSACTION can only be used in transaction blocks"))
        return PlainOutcome(None, "SET", notices)
    if r.accept("time", "zone"):
        name = "TimeZone"
        if r.accept("local"):
            r.end()
            values: list[str] | None = None
        else:
            values = _values(r)
    elif r.accept("schema"):
        name, values = "search_path", _values(r)
    elif r.accept("names"):
        name, values = "client_encoding", _values(r)
    else:
        name = r.name()
        if not (r.accept("=") or r.accept("to")):
            raise r.error()
        values = _values(r)
    value = None if values is None else _join(name, values)
    if local and session.tx_status == "I":
        session.check(name, value)  # no lasting effect outside a block, as PostgreSQL
        return PlainOutcome(None, "SET", [Notice("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks")])
    session.set(name, value, local=local)
    return PlainOutcome(None, "SET")


def run_reset(r: TokenReader, session: PlainSession) -> PlainOutcome:
    """After the RESET keyword."""
    if r.accept("all"):
        r.end()
        session.reset_all()
        return PlainOutcome(None, "RESET")
    name = next((canon for words, canon in _ALIASES.items() if r.accept(*words.split())), None)
    if name is None:
        name = r.name()
    r.end()
    session.reset(name)
    return PlainOutcome(None, "RESET")


def _show_target(r: TokenReader) -> str:
    if r.accept("all"):
        r.end()
        return "all"
    name = next((canon for words, canon in _ALIASES.items() if r.accept(*words.split())), None)
    if name is None:
        name = r.name()
    r.end()
    return name


def show_columns(r: TokenReader) -> tuple[Column, ...]:
    target = _show_target(r)
    if target == "all":
        return tuple(Column(n, ColumnType.STRING) for n in ("name", "setting", "description"))
    return (Column(canonical_name(target), ColumnType.STRING),)


def run_show(r: TokenReader, session: PlainSession) -> PlainOutcome:
    """After the SHOW keyword."""
    target = _show_target(r)
    if target == "all":
        names = sorted({canonical_name(k) for k in session.settings}, key=str.lower)
        rows = [(n, session.get(n) or "", GUCS[n.lower()].description if n.lower() in GUCS else "")
                for n in names]
        cols = tuple(Column(n, ColumnType.STRING) for n in ("name", "setting", "description"))
        return PlainOutcome(ResultSet(cols, list(rows)), "SHOW", type_oids=(TEXT,) * 3)
    value = session.get(target)
    if value is None:
        raise UndefinedObject(f'unrecognized configuration parameter "{target}"')
    cols = (Column(canonical_name(target), ColumnType.STRING),)
    return PlainOutcome(ResultSet(cols, [(value,)]), "SHOW", type_oids=(TEXT,))
