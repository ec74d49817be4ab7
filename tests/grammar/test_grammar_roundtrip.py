"""Hypothesis: random commands → random text → parse → the same command; and a fuzz
asserting that the parser only ever raises the dialect's error type."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
    Command,
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
    SysCachestore,
    SysClock,
)
from cubequeue.grammar.errors import QueueError

KEYWORDS = {
    k.lower()
    for k in ["QUEUE", "CACHE", "SYS", "ADD", "ADD_AND_RETRIEVE", "RETRIEVE", "ACK", "CANCEL", "GET", "HEARTBEAT", "MERGE_EXTRA", "LIST", "PENDING", "ACTIVE", "TO_CANCEL", "STALLED", "ORPHANED", "RESULT", "RESULT_BLOCKING", "TRUNCATE", "PURGE", "EXCLUSIVE", "PRIORITY", "EXTERNAL_ID", "EXTENDED", "CONCURRENCY", "WITH_PAYLOAD", "NULL", "SET", "KEYS", "REMOVE", "INCR", "NX", "TTL", "CACHESTORE", "COMPACTION", "PERSIST", "HEALTHCHECK", "EVICTION", "INFO", "CLOCK", "ADVANCE", "FREEZE", "RESUME"]
}
WORD = re.compile(r"[A-Za-z_\u0080-\U0010FFFF][A-Za-z0-9_$\u0080-\U0010FFFF]*")
U32, U64 = 2**32 - 1, 2**64 - 1

texts = st.text(max_size=20)
u32 = st.integers(0, U32)
u64 = st.integers(0, U64)
i64 = st.integers(-(2**63), 2**63 - 1)
keys = st.one_of(u64, texts)


class Renderer:
    """Renders values with a random quoting style, case and spacing drawn per call."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def kw(self, word: str) -> str:
        style = self.draw(st.sampled_from(["upper", "lower", "mixed"]))
        if style == "upper":
            return word.upper()
        if style == "lower":
            return word.lower()
        flips = self.draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
        return "".join(c.upper() if f else c.lower() for c, f in zip(word, flips, strict=True))

    def ws(self) -> str:
        return self.draw(st.sampled_from([" ", "  ", "\n", "\t ", " /* c; */ ", " -- c\n", "\r\n"]))

    def text(self, s: str) -> str:
        style = self.draw(st.sampled_from(["sq", "sq2", "dq", "bt", "dollar", "e", "word"]))
        if style == "word" and WORD.fullmatch(s) and s.lower() not in KEYWORDS:
            return s
        if style == "sq":
            return "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"
        if style == "sq2":
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if style == "bt":
            return "`" + s.replace("`", "``") + "`"
        if style == "e" and "\x00" not in s:  # an E'' string's text may hold no NUL (22021)
            return "E'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if style == "dollar":
            for tag in ("", "t", "json", "q1"):
                delim = f"${tag}$"
                if (s + delim).find(delim) == len(s):
                    return delim + s + delim
        return '"' + s.replace('"', '""') + '"'

    def key(self, k: int | str) -> str:
        return str(k) if isinstance(k, int) else self.text(k)

    def int(self, n: int) -> str:
        if n < 0:
            return "-" + self.draw(st.sampled_from(["", " "])) + str(-n)
        return str(n)

    def join(self, parts: list[str]) -> str:
        out = parts[0]
        for p in parts[1:]:
            out += self.ws() + p
        return out + self.draw(st.sampled_from(["", ";", " ;", "; ", "\n"]))

    def opts(self, opts: list[list[str]]) -> list[str]:
        order = self.draw(st.permutations(opts))
        return [p for opt in order for p in opt]


def _add_options(r: Renderer, cmd: QueueAdd | QueueAddAndRetrieve) -> list[list[str]]:
    opts: list[list[str]] = []
    if cmd.exclusive:
        opts.append([r.kw("EXCLUSIVE")])
    if cmd.priority != 0 or r.draw(st.booleans()):
        assert isinstance(cmd.priority, int)
        opts.append([r.kw("PRIORITY"), r.int(cmd.priority)])
    if cmd.orphaned is not None:
        assert isinstance(cmd.orphaned, int)
        opts.append([r.kw("ORPHANED"), r.int(cmd.orphaned)])
    if cmd.external_id is not None:
        assert isinstance(cmd.external_id, str)
        opts.append([r.kw("EXTERNAL_ID"), r.text(cmd.external_id)])
    return opts


