"""SELECT over the system tables of a real MemoryStore fed with dialect statements: exact rows,
types (``docs/dialect.md`` §8 rule 11), Describe without running, and the refusals."""

from __future__ import annotations

import pytest

from cubequeue.grammar import parse
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.sql import PlainSession, describe_plain, run_plain
from cubequeue.server.sql.systables import SCHEMAS
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore
from cubequeue.storage.system_schemas import SYSTEM_TABLES

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S, INT, B, TS = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock)


@pytest.fixture
def session() -> PlainSession:
    return PlainSession(server_version="15.18 (cubequeue 0.1.0)", user="u")


def feed(store: MemoryStore, *statements: str, process_id: str = "proc") -> None:
    for sql in statements:
        store.execute(parse(sql), process_id)


def rows(store: MemoryStore, session: PlainSession, sql: str, *params: str | None) -> list[tuple[object, ...]]:
    out = run_plain(sql, session, store, params)
    assert out.result is not None
    assert out.tag == f"SELECT {len(out.result.rows)}"
    return list(out.result.rows)


def scripted(store: MemoryStore, clock: FakeClock) -> None:
    """ADD four items on two prefixes, RETRIEVE one, HEARTBEAT it later, ACK another, CACHE SET."""
    feed(store, 'QUEUE ADD PRIORITY 5 "jobs:a" "pa"')
    clock.advance(10)
    feed(store, 'QUEUE ADD "jobs:b" "pb"', 'QUEUE ADD PRIORITY -1 "jobs:c" "pc"')
    clock.advance(10)
    feed(store, 'QUEUE ADD "mail:x" "px"')
    clock.advance(10)
    feed(store, 'QUEUE RETRIEVE CONCURRENCY 2 "jobs:a"', 'QUEUE RETRIEVE CONCURRENCY 1 "mail:x"')
    clock.advance(100)
    feed(store, 'QUEUE HEARTBEAT "jobs:a"', 'QUEUE ACK "mail:x" "done"', 'CACHE SET TTL 60 "c:k" "v"')


