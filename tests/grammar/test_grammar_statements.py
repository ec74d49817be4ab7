"""One test per statement form of docs/dialect.md §3-§5 (+ §8 rule 1)."""

from __future__ import annotations

import pytest

from cubequeue.grammar import parse, parse_cached
from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
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
    SysCachestore,
    SysClock,
)

CASES = [
    # QUEUE ADD (§3.1): options in any order (§8 rule 3)
    ('QUEUE ADD "STANDALONE#queue:1" "payload1"', QueueAdd(path="STANDALONE#queue:1", payload="payload1")),
    (
        "QUEUE ADD PRIORITY -10 ORPHANED 60 EXCLUSIVE EXTERNAL_ID 'ext' 'p:1' '{\"a\": 1}'",
        QueueAdd(path="p:1", payload='{"a": 1}', priority=-10, orphaned=60, exclusive=True, external_id="ext"),
    ),
    (
        "queue add external_id `e` exclusive orphaned 1 priority 5 'p:1' 'x';",
        QueueAdd(path="p:1", payload="x", priority=5, orphaned=1, exclusive=True, external_id="e"),
    ),
    ("QUEUE ADD PRIORITY - 3 p v", QueueAdd(path="p", payload="v", priority=-3)),
    ("QUEUE ADD p $$ {\"a\": 'b'} $$", QueueAdd(path="p", payload=" {\"a\": 'b'} ")),
    ("QUEUE ADD p $json$ $$ $json$", QueueAdd(path="p", payload=" $$ ")),
    ("QUEUE ADD p E'a\\nb\\x41\\101\\u00e9'", QueueAdd(path="p", payload="a\nbAAé")),
    # ADD_AND_RETRIEVE (§8 rule 1)
    (
        "QUEUE ADD_AND_RETRIEVE PRIORITY 2 'p:1' 'v' 3",
        QueueAddAndRetrieve(path="p:1", payload="v", concurrency=3, priority=2),
    ),
    ("QUEUE ADD_AND_RETRIEVE 'p:1' 'v' 0", QueueAddAndRetrieve(path="p:1", payload="v", concurrency=0)),
    # RETRIEVE (§3.3): both orders accepted
    ("QUEUE RETRIEVE 'p:1'", QueueRetrieve(path="p:1")),
    ("QUEUE RETRIEVE EXTENDED CONCURRENCY 4 'p:1'", QueueRetrieve(path="p:1", concurrency=4, extended=True)),
    ("QUEUE RETRIEVE CONCURRENCY 4 EXTENDED 'p:1'", QueueRetrieve(path="p:1", concurrency=4, extended=True)),
    # ACK (§3.4)
    ("QUEUE ACK 'p:1' 'result'", QueueAck(key="p:1", result="result")),
    ("QUEUE ACK 12 NULL", QueueAck(key=12, result=None)),
    ("QUEUE ACK 12 null", QueueAck(key=12, result=None)),
    ("QUEUE ACK 12 'NULL'", QueueAck(key=12, result="NULL")),
    ('QUEUE ACK 12 "NULL"', QueueAck(key=12, result="NULL")),
    ("QUEUE ACK '12' done", QueueAck(key="12", result="done")),
    # CANCEL / GET / HEARTBEAT (§3.5-§3.7)
    ("QUEUE CANCEL 'p:1'", QueueCancel(key="p:1")),
    ("QUEUE CANCEL 7", QueueCancel(key=7)),
    ("QUEUE GET `p:1`", QueueGet(key="p:1")),
    ("QUEUE GET 18446744073709551615", QueueGet(key=18446744073709551615)),
    ("QUEUE HEARTBEAT 'p:1'", QueueHeartbeat(key="p:1")),
    # MERGE_EXTRA (§3.8)
    ("QUEUE MERGE_EXTRA 'p:1' '{\"first\": true}'", QueueMergeExtra(key="p:1", json='{"first": true}')),
    # LIST / PENDING / ACTIVE (§3.9)
    ("QUEUE LIST 'p'", QueueList(prefix="p")),
    ("QUEUE LIST WITH_PAYLOAD 'p'", QueueList(prefix="p", with_payload=True)),
    ("QUEUE PENDING 'p'", QueueList(prefix="p", status="pending")),
    ("QUEUE ACTIVE with_payload 'p'", QueueList(prefix="p", status="active", with_payload=True)),
    ('QUEUE LIST "with_payload"', QueueList(prefix="with_payload")),  # §8 rule 12
    # TO_CANCEL / STALLED / ORPHANED (§3.10)
    ("QUEUE TO_CANCEL 1000 2000 'p'", QueueToCancel(prefix="p", heartbeat_timeout=1000, orphaned_timeout=2000)),
    ("QUEUE STALLED 1000 'p'", QueueToCancel(prefix="p", heartbeat_timeout=1000)),
    ("QUEUE ORPHANED 2000 'p'", QueueToCancel(prefix="p", orphaned_timeout=2000)),
    # RESULT / RESULT_BLOCKING (§3.11, §3.12)
    ("QUEUE RESULT 'p:1'", QueueResult(key="p:1")),
    ("QUEUE RESULT 5", QueueResult(key=5)),
    ("QUEUE RESULT EXTERNAL_ID 'e' 5", QueueResult(key=5, external_id="e")),
    ("QUEUE RESULT_BLOCKING 1000 'p:1'", QueueResultBlocking(key="p:1", timeout=1000)),
    ("QUEUE RESULT_BLOCKING 1000 5", QueueResultBlocking(key=5, timeout=1000)),
    # TRUNCATE (§3.13), PURGE
    ("QUEUE TRUNCATE", QueueTruncate()),
    ("QUEUE PURGE 'p'", QueuePurge(prefix="p")),
    ("QUEUE PURGE PENDING 'p'", QueuePurge(prefix="p", status="pending")),
    ("QUEUE PURGE ACTIVE 'p'", QueuePurge(prefix="p", status="active")),
    # CACHE (§4)
    ("CACHE SET 'k' 'v'", CacheSet(key="k", value="v")),
    ("CACHE SET NX TTL 4 'k' 'v'", CacheSet(key="k", value="v", nx=True, ttl=4)),
    ("CACHE SET TTL 4 NX 'k' 'v'", CacheSet(key="k", value="v", nx=True, ttl=4)),
    ("CACHE GET 'k'", CacheGet(key="k")),
    ("CACHE KEYS 'a:*'", CacheKeys(pattern="a:*")),
    ("CACHE REMOVE 'k'", CacheRemove(key="k")),
    ("CACHE TRUNCATE", CacheTruncate()),
    ("CACHE INCR 'p:PROCESSING_COUNTER'", CacheIncr(key="p:PROCESSING_COUNTER")),
    ("CACHE PURGE 'a'", CachePurge(prefix="a")),
    # SYS (§5.1)
    ("SYS CACHESTORE COMPACTION", SysCachestore(action="compaction")),
    ("SYS CACHESTORE PERSIST", SysCachestore(action="persist")),
    ("SYS CACHESTORE HEALTHCHECK", SysCachestore(action="healthcheck")),
    ("SYS CACHESTORE EVICTION", SysCachestore(action="eviction")),
    ("sys cachestore info", SysCachestore(action="info")),
    ("SYS CLOCK", SysClock()),
    ("SYS CLOCK ADVANCE 120001", SysClock(action="advance", ms=120001)),
    ("SYS CLOCK FREEZE", SysClock(action="freeze")),
    ("SYS CLOCK RESUME;", SysClock(action="resume")),
]


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_statement(sql, expected):
    assert parse(sql) == expected
    assert parse_cached(sql) == expected