def render(r: Renderer, cmd: Command) -> str:
    kw = r.kw
    match cmd:
        case QueueAdd():
            parts = [kw("QUEUE"), kw("ADD"), *r.opts(_add_options(r, cmd)), r.text(str(cmd.path)), r.text(str(cmd.payload))]
        case QueueAddAndRetrieve():
            parts = [kw("QUEUE"), kw("ADD_AND_RETRIEVE"), *r.opts(_add_options(r, cmd)), r.text(str(cmd.path)), r.text(str(cmd.payload)), r.int(int(str(cmd.concurrency)))]
        case QueueRetrieve():
            opts = []
            if cmd.extended:
                opts.append([kw("EXTENDED")])
            if cmd.concurrency != 1 or r.draw(st.booleans()):
                opts.append([kw("CONCURRENCY"), r.int(int(str(cmd.concurrency)))])
            parts = [kw("QUEUE"), kw("RETRIEVE"), *r.opts(opts), r.text(str(cmd.path))]
        case QueueAck():
            result = kw("NULL") if cmd.result is None else r.text(str(cmd.result))
            parts = [kw("QUEUE"), kw("ACK"), r.key(cmd.key), result]  # type: ignore[arg-type]
        case QueueCancel() | QueueGet() | QueueHeartbeat():
            parts = [kw("QUEUE"), kw(cmd.tag.split()[1]), r.key(cmd.key)]  # type: ignore[arg-type]
        case QueueMergeExtra():
            parts = [kw("QUEUE"), kw("MERGE_EXTRA"), r.key(cmd.key), r.text(str(cmd.json))]  # type: ignore[arg-type]
        case QueueList():
            word = {None: "LIST", "pending": "PENDING", "active": "ACTIVE"}[cmd.status]
            parts = [kw("QUEUE"), kw(word), *([kw("WITH_PAYLOAD")] if cmd.with_payload else []), r.text(str(cmd.prefix))]
        case QueueToCancel():
            hb, orph = cmd.heartbeat_timeout, cmd.orphaned_timeout
            if hb is not None and orph is not None:
                parts = [kw("QUEUE"), kw("TO_CANCEL"), r.int(int(str(hb))), r.int(int(str(orph)))]
            elif hb is not None:
                parts = [kw("QUEUE"), kw("STALLED"), r.int(int(str(hb)))]
            else:
                parts = [kw("QUEUE"), kw("ORPHANED"), r.int(int(str(orph)))]
            parts.append(r.text(str(cmd.prefix)))
        case QueueResult():
            ext = [] if cmd.external_id is None else [kw("EXTERNAL_ID"), r.text(str(cmd.external_id))]
            parts = [kw("QUEUE"), kw("RESULT"), *ext, r.key(cmd.key)]  # type: ignore[arg-type]
        case QueueResultBlocking():
            parts = [kw("QUEUE"), kw("RESULT_BLOCKING"), r.int(int(str(cmd.timeout))), r.key(cmd.key)]  # type: ignore[arg-type]
        case QueueTruncate():
            parts = [kw("QUEUE"), kw("TRUNCATE")]
        case QueuePurge():
            status = [] if cmd.status is None else [kw(cmd.status)]
            parts = [kw("QUEUE"), kw("PURGE"), *status, r.text(str(cmd.prefix))]
        case CacheSet():
            opts = []
            if cmd.nx:
                opts.append([kw("NX")])
            if cmd.ttl is not None:
                opts.append([kw("TTL"), r.int(int(str(cmd.ttl)))])
            parts = [kw("CACHE"), kw("SET"), *r.opts(opts), r.text(str(cmd.key)), r.text(str(cmd.value))]
        case CacheGet() | CacheRemove() | CacheIncr():
            parts = [kw("CACHE"), kw(cmd.tag.split()[1]), r.text(str(cmd.key))]
        case CacheKeys():
            parts = [kw("CACHE"), kw("KEYS"), r.text(str(cmd.pattern))]
        case CachePurge():
            parts = [kw("CACHE"), kw("PURGE"), r.text(str(cmd.prefix))]
        case CacheTruncate():
            parts = [kw("CACHE"), kw("TRUNCATE")]
        case SysCachestore():
            parts = [kw("SYS"), kw("CACHESTORE"), kw(cmd.action)]
        case SysClock():
            parts = [kw("SYS"), kw("CLOCK")]
            if cmd.action != "show":
                parts.append(kw(cmd.action))
            if cmd.ms is not None:
                parts.append(r.int(int(str(cmd.ms))))
        case _:  # pragma: no cover
            raise AssertionError(cmd)
    return r.join(parts)