def test_count_per_prefix_and_status(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    sql = "SELECT prefix, status, count(*) FROM system.queue GROUP BY prefix, status ORDER BY 1,2"
    out = run_plain(sql, session, store)
    assert out.result is not None and out.type_oids == (25, 25, 20)
    assert out.result.columns == (Column("prefix", S), Column("status", S), Column("count", INT))
    assert out.result.rows == [("jobs", "active", 1), ("jobs", "pending", 2)]
    assert rows(store, session, "SELECT prefix, count(*) AS pending FROM system.queue "
                "WHERE status = 'pending' GROUP BY prefix ORDER BY pending DESC, prefix") == [("jobs", 2)]


def test_heartbeat_goes_from_null_to_a_timestamp(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    feed(store, 'QUEUE ADD "jobs:a" "pa"')
    q = "SELECT id, status, heartbeat FROM system.queue WHERE prefix = $1"
    assert rows(store, session, q, "jobs") == [("a", "pending", None)]
    assert rows(store, session, "SELECT count(*) FROM system.queue WHERE heartbeat IS NULL") == [(1,)]
    clock.advance(5)
    feed(store, 'QUEUE RETRIEVE "jobs:a"')
    assert rows(store, session, q, "jobs") == [("a", "active", T0 + 5)]
    clock.advance(1000)
    feed(store, 'QUEUE HEARTBEAT "jobs:a"')
    assert rows(store, session, q, "jobs") == [("a", "active", T0 + 1005)]
    assert rows(store, session, "SELECT count(*) FROM system.queue WHERE heartbeat IS NOT NULL") == [(1,)]


def test_queue_rows_and_types(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    out = run_plain("SELECT * FROM system.queue ORDER BY queue_id", session, store)
    assert out.result is not None
    assert out.type_oids == (25, 20, 25, 1184, 25, 20, 1184, 1184, 25, 25, 25, 16, 25)
    assert [c.type for c in out.result.columns] == [S, INT, S, TS, S, INT, TS, TS, S, S, S, B, S]
    assert out.result.rows == [
        ("a", 1, "jobs", T0, "active", 5, T0 + 130, None, "pa", None, "proc", False, None),
        ("b", 2, "jobs", T0 + 10, "pending", 0, None, None, "pb", None, "proc", False, None),
        ("c", 3, "jobs", T0 + 10, "pending", -1, None, None, "pc", None, "proc", False, None),
    ]


def test_where_order_limit(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    r = lambda sql, *p: rows(store, session, sql, *p)  # noqa: E731
    assert r("SELECT id FROM system.queue ORDER BY priority DESC") == [("a",), ("b",), ("c",)]
    assert r("SELECT id FROM system.queue ORDER BY heartbeat, id") == [("a",), ("b",), ("c",)]
    assert r("SELECT id FROM system.queue ORDER BY heartbeat DESC, id") == [("b",), ("c",), ("a",)]
    assert r("SELECT id FROM system.queue ORDER BY heartbeat NULLS FIRST, id DESC") == [("c",), ("b",), ("a",)]
    assert r("SELECT id FROM system.queue ORDER BY id LIMIT 2 OFFSET 1") == [("b",), ("c",)]
    assert r("SELECT id FROM system.queue ORDER BY id LIMIT $1", "1") == [("a",)]
    assert r("SELECT id FROM system.queue WHERE priority <> 0 AND NOT (status = 'active')") == [("c",)]
    assert r("SELECT id FROM system.queue WHERE priority < 0 OR priority > 4 ORDER BY 1") == [("a",), ("c",)]
    assert r("SELECT id FROM system.queue WHERE id IN ('a', 'c') ORDER BY id") == [("a",), ("c",)]
    assert r("SELECT id FROM system.queue WHERE id NOT IN ('a', 'c')") == [("b",)]
    assert r("SELECT id FROM system.queue WHERE value LIKE 'p_' AND value NOT LIKE '%b'") == [("a",), ("c",)]
    assert r("SELECT id FROM system.queue WHERE queue_id >= $1 AND priority <= $2", "2", "0") == [("b",), ("c",)]
    assert r("SELECT id FROM system.queue WHERE created > '2026-01-01 00:00:00.005' ORDER BY id") == [("b",), ("c",)]
    assert r("SELECT id FROM system.queue WHERE created = '2026-01-01T00:00:00Z'") == [("a",)]
    assert r("SELECT id FROM system.queue WHERE created < $1", "2026-01-01 00:00:00.010+00") == [("a",)]
    assert r("SELECT id FROM system.queue WHERE heartbeat > now() - interval '1 second'") == [("a",)]
    assert r("SELECT id AS key, priority AS p FROM system.queue q WHERE q.exclusive = false ORDER BY p") == [
        ("c", -1), ("b", 0), ("a", 5)]


def test_aggregates(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    out = run_plain("SELECT count(*), count(heartbeat), min(created), max(priority), sum(priority), "
                    "count(DISTINCT created) FROM system.queue", session, store)
    assert out.result is not None and out.type_oids == (20, 20, 1184, 20, 20, 20)
    assert out.result.rows == [(3, 1, T0, 5, 4, 2)]
    assert rows(store, session, "SELECT count(*), max(priority) FROM system.queue WHERE false") == [(0, None)]
    assert rows(store, session, "SELECT status, min(id) FROM system.queue GROUP BY status "
                "HAVING count(*) > 1") == [("pending", "b")]
    assert rows(store, session, "SELECT DISTINCT prefix FROM system.queue") == [("jobs",)]


def test_other_tables(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    out = run_plain("SELECT * FROM system.cache", session, store)
    assert out.result is not None and out.type_oids == (25, 25, 1184, 25)
    assert out.result.rows == [("k", "c", T0 + 130 + 60_000, "v")]
    out = run_plain("SELECT path, deleted, value, expire > now() FROM system.queue_results", session, store)
    assert out.result is not None and out.type_oids == (25, 16, 25, 16)
    assert out.result.rows == [("mail:x", False, "done", True)]
    out = run_plain("SELECT prefix, pending, active, last_concurrency FROM system.queue_prefixes "
                    "WHERE prefix = 'jobs'", session, store)
    assert out.result is not None and out.type_oids == (25, 20, 20, 20)
    assert out.result.rows == [("jobs", 2, 1, 2)]
    out = run_plain("SELECT path, reason, at FROM system.queue_log", session, store)
    assert out.result is not None and out.type_oids == (25, 25, 1184)
    assert out.result.rows == [("mail:x", "acked", T0 + 130)]


def test_timestamp_text_and_session_timezone(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    scripted(store, clock)
    assert rows(store, session, "SELECT created::text FROM system.queue WHERE id = 'b'") == [
        ("2026-01-01 00:00:00.01+00",)]
    run_plain("SET TimeZone = 'Europe/Berlin'", session, store)
    assert rows(store, session, "SELECT id FROM system.queue WHERE created = '2026-01-01 01:00:00'") == [("a",)]


def test_describe_without_running(session: PlainSession) -> None:
    class Untouchable:
        clock = FakeClock(T0)

        def system_table(self, name: str):
            raise AssertionError("describe must not read the store")

    d = describe_plain("SELECT prefix, count(*) AS n, max(heartbeat) FROM system.queue "
                       "WHERE priority > $1 AND id = $2 GROUP BY prefix", session, Untouchable())
    assert d.param_count == 2 and d.param_oids == (20, 25)
    assert d.columns == (Column("prefix", S), Column("n", INT), Column("max", TS))
    assert d.type_oids == (25, 20, 1184)
    d = describe_plain("SELECT * FROM system.queue_log WHERE at < $1", session, Untouchable())
    assert d.param_oids == (1184,) and d.type_oids == (20, 25, 25, 1184, 20, 20)


@pytest.mark.parametrize(("sql", "sqlstate"), [
    ("SELECT nope FROM system.queue", "42703"),
    ("SELECT x.id FROM system.queue q", "42P01"),
    ("SELECT * FROM system.nope", "42P01"),
    ("SELECT id FROM system.queue WHERE id = 5", "42883"),
    ("SELECT id FROM system.queue WHERE priority = 'x'", "22P02"),
    ("SELECT id FROM system.queue WHERE created > 'yesterday-ish'", "22007"),
    ("SELECT id FROM system.queue WHERE priority", "42804"),
    ("SELECT status, count(*) FROM system.queue", "42803"),
    ("SELECT id FROM system.queue WHERE count(*) > 1", "42803"),
    ("SELECT id FROM system.queue ORDER BY 9", "42P10"),
    ("SELECT DISTINCT prefix FROM system.queue ORDER BY id", "42P10"),
    ("SELECT id FROM system.queue LIMIT -1", "2201W"),
    ("SELECT id FROM system.queue WHERE", "42601"),
    ("SELECT id FROM system.queue WHERE id = $1", "42P02"),
    ("SELECT avg(priority) FROM system.queue", "0A000"),
    ("SELECT * FROM system.queue a JOIN system.cache b ON a.id = b.id", "0A000"),
    ("SELECT * FROM (SELECT 1) t", "0A000"),
    ("SELECT id FROM system.queue UNION SELECT id FROM system.cache", "0A000"),
    # pg_catalog and information_schema are served (tests/server/sql/test_catalog.py)
    ("SELECT * FROM queue", "0A000"),
    ("SELECT pg_backend_pid()", "42883"),  # an unknown function, as PostgreSQL (issue 27)
])
def test_select_errors(store: MemoryStore, session: PlainSession, sql: str, sqlstate: str) -> None:
    with pytest.raises(QueueError) as info:
        run_plain(sql, session, store)
    assert info.value.sqlstate == sqlstate, info.value
    if sqlstate == "0A000" and "FROM" in sql and "avg" not in sql:
        assert info.value.message.startswith("cubequeue does not support")
        assert info.value.hint is not None and "SELECT over system.queue" in info.value.hint


def test_backslash_literals_follow_rule_4(store: MemoryStore, clock: FakeClock, session: PlainSession) -> None:
    feed(store, "QUEUE ADD \"p:a\" 'x\\\\y'")
    assert rows(store, session, "SELECT value FROM system.queue") == [("x\\y",)]
    assert rows(store, session, "SELECT id FROM system.queue WHERE value = 'x\\\\y'") == [("a",)]
    assert rows(store, session, "SELECT id FROM system.queue WHERE value = E'x\\\\y'") == [("a",)]
    assert rows(store, session, "SELECT 'it''s', 'a\\'b'") == [("it's", "a'b")]


@pytest.mark.parametrize("table", sorted(SYSTEM_TABLES))
def test_select_star_describes_the_stores_own_schema(table: str, session: PlainSession) -> None:
    """One definition: the SQL side reads the store's columns, in order, with their types."""
    described = describe_plain(f"SELECT * FROM system.{table}", session, MemoryStore(FakeClock(T0)))
    assert tuple(c.name for c in SYSTEM_TABLES[table]) == tuple(n for n, _ in SCHEMAS[table])
    assert tuple(described.columns) == SYSTEM_TABLES[table]


def test_a_frame_with_other_columns_is_our_bug_not_a_reordering(session: PlainSession) -> None:
    class Wrong:
        def clock(self) -> int:
            return T0

        def system_table(self, name: str) -> ResultSet:
            return ResultSet((Column("queue_id", INT),), [(1,)])

    with pytest.raises(QueueError) as err:
        run_plain("SELECT * FROM system.queue", session, Wrong(), ())  # type: ignore[arg-type]
    assert err.value.sqlstate == "XX000"


def test_payload_column_hints_at_value_over_psycopg(cubequeue_server) -> None:
    """QUEUE statements say ``payload``; system.queue calls it ``value``: the error says so,
    and a near miss gets PostgreSQL's "Perhaps you meant…" hint."""
    import psycopg

    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedColumn) as missing:
            conn.execute("SELECT payload FROM system.queue")
        assert missing.value.diag.message_hint == (
            'Perhaps you meant to reference the column "value" '
            "(what QUEUE statements call payload).")
        with pytest.raises(psycopg.errors.UndefinedColumn) as near:
            conn.execute("SELECT prefx FROM system.queue")
        assert near.value.diag.message_hint == 'Perhaps you meant to reference the column "prefix".'
        assert conn.execute("SELECT count(value) FROM system.queue").fetchone() == (0,)