LITERALS = [
    ("'a\\0\\a\\b\\f\\n\\r\\t\\Zb'", "a\0\a\b\f\n\r\t\x1ab"),
    ("'\\'\\\"\\\\\\q'", "'\"\\q"),
    ("'it''s'", "it's"),
    ("E'it''s \\'x\\''", "it's 'x'"),
    ('"a\\n""b"', 'a\\n"b'),
    ("`a``b`", "a`b"),
    ("$$a'b\\n$$", "a'b\\n"),
    ("$t$a$$b$t$", "a$$b"),
    ("e'\\t'", "\t"),
    ("word_1$x", "word_1$x"),
    ("Ünïcode", "Ünïcode"),
    ("''", ""),
]


@pytest.mark.parametrize(("literal", "value"), LITERALS)
def test_literals(literal, value):
    assert parse(f"CACHE SET k {literal}") == CacheSet(key="k", value=value)


def test_comments_and_layout():
    sql = "-- lead\n/* block ; */ QUEUE\n\tADD /* x */ PRIORITY\n1 'p' -- tail\n'v' ;  \n"
    assert parse(sql) == QueueAdd(path="p", payload="v", priority=1)


def test_keywords_are_values_where_no_option_can_follow():
    assert parse("CACHE SET k ttl") == CacheSet(key="k", value="ttl")
    assert parse("QUEUE ADD PRIORITY 1 p exclusive") == QueueAdd(path="p", payload="exclusive", priority=1)
    assert parse("QUEUE RESULT_BLOCKING 5 nx") == QueueResultBlocking(key="nx", timeout=5)
    assert parse("QUEUE RESULT EXTERNAL_ID x priority") == QueueResult(key="priority", external_id="x")
    assert parse("QUEUE GET add") == QueueGet(key="add")


