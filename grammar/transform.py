"""The inline Transformer: LALR reductions of ``queue.lark`` → command objects.

Lark calls one method per reduced rule (the method is named after the rule) while it
parses, so statements are built directly and no parse tree is kept.
Methods receive the rule's children as a list; filtered keywords (``_ADD``) never appear.

Option lists are left-recursive rules so that a repeated option is reported as soon as it
is reduced, in the text order Cube Store reports it (``docs/dialect.md`` §3.1, §8 rule 3).

The builder keeps no state between callbacks, so the one instance Lark holds serves every
parse, on any thread. A placeholder's per-statement state (``?`` numbering, ``$n``/``?``
mixing, types per index) comes with its ``PARAM`` token (``placeholders.py``).

A statement parsed as a template (``shapes.py``) has its literals lexed as
:class:`~cubequeue.grammar.lexer.LiftedToken`: their values become
:class:`~cubequeue.grammar.templates.Hole` s, filled from the literal text of each
statement of that shape with the very decoders and range checks used here.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CachestoreAction,
    CacheTruncate,
    Command,
    Param,
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueGet,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueuePurge,
    QueueResult,
    QueueResultBlocking,
    QueueRetrieve,
    QueueToCancel,
    QueueTruncate,
    Slot,
    StatusFilter,
    SysCachestore,
    SysClock,
)
from cubequeue.grammar.errors import SyntaxError
from cubequeue.grammar.lexer import LiftedToken
from cubequeue.grammar.lexical import TEXT_DECODERS, check_int_text
from cubequeue.grammar.placeholders import ParamToken
from cubequeue.grammar.templates import Hole

__all__ = ["CommandBuilder", "RawInt"]

# An integer slot's value before its name is known: (literal text, 1-based position).
RawInt = tuple[str, int]
# An option as reduced: (NAME, value, 1-based position of the keyword).
_Opt = tuple[str, Any, int]
_Opts = dict[str, Any]


_STATUS: dict[str, StatusFilter] = {"LIST": None, "PENDING": "pending", "ACTIVE": "active"}
_CACHESTORE_ACTIONS: dict[str, CachestoreAction] = {
    "COMPACTION": "compaction",
    "PERSIST": "persist",
    "HEALTHCHECK": "healthcheck",
    "EVICTION": "eviction",
    "INFO": "info",
    "WIPE": "wipe",
}


def _pos(tok: Token) -> int:
    return (tok.start_pos or 0) + 1


class CommandBuilder(Transformer[Token, Command]):
    """Callbacks for every rule of ``queue.lark``; see the module docstring."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)

    # ---- values ----------------------------------------------------------------------
    def ident(self, c: list[Token]) -> str | Param | Hole:
        tok = c[0]
        if tok.type == "PARAM":
            return _param(c, Slot.TEXT)
        if tok.__class__ is LiftedToken:
            return Hole(tok.ordinal, tok.type)
        return TEXT_DECODERS[tok.type](tok)

    string = ident
    add_ext_id = ident
    result_ext_id = ident

    def key(self, c: list[Token]) -> int | str | Param | Hole:
        tok = c[0]
        kind = tok.type
        if kind == "MINUS":
            number = c[1]
            if number.__class__ is LiftedToken:
                return Hole(number.ordinal, "NUMBER", "id", negative=True)
            return check_int_text("-" + number, "id", _pos(tok))
        if kind == "PARAM":
            return _param(c, Slot.KEY)
        if tok.__class__ is LiftedToken:
            return Hole(tok.ordinal, kind, "id" if kind == "NUMBER" else None)
        if kind == "NUMBER":
            return check_int_text(tok, "id", _pos(tok))
        return TEXT_DECODERS[kind](tok)

    def result(self, c: list[Token]) -> str | Param | Hole | None:
        if not c:
            return None  # the bare keyword NULL (§3.4)
        if c[0].type == "PARAM":
            return _param(c, Slot.RESULT)
        return self.ident(c)

    def int(self, c: list[Token]) -> RawInt | Param | Hole:
        tok = c[0]
        kind = tok.type
        if kind == "PARAM":
            return _param(c, Slot.INT8)
        number = c[-1]
        if number.__class__ is LiftedToken:
            return Hole(number.ordinal, "NUMBER", "", negative=kind == "MINUS")
        if kind == "MINUS":
            return ("-" + number, _pos(tok))
        return (str(tok), _pos(tok))

    add_int = int
    retrieve_int = int
    set_int = int

    # ---- options ---------------------------------------------------------------------
    @staticmethod
    def _merge(c: list[Any]) -> _Opts:
        if len(c) == 1:
            name, value, _ = c[0]
            return {name: value}
        opts: _Opts = c[0]
        name, value, pos = c[1]
        if name in opts:
            raise SyntaxError(f"Duplicate option: {name}", position=pos)
        return {**opts, name: value}  # a new dict: diagnostics replays reductions on copies

    add_opts = _merge
    retrieve_opts = _merge
    set_opts = _merge

    def list_opts(self, c: list[Any]) -> _Opts:
        if len(c) == 2:
            raise SyntaxError("Duplicate option: WITH_PAYLOAD", position=_pos(c[1]))
        return {"WITH_PAYLOAD": True}

    def add_opt(self, c: list[Any]) -> _Opt:
        kw: Token = c[0]
        kind = kw.type
        if kind == "EXCLUSIVE":
            return ("EXCLUSIVE", True, _pos(kw))
        if kind == "EXTERNAL_ID":
            return ("EXTERNAL_ID", c[1], _pos(kw))
        name = "priority" if kind == "PRIORITY" else "orphaned"
        return (kind, _int(c[1], name), _pos(kw))

    def retrieve_opt(self, c: list[Any]) -> _Opt:
        kw: Token = c[0]
        if kw.type == "EXTENDED":
            return ("EXTENDED", True, _pos(kw))
        return ("CONCURRENCY", _int(c[1], "concurrency"), _pos(kw))

    def set_opt(self, c: list[Any]) -> _Opt:
        kw: Token = c[0]
        if kw.type == "NX":
            return ("NX", True, _pos(kw))
        return ("TTL", _int(c[1], "ttl"), _pos(kw))

    # ---- QUEUE -----------------------------------------------------------------------
    def queue_add(self, c: list[Any]) -> QueueAdd:
        if len(c) == 2:
            return QueueAdd(path=c[0], payload=c[1])
        o: _Opts = c[0]
        return QueueAdd(
            path=c[1],
            payload=c[2],
            priority=o.get("PRIORITY", 0),
            orphaned=o.get("ORPHANED"),
            external_id=o.get("EXTERNAL_ID"),
            exclusive=o.get("EXCLUSIVE", False),
        )

    def queue_add_and_retrieve(self, c: list[Any]) -> QueueAddAndRetrieve:
        o: _Opts = c[0] if len(c) == 4 else {}
        path, payload, concurrency = c[-3:]
        return QueueAddAndRetrieve(
            path=path,
            payload=payload,
            concurrency=_int(concurrency, "concurrency"),
            priority=o.get("PRIORITY", 0),
            orphaned=o.get("ORPHANED"),
            external_id=o.get("EXTERNAL_ID"),
            exclusive=o.get("EXCLUSIVE", False),
        )

    def queue_retrieve(self, c: list[Any]) -> QueueRetrieve:
        if len(c) == 1:
            return QueueRetrieve(path=c[0])
        o: _Opts = c[0]
        return QueueRetrieve(
            path=c[1], concurrency=o.get("CONCURRENCY", 1), extended=o.get("EXTENDED", False)
        )

    def queue_ack(self, c: list[Any]) -> QueueAck:
        return QueueAck(key=c[0], result=c[1])

    def queue_cancel(self, c: list[Any]) -> QueueCancel:
        return QueueCancel(key=c[0])

    def queue_get(self, c: list[Any]) -> QueueGet:
        return QueueGet(key=c[0])

    def queue_heartbeat(self, c: list[Any]) -> QueueHeartbeat:
        return QueueHeartbeat(key=c[0])

    def queue_merge_extra(self, c: list[Any]) -> QueueMergeExtra:
        return QueueMergeExtra(key=c[0], json=c[1])

    def queue_list(self, c: list[Any]) -> QueueList:
        return QueueList(prefix=c[-1], status=_STATUS[c[0].type], with_payload=len(c) == 3)

    def queue_to_cancel(self, c: list[Any]) -> QueueToCancel:
        return QueueToCancel(
            prefix=c[2],
            heartbeat_timeout=_int(c[0], "heartbeat timeout"),
            orphaned_timeout=_int(c[1], "orphaned timeout"),
        )

    def queue_stalled(self, c: list[Any]) -> QueueToCancel:
        return QueueToCancel(prefix=c[1], heartbeat_timeout=_int(c[0], "heartbeat timeout"))

    def queue_orphaned(self, c: list[Any]) -> QueueToCancel:
        # c[0] is the kept ORPHANED keyword token
        return QueueToCancel(prefix=c[2], orphaned_timeout=_int(c[1], "orphaned timeout"))

    def queue_result(self, c: list[Any]) -> QueueResult:
        if len(c) == 1:
            return QueueResult(key=c[0])
        return QueueResult(key=c[2], external_id=c[1])

    def queue_result_blocking(self, c: list[Any]) -> QueueResultBlocking:
        return QueueResultBlocking(key=c[1], timeout=_int(c[0], "timeout"))

    def queue_truncate(self, c: list[Any]) -> QueueTruncate:
        return QueueTruncate()

    def queue_purge(self, c: list[Any]) -> QueuePurge:
        if len(c) == 1:
            return QueuePurge(prefix=c[0])
        return QueuePurge(prefix=c[1], status=_STATUS[c[0].type])

    # ---- CACHE -----------------------------------------------------------------------
    def cache_set(self, c: list[Any]) -> CacheSet:
        if len(c) == 2:
            return CacheSet(key=c[0], value=c[1])
        o: _Opts = c[0]
        return CacheSet(key=c[1], value=c[2], nx=o.get("NX", False), ttl=o.get("TTL"))

    def cache_get(self, c: list[Any]) -> CacheGet:
        return CacheGet(key=c[0])

    def cache_keys(self, c: list[Any]) -> CacheKeys:
        return CacheKeys(pattern=c[0])

    def cache_remove(self, c: list[Any]) -> CacheRemove:
        return CacheRemove(key=c[0])

    def cache_truncate(self, c: list[Any]) -> CacheTruncate:
        return CacheTruncate()

    def cache_incr(self, c: list[Any]) -> CacheIncr:
        return CacheIncr(key=c[0])

    def cache_purge(self, c: list[Any]) -> CachePurge:
        return CachePurge(prefix=c[0])

    # ---- SYS -------------------------------------------------------------------------
    def sys_cachestore(self, c: list[Token]) -> SysCachestore:
        return SysCachestore(action=_CACHESTORE_ACTIONS[c[0].type])

    def sys_clock(self, c: list[Any]) -> SysClock:
        return SysClock()

    def sys_clock_advance(self, c: list[Any]) -> SysClock:
        return SysClock(action="advance", ms=_int(c[0], "ms"))

    def sys_clock_freeze(self, c: list[Any]) -> SysClock:
        return SysClock(action="freeze")

    def sys_clock_resume(self, c: list[Any]) -> SysClock:
        return SysClock(action="resume")


def _param(c: list[Token], slot: Slot) -> Param:
    """A placeholder (``PARAM``, then an optional ``CAST``) in a ``slot``-typed position."""
    tok = c[0]
    assert isinstance(tok, ParamToken)  # the grammar's lexer makes every PARAM token
    return tok.placeholders.param(tok, c[1] if len(c) > 1 else None, slot)


def _int(raw: RawInt | Param | Hole, name: str) -> Any:  # int | Param | Hole
    if isinstance(raw, tuple):
        return check_int_text(raw[0], name, raw[1])
    if isinstance(raw, Hole):
        return raw.named(name)
    return raw
