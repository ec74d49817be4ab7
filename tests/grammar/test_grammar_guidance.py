"""Parse errors that say what to do instead (issue 27): CACHE's "available:" list names
only commands the grammar takes, all of them, and CONCURRENCY's negative-value error
agrees with what CONCURRENCY 0 does (Cube Store: a RETRIEVE that never claims)."""

from __future__ import annotations

import re

import pytest

from cubequeue.grammar import bind, parse
from cubequeue.grammar.commands import QueueAdd, QueueAddAndRetrieve, QueueRetrieve
from cubequeue.grammar.errors import InvalidParameterValue, QueueError, SyntaxError
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

#: one valid statement per CACHE command, so each listed word can be checked to parse
CACHE_FORMS = {
    "SET": "CACHE SET 'k:a' 'v'", "GET": "CACHE GET 'k:a'", "KEYS": "CACHE KEYS 'k'",
    "INCR": "CACHE INCR 'k:n'", "REMOVE": "CACHE REMOVE 'k:a'", "TRUNCATE": "CACHE TRUNCATE",
    "PURGE": "CACHE PURGE 'k:*'",
}


def _available(sql: str) -> list[str]:
    with pytest.raises(SyntaxError) as e:
        parse(sql)
    m = re.fullmatch(r"Unknown cache command: \w+, available: ([A-Z|_]+)", e.value.message)
    assert m is not None, e.value.message
    return m.group(1).split("|")


def test_cache_available_list_is_what_the_grammar_takes() -> None:
    listed = _available("CACHE FOO 'k'")
    assert sorted(listed) == sorted(CACHE_FORMS)
    for word in listed:
        parse(CACHE_FORMS[word])  # each listed command parses
        try:
            parse(f"CACHE {word} 'k:x'")
        except QueueError as e:
            assert "Unknown cache command" not in e.message, word


def test_cache_inc_is_refused_and_points_at_incr() -> None:
    with pytest.raises(SyntaxError) as e:
        parse("CACHE INC 'k:n'")
    assert e.value.hint == "did you mean INCR?"
    assert "INCR" in _available("CACHE INC 'k:n'")


@pytest.mark.parametrize("sql", [
    "QUEUE RETRIEVE CONCURRENCY -1 'p'",
    "QUEUE RETRIEVE EXTENDED CONCURRENCY -7 'p'",
    "QUEUE ADD_AND_RETRIEVE 'p:a' 'v' -1",
])
def test_negative_concurrency_says_non_negative(sql: str) -> None:
    with pytest.raises(InvalidParameterValue) as e:
        parse(sql)
    assert re.fullmatch(r"concurrency must be a non-negative integer, actual: -\d+",
                        e.value.message), e.value.message


def test_negative_concurrency_as_a_parameter_says_non_negative() -> None:
    cmd = parse("QUEUE RETRIEVE CONCURRENCY $1 'p'")
    with pytest.raises(InvalidParameterValue) as e:
        bind(cmd, [-1])
    assert e.value.message == "concurrency must be a non-negative integer, actual: -1"


def test_other_unsigned_fields_keep_cube_stores_words() -> None:
    with pytest.raises(InvalidParameterValue) as e:
        parse("CACHE SET TTL -5 'k:a' 'v'")
    assert e.value.message == "ttl must be a positive integer, actual: -5"


def test_concurrency_zero_is_a_value_that_claims_nothing() -> None:
    store = MemoryStore(FakeClock(1_000))
    store.execute(parse("QUEUE ADD 'z:a' 'v'"))
    retrieve = parse("QUEUE RETRIEVE CONCURRENCY 0 'z:a'")
    assert isinstance(retrieve, QueueRetrieve) and retrieve.concurrency == 0
    assert store.execute(retrieve).rows == []
    fast = parse("QUEUE ADD_AND_RETRIEVE 'z:b' 'v' 0")
    assert isinstance(fast, QueueAddAndRetrieve)
    assert not any(row[0] == "v" for row in store.execute(fast).rows)
    assert isinstance(parse("QUEUE ADD 'z:c' 'v'"), QueueAdd)
    assert store.execute(parse("QUEUE RETRIEVE CONCURRENCY 1 'z:a'")).rows  # it was pending
