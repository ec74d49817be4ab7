"""The process-wide statement cache (the one the executor prepares through) is bounded in
bytes and keyed by shape: large and Cube-shaped statements leave no payload behind.

Before the shape cache, 40 distinct 5 MiB statements pinned 556 MiB and 1,000 Cube-shaped
64 KiB ADDs 126 MiB (4,096 entries keyed by the full text)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Iterator

from cubequeue.grammar import prepare, shapes
from cubequeue.grammar.commands import CacheSet, QueueAdd
from cubequeue.grammar.shapes import MAX_CACHE_BYTES

MIB = 1 << 20
#: in every payload, so a retained one can be found by its text
MARK = "zqxPAYLOADmark"


def payload(i: int, size: int) -> str:
    head = f"{MARK}{i}x"
    return head + "ab" * ((size - len(head)) // 2)


def large_statements() -> Iterator[tuple[str, str]]:
    """40 distinct 5 MiB statements of four kinds: one shape, many shapes (bare-word keys),
    shapes too large to cache (a bare-word value) and dollar-quoted payloads."""
    for i in range(10):
        yield f"QUEUE ADD PRIORITY {i} 'big:k{i}' '{payload(i, 5 * MIB)}'", f"big:k{i}"
        yield f"CACHE SET word{i} '{payload(i, 5 * MIB)}'", f"word{i}"
        yield f"CACHE SET 'bare:{i}' w{payload(i, 5 * MIB)}", f"bare:{i}"
        yield (f"QUEUE ADD EXTERNAL_ID 'e{i}' 'dollar:k{i}' $${payload(i, 5 * MIB)}$$",
               f"dollar:k{i}")


def cube_add(i: int) -> str:
    """``QUEUE ADD`` as Cube's driver inlines it over /ws: a query-key path and a 64 KiB
    JSON payload, priority and orphaned timeout as numbers."""
    sql = f"SELECT * FROM orders WHERE id = {i} /* {payload(i, 64 * 1024)} */"
    body = json.dumps({"queryHandler": "query", "query": {"sql": [sql, []]},
                       "queryKey": [sql, []], "priority": i % 10, "requestId": f"r-{i}",
                       "addedToQueueTime": 1_767_225_600_000 + i})
    key = json.dumps([f"SELECT {i}", []]).replace("'", "''")
    return f"QUEUE ADD PRIORITY {i % 10} ORPHANED 120 'STANDALONE#{key}' '{body.replace(chr(39), chr(39) * 2)}'"


def strings_reachable(root: object) -> Iterator[str]:
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            yield obj
            continue
        todo.extend(gc.get_referents(obj))


def test_large_and_cube_shaped_statements_leave_no_payload_in_the_cache() -> None:
    cache = shapes._DEFAULT
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for sql, key in large_statements():
            command = prepare(sql).command
            assert isinstance(command, QueueAdd | CacheSet)
            assert (command.path if isinstance(command, QueueAdd) else command.key) == key
            del command, sql
        for i in range(1000):
            command = prepare(cube_add(i)).command
            assert isinstance(command, QueueAdd) and command.priority == i % 10
            assert MARK in command.payload
            del command
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert cache.bytes <= MAX_CACHE_BYTES
    # 40 x 5 MiB + 1,000 x 64 KiB went through (264 MiB); the exact-text map has its own
    # bound but holds none of these (they are all longer than MAX_EXACT_TEXT)
    assert held < MAX_CACHE_BYTES, f"{held / MIB:.1f} MiB retained"
    assert not [s[:40] for s in strings_reachable(cache) if MARK in s]