def test_quoted_word_is_never_an_option():
    assert parse('QUEUE ADD "priority" "v"') == QueueAdd(path="priority", payload="v")
    assert parse('CACHE SET "nx" `ttl`') == CacheSet(key="nx", value="ttl")


PARAMS = [
    ("QUEUE ADD $1 $2", QueueAdd(path=Param(1, Slot.TEXT), payload=Param(2, Slot.TEXT))),
    (
        "QUEUE ADD PRIORITY ? ORPHANED ? EXTERNAL_ID ? ? ?",
        QueueAdd(
            path=Param(4, Slot.TEXT),
            payload=Param(5, Slot.TEXT),
            priority=Param(1, Slot.INT8),
            orphaned=Param(2, Slot.INT8),
            external_id=Param(3, Slot.TEXT),
        ),
    ),
    ("QUEUE RETRIEVE CONCURRENCY $1 $2", QueueRetrieve(path=Param(2, Slot.TEXT), concurrency=Param(1, Slot.INT8))),
    ("QUEUE ACK $1::int8 $2", QueueAck(key=Param(1, Slot.KEY, "int8"), result=Param(2, Slot.RESULT))),
    ("QUEUE ACK ?::BIGINT NULL", QueueAck(key=Param(1, Slot.KEY, "bigint"), result=None)),
    ("QUEUE LIST $1", QueueList(prefix=Param(1, Slot.TEXT))),
    ("QUEUE PENDING WITH_PAYLOAD ?", QueueList(prefix=Param(1, Slot.TEXT), status="pending", with_payload=True)),
    (
        "QUEUE TO_CANCEL $1 $2 $3",
        QueueToCancel(prefix=Param(3, Slot.TEXT), heartbeat_timeout=Param(1, Slot.INT8), orphaned_timeout=Param(2, Slot.INT8)),
    ),
    ("QUEUE RESULT EXTERNAL_ID $2 $1", QueueResult(key=Param(1, Slot.KEY), external_id=Param(2, Slot.TEXT))),
    ("QUEUE RESULT_BLOCKING $1 $2 :: int", QueueResultBlocking(key=Param(2, Slot.KEY, "int"), timeout=Param(1, Slot.INT8))),
    ("QUEUE MERGE_EXTRA ? ?", QueueMergeExtra(key=Param(1, Slot.KEY), json=Param(2, Slot.TEXT))),
    ("CACHE SET TTL $1 $2 $3", CacheSet(key=Param(2, Slot.TEXT), value=Param(3, Slot.TEXT), ttl=Param(1, Slot.INT8))),
    ("SYS CLOCK ADVANCE $1", SysClock(action="advance", ms=Param(1, Slot.INT8))),
    ("QUEUE ADD $1 $1", QueueAdd(path=Param(1, Slot.TEXT), payload=Param(1, Slot.TEXT))),
]


@pytest.mark.parametrize(("sql", "expected"), PARAMS, ids=[c[0] for c in PARAMS])
def test_placeholders(sql, expected):
    assert parse(sql) == expected


def test_commands_are_immutable_and_cached():
    a = parse_cached("QUEUE GET 1")
    assert parse_cached("QUEUE GET 1") == a == parse("QUEUE GET 1")
    # a statement without literals is its template: the one command is shared
    assert parse_cached("QUEUE TRUNCATE") is parse_cached("QUEUE  TRUNCATE")
    with pytest.raises(AttributeError):
        a.key = 2  # type: ignore[misc]