add_fields = {
    "path": texts,
    "payload": texts,
    "priority": i64,
    "orphaned": st.none() | u32,
    "external_id": st.none() | texts,
    "exclusive": st.booleans(),
}
COMMANDS = st.one_of(
    st.builds(QueueAdd, **add_fields),
    st.builds(QueueAddAndRetrieve, concurrency=u32, **add_fields),
    st.builds(QueueRetrieve, path=texts, concurrency=u32, extended=st.booleans()),
    st.builds(QueueAck, key=keys, result=st.none() | texts),
    st.builds(QueueCancel, key=keys),
    st.builds(QueueGet, key=keys),
    st.builds(QueueHeartbeat, key=keys),
    st.builds(QueueMergeExtra, key=keys, json=texts),
    st.builds(QueueList, prefix=texts, status=st.sampled_from([None, "pending", "active"]), with_payload=st.booleans()),
    st.builds(QueueToCancel, prefix=texts, heartbeat_timeout=u32, orphaned_timeout=u32),
    st.builds(QueueToCancel, prefix=texts, heartbeat_timeout=u32),
    st.builds(QueueToCancel, prefix=texts, orphaned_timeout=u32),
    st.builds(QueueResult, key=keys, external_id=st.none() | texts),
    st.builds(QueueResultBlocking, key=keys, timeout=u64),
    st.just(QueueTruncate()),
    st.builds(QueuePurge, prefix=texts, status=st.sampled_from([None, "pending", "active"])),
    st.builds(CacheSet, key=texts, value=texts, nx=st.booleans(), ttl=st.none() | u32),
    st.builds(CacheGet, key=texts),
    st.builds(CacheKeys, pattern=texts),
    st.builds(CacheRemove, key=texts),
    st.builds(CacheIncr, key=texts),
    st.builds(CachePurge, prefix=texts),
    st.just(CacheTruncate()),
    st.builds(SysCachestore, action=st.sampled_from(["healthcheck", "info", "compaction", "eviction", "persist"])),
    st.just(SysClock()),
    st.builds(SysClock, action=st.just("advance"), ms=u64),
    st.builds(SysClock, action=st.sampled_from(["freeze", "resume"])),
)


@st.composite
def rendered(draw: st.DrawFn) -> tuple[Command, str]:
    cmd = draw(COMMANDS)
    return cmd, render(Renderer(draw), cmd)


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(rendered())
def test_round_trip(case):
    cmd, sql = case
    assert parse(sql) == cmd, sql


def _parse_or_queue_error(sql: str) -> None:
    try:
        result = parse(sql)
    except QueueError as exc:
        assert exc.sqlstate in ("42601", "22023"), (exc.sqlstate, sql)
        assert exc.message
    else:
        assert isinstance(result, Command)


@settings(deadline=None, max_examples=400)
@given(st.text(max_size=60))
def test_fuzz_arbitrary_text(sql):
    _parse_or_queue_error(sql)


ALPHABET = "'\"`$;-/*\\ \n?:0123456789eENULL()"


@st.composite
def mutated(draw: st.DrawFn) -> str:
    _, sql = draw(rendered())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "dup", "prefix"]))
        i = draw(st.integers(0, len(sql)))
        if op == "insert":
            sql = sql[:i] + draw(st.text(alphabet=ALPHABET, min_size=1, max_size=3)) + sql[i:]
        elif op == "delete":
            j = draw(st.integers(i, min(len(sql), i + 5)))
            sql = sql[:i] + sql[j:]
        elif op == "dup":
            j = draw(st.integers(i, min(len(sql), i + 12)))
            sql = sql[:j] + sql[i:j] + sql[j:]
        else:
            sql = sql[:i]
    return sql


@settings(deadline=None, max_examples=600)
@given(mutated())
def test_fuzz_mutated_statements(sql):
    _parse_or_queue_error(sql)


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet=ALPHABET + "QUEUECACHSYADGTRIV_ ", max_size=80))
def test_fuzz_dialect_alphabet(sql):
    _parse_or_queue_error("QUEUE " + sql)
