"""Errors that point somewhere else (issue 27): a write to a system table names the
QUEUE/CACHE statement that makes that change, and CACHE INCR on a value it cannot count
names the key and what the value holds, in both stores."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from cubequeue.grammar.commands import CacheIncr, CacheSet
from cubequeue.grammar.errors import FeatureNotSupported, InvalidTextRepresentation
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.refusals import PREAGGREGATION_HINT
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.cache_steps import CacheSteps
from cubequeue.storage.store import MemoryStore

WRITES = [
    ("INSERT INTO system.queue (path, value) VALUES ('p:a', 'x')", "cannot insert into system.queue",
     "QUEUE ADD"),
    ("insert into queue values ('p:a')", "cannot insert into system.queue", "QUEUE ADD"),
    ("DELETE FROM system.queue WHERE prefix = 'p'", "cannot delete from system.queue",
     "QUEUE CANCEL"),
    ('delete from "system"."queue"', "cannot delete from system.queue", "QUEUE PURGE"),
    ("UPDATE system.queue SET priority = 5", "cannot update system.queue", "QUEUE MERGE_EXTRA"),
    ("TRUNCATE system.queue", "cannot truncate system.queue", "QUEUE TRUNCATE"),
    ("INSERT INTO system.cache VALUES ('k', 'v')", "cannot insert into system.cache", "CACHE SET"),
    ("DELETE FROM system.cache", "cannot delete from system.cache", "CACHE REMOVE"),
    ("UPDATE system.cache SET value = '2'", "cannot update system.cache", "CACHE INCR"),
    ("DELETE FROM system.queue_results", "cannot delete from system.queue_results",
     "QUEUE RESULT"),
    ("INSERT INTO system.queue_results VALUES (1)", "cannot insert into system.queue_results",
     "QUEUE ACK"),
    ("DELETE FROM system.queue_prefixes", "cannot delete from system.queue_prefixes",
     "QUEUE PURGE"),
]


def _plain(sql: str) -> None:
    run_plain(sql, PlainSession(server_version="15", user="u"), MemoryStore(FakeClock(0)))


@pytest.mark.parametrize(("sql", "message", "statement"), WRITES)
def test_a_system_table_write_names_the_dialect_statement(sql: str, message: str,
                                                          statement: str) -> None:
    with pytest.raises(FeatureNotSupported) as e:
        _plain(sql)
    assert e.value.sqlstate == "0A000"
    assert e.value.message.startswith(message)
    assert e.value.hint is not None and statement in e.value.hint
    assert "pre-aggregation" not in e.value.message + e.value.hint


def test_a_write_elsewhere_keeps_its_own_refusal() -> None:
    with pytest.raises(FeatureNotSupported) as e:
        _plain("INSERT INTO dev_pre_aggregations.orders (c) VALUES (1)")
    assert e.value.hint == PREAGGREGATION_HINT
    with pytest.raises(FeatureNotSupported) as e:
        _plain("DELETE FROM orders")
    assert "does not support this statement" in e.value.message


def test_system_writes_over_the_wire(server: CubequeueServer) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            conn.execute("INSERT INTO system.queue (path) VALUES ('p:a')")
        assert e.value.diag.message_hint is not None
        assert "QUEUE ADD" in e.value.diag.message_hint
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            conn.execute("DELETE FROM system.queue")
        hint = e.value.diag.message_hint or ""
        assert "QUEUE CANCEL" in hint and "QUEUE PURGE" in hint
        assert conn.execute("SELECT 1").fetchone() == (1,)


# -- CACHE INCR on a value it cannot count ----------------------------------------------

BAD_VALUES = [
    ("abc", "invalid digit found in string", "text"),
    ("1.5", "invalid digit found in string", "a decimal number"),
    ('{"n": 1}', "invalid digit found in string", "JSON text"),
    ("", "cannot parse integer from empty string", "the empty string"),
    ("99999999999999999999", "number too large to fit in target type",
     "an integer outside the 64-bit range"),
]


@pytest.mark.parametrize(("value", "message", "kind"), BAD_VALUES)
def test_memory_store_incr_names_the_key_and_the_value(value: str, message: str,
                                                       kind: str) -> None:
    store = MemoryStore(FakeClock(0))
    store.execute(CacheSet(key="n:hits", value=value))
    with pytest.raises(InvalidTextRepresentation) as e:
        store.execute(CacheIncr(key="n:hits"))
    assert e.value.message == message  # Cube Store's (Rust's) text is kept
    assert e.value.detail is not None
    assert '"n:hits"' in e.value.detail and f" is {kind} (" in e.value.detail


class _IncrRefused:
    """The one Database call CACHE INCR makes, answering as cq_cache_incr does for a
    value it cannot count: (false, the stored value)."""

    def __init__(self, stored: str) -> None:
        self.stored = stored

    async def fetchrow(self, tag: str, sql: str, *args: Any) -> tuple[bool, str]:
        return False, self.stored


@pytest.mark.parametrize(("value", "message", "kind"),
                         [*BAD_VALUES, ("9223372036854775807", "number too large to fit in "
                                        "target type", "9223372036854775807, the largest")])
def test_postgres_store_incr_names_the_key_and_the_value(value: str, message: str,
                                                         kind: str) -> None:
    steps = CacheSteps(_IncrRefused(value), Limits())  # type: ignore[arg-type]
    with pytest.raises(InvalidTextRepresentation) as e:
        asyncio.run(steps.cache_incr(CacheIncr(key="n:hits"), None))
    assert e.value.message == message
    assert e.value.detail is not None
    assert '"n:hits"' in e.value.detail and f" is {kind}" in e.value.detail


def test_incr_detail_over_the_wire(server: CubequeueServer) -> None:
    key = f"g{uuid.uuid4().hex[:8]}:count"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CACHE SET '{key}' 'ten'")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
            conn.execute(f"CACHE INCR '{key}'")
        assert e.value.diag.message_primary == "invalid digit found in string"
        assert e.value.diag.message_detail is not None
        assert key in e.value.diag.message_detail and "is text" in e.value.diag.message_detail
