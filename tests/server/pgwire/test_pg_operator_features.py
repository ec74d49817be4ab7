"""Over the PostgreSQL wire: the test clock, purge, system.queue_prefixes,
system.queue_log and the hard caps — against the real server, with no sleeping to move
time (``SYS CLOCK ADVANCE``/``FREEZE`` instead)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors

FOUR_HOURS_MS = 4 * 3600 * 1000


@pytest.fixture(scope="module")
def clock_server(launcher):  # type: ignore[no-untyped-def]
    """A server of this module's own: its clock jumps would disturb other tests."""
    proc = launcher("--test-clock", "--queue-log-size", "100")
    yield proc
    proc.stop()


@pytest.fixture
def conn(clock_server: Any) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(clock_server.dsn, autocommit=True) as c:
        c.execute("QUEUE TRUNCATE")
        c.execute("CACHE TRUNCATE")
        c.execute("SYS CLOCK RESUME")
        yield c


def rows(c: psycopg.Connection[tuple[object, ...]], sql: str) -> list[tuple[object, ...]]:
    return c.execute(sql).fetchall()


def test_sys_clock_reports_offset_and_frozen(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    (now, offset, frozen), = rows(conn, "SYS CLOCK")
    assert frozen is False
    (now2, offset2, frozen2), = rows(conn, "SYS CLOCK ADVANCE 1500")
    assert offset2 == offset + 1500 and frozen2 is False
    assert (now2 - now).total_seconds() >= 1.5
    (frozen_at, _, f), = rows(conn, "SYS CLOCK FREEZE")
    assert f is True
    (still, _, _), = rows(conn, "SYS CLOCK")
    assert still == frozen_at
    (_, _, f2), = rows(conn, "SYS CLOCK RESUME")
    assert f2 is False


def test_orphaned_item_found_after_advance_without_sleeping(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    (qid, added, _), = rows(conn, "QUEUE ADD PRIORITY 1 'orph:a' '{}'")
    assert added is True
    assert rows(conn, "QUEUE TO_CANCEL 120000 120000 'orph'") == []
    conn.execute("SYS CLOCK ADVANCE 120001")
    assert rows(conn, "QUEUE TO_CANCEL 120000 120000 'orph'") == [("a", qid)]
    assert rows(conn, "QUEUE ORPHANED 120000 'orph'") == [("a", qid)]


def test_stalled_item_found_after_advance(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    (qid, _, _), = rows(conn, "QUEUE ADD 'stall:a' '{}'")
    assert rows(conn, "QUEUE RETRIEVE CONCURRENCY 1 'stall:a'")[0][4] == qid
    conn.execute("SYS CLOCK ADVANCE 5000")
    assert rows(conn, "QUEUE STALLED 4000 'stall'") == [("a", qid)]
    conn.execute("QUEUE HEARTBEAT 'stall:a'")
    assert rows(conn, "QUEUE STALLED 4000 'stall'") == []


def test_cache_ttl_expires_by_advance(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    assert rows(conn, "CACHE SET TTL 60 'ttl:k' 'v'") == [(True,)]
    conn.execute("SYS CLOCK ADVANCE 59000")
    assert rows(conn, "CACHE GET 'ttl:k'") == [("v",)]
    conn.execute("SYS CLOCK ADVANCE 1001")
    assert rows(conn, "CACHE GET 'ttl:k'") == [(None,)]
    assert rows(conn, "CACHE KEYS 'ttl'") == []
    assert rows(conn, "CACHE SET NX 'ttl:k' 'again'") == [(True,)]


def test_result_expiry_follows_the_clock(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    (qid, _, _), = rows(conn, "QUEUE ADD 'res:a' '{}'")
    conn.execute(f"QUEUE ACK {qid} 'done'")
    assert rows(conn, f"QUEUE RESULT {qid}")[0][0] == "done"
    conn.execute("SYS CLOCK ADVANCE 60001")  # --results-expire defaults to 60 s
    assert rows(conn, f"QUEUE RESULT {qid}") == []


def test_clock_control_refused_without_the_flag(start_server) -> None:  # type: ignore[no-untyped-def]
    proc = start_server()
    with psycopg.connect(proc.dsn, autocommit=True) as c:
        for stmt in ("SYS CLOCK", "SYS CLOCK ADVANCE 10", "SYS CLOCK FREEZE", "SYS CLOCK RESUME"):
            with pytest.raises(errors.InsufficientPrivilege) as info:
                c.execute(stmt)
            assert info.value.sqlstate == "42501"
            assert "clock control is disabled; start the server with --test-clock" in str(info.value)
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_queue_purge_counts_and_wakes_no_waiter(
    clock_server: Any, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    for key in ("a", "b", "c"):
        conn.execute(f"QUEUE ADD 'purge:{key}' '{{}}'")
    conn.execute("QUEUE RETRIEVE CONCURRENCY 5 'purge:a'")
    conn.execute("QUEUE ADD 'other:x' '{}'")

    waited: list[list[tuple[object, ...]]] = []

    def wait() -> None:
        with psycopg.connect(clock_server.dsn, autocommit=True) as c2:
            waited.append(c2.execute("QUEUE RESULT_BLOCKING 1500 'purge:a'").fetchall())

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert rows(conn, "QUEUE PURGE PENDING 'purge'") == [(2,)]
    assert rows(conn, "QUEUE PURGE ACTIVE 'purge'") == [(1,)]
    assert rows(conn, "QUEUE PURGE 'purge'") == [(0,)]
    waiter.join(30)
    assert waited == [[]], "a purge must not wake a RESULT_BLOCKING waiter"
    assert rows(conn, "QUEUE RESULT 'purge:a'") == []
    assert [r[0] for r in rows(conn, "QUEUE LIST 'other'")] == ["x"]


def test_cache_purge_uses_the_keys_prefix_rule(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    for key in ("cp:a", "cp:b", "cp:b:nested", "cpx:c"):
        conn.execute(f"CACHE SET '{key}' '1'")
    assert rows(conn, "CACHE PURGE 'cp'") == [(2,)]
    assert rows(conn, "CACHE KEYS 'cp'") == []
    assert rows(conn, "CACHE KEYS 'cp:b'") == [("cp:b:nested",)]
    assert rows(conn, "CACHE GET 'cpx:c'") == [("1",)]


def test_queue_prefixes_exact_rows(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute("SYS CLOCK FREEZE")
    conn.execute("QUEUE ADD PRIORITY 1 'sum:a' '{}'")
    conn.execute("SYS CLOCK ADVANCE 1000")
    conn.execute("QUEUE ADD 'sum:b' '{}'")
    conn.execute("QUEUE ADD 'sum:c' '{}'")
    conn.execute("QUEUE RETRIEVE CONCURRENCY 3 'sum:a'")
    conn.execute("SYS CLOCK ADVANCE 2000")
    conn.execute("QUEUE ADD_AND_RETRIEVE 'sum:d' '{}' 7")
    conn.execute("SYS CLOCK ADVANCE 500")
    conn.execute("QUEUE ACK 'sum:c' 'r'")
    got = rows(
        conn,
        "SELECT prefix, pending, active, results, oldest_pending_ms, max_heartbeat_age_ms,"
        " last_concurrency FROM system.queue_prefixes WHERE prefix = 'sum'",
    )
    # pending: b (added 2.5 s ago); active: a (heartbeat 2.5 s ago) and d (0.5 s ago);
    # results: c's; the latest concurrency asked for was ADD_AND_RETRIEVE's 7.
    assert got == [("sum", 1, 2, 1, 2500, 2500, 7)]
    conn.execute("QUEUE HEARTBEAT 'sum:a'")
    got2 = rows(conn, "SELECT max_heartbeat_age_ms FROM system.queue_prefixes WHERE prefix = 'sum'")
    assert got2 == [(500,)]


def test_queue_log_reasons(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute("SYS CLOCK FREEZE")
    ids = {}
    for key in ("acked", "cancelled", "stalled", "purged", "expired"):
        ids[key] = rows(conn, f"QUEUE ADD 'log:{key}' '{{}}'")[0][0]
    conn.execute("QUEUE RETRIEVE CONCURRENCY 9 'log:acked'")
    conn.execute("SYS CLOCK ADVANCE 300")
    conn.execute(f"QUEUE ACK {ids['acked']} 'ok'")
    conn.execute(f"QUEUE CANCEL {ids['cancelled']}")
    conn.execute("QUEUE RETRIEVE CONCURRENCY 9 'log:stalled'")
    conn.execute("SYS CLOCK ADVANCE 10000")
    assert rows(conn, "QUEUE TO_CANCEL 5000 3600000 'log'") == [("stalled", ids["stalled"])]
    conn.execute(f"QUEUE CANCEL {ids['stalled']}")
    assert rows(conn, "QUEUE PURGE PENDING 'log'") == [(2,)]  # 'purged' and 'expired'
    ids["expired"] = rows(conn, "QUEUE ADD 'log:expired' '{}'")[0][0]  # a new item
    conn.execute(f"SYS CLOCK ADVANCE {FOUR_HOURS_MS + 1}")
    conn.execute("SYS CACHESTORE COMPACTION")
    got = rows(
        conn,
        "SELECT path, reason, queued_ms, active_ms FROM system.queue_log"
        " WHERE path LIKE 'log:%' ORDER BY at, id",
    )
    assert got == [
        ("log:acked", "acked", 0, 300),
        ("log:cancelled", "cancelled", 300, None),
        ("log:stalled", "cancelled_stalled", 300, 10000),
        ("log:purged", "purged", 10300, None),
        ("log:expired", "purged", 10300, None),  # the first 'log:expired' item
        ("log:expired", "expired", FOUR_HOURS_MS + 1, None),
    ]


@pytest.fixture(scope="module")
def capped(launcher):  # type: ignore[no-untyped-def]
    proc = launcher(
        "--max-items", "2", "--max-payload-bytes", "100", "--cache-max-entry-bytes", "50"
    )
    yield proc
    proc.stop()


def test_caps_refuse_with_54000_and_store_nothing(capped: Any) -> None:
    with psycopg.connect(capped.dsn, autocommit=True) as c:
        c.execute("QUEUE TRUNCATE")
        with pytest.raises(errors.ProgramLimitExceeded) as big:
            c.execute("QUEUE ADD 'cap:big' %s", ("x" * 101,))
        assert "--max-payload-bytes" in str(big.value) and "100" in str(big.value)
        assert c.execute("QUEUE GET 'cap:big'").fetchall() == []

        c.execute("QUEUE ADD 'cap:a' '{}'")
        c.execute("QUEUE ADD 'cap:b' '{}'")
        for stmt in ("QUEUE ADD 'cap:c' '{}'", "QUEUE ADD_AND_RETRIEVE 'cap:c' '{}' 9"):
            with pytest.raises(errors.ProgramLimitExceeded) as many:
                c.execute(stmt)
            assert "--max-items" in str(many.value) and "2" in str(many.value)
        assert [r[0] for r in c.execute("QUEUE LIST 'cap'").fetchall()] == ["a", "b"]

        with pytest.raises(errors.ProgramLimitExceeded):
            c.execute("QUEUE ACK 'cap:a' %s", ("r" * 101,))
        assert c.execute("QUEUE GET 'cap:a'").fetchall() == [("{}", None)]
        assert c.execute("QUEUE RESULT 'cap:a'").fetchall() == []

        with pytest.raises(errors.ProgramLimitExceeded):
            c.execute("CACHE SET 'cap:k' %s", ("v" * 50,))
        assert c.execute("CACHE GET 'cap:k'").fetchall() == [(None,)]
        assert c.execute("SELECT 1").fetchone() == (1,)
