"""Plain SQL is bounded in time and bytes: LIKE matches without backtracking, and a
statement too large or too complex for the planner is refused with 54000 naming the limit
before sqlglot reads it."""

from __future__ import annotations

import re

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql import PlainSession, run_plain, select
from cubequeue.server.sql.like import (
    InvalidEscapeCharacter,
    InvalidEscapeSequence,
    compile_like,
)
from cubequeue.server.sql.limits import (
    MAX_EXPRESSION_NODES,
    MAX_IN_LIST_ITEMS,
    MAX_SQL_STATEMENT_BYTES,
    MAX_SQL_TOKENS,
)
from cubequeue.server.sql.select import plan_for
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

# ---- LIKE --------------------------------------------------------------------------

#: 30 ``%a`` then ``%b`` over 3,000 ``a``: a backtracking matcher tries C(3000, 30) ways
EXPLOSIVE = "%a" * 30 + "%b"


def reference(pattern: str, escape: str = "\\") -> re.Pattern[str] | None:
    """The fnmatch-like translation (fine on short strings); None when the pattern ends
    with its escape character."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if escape and c == escape:
            if i + 1 == len(pattern):
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.S)


PATTERN_CHARS = st.text(alphabet="ab%_\\!\n", max_size=12)
VALUE_CHARS = st.text(alphabet="ab%_\\!\n", max_size=14)


@settings(deadline=None, max_examples=600)
@given(PATTERN_CHARS, VALUE_CHARS, st.sampled_from(["\\", "!", ""]))
def test_like_agrees_with_the_regex_translation(pattern: str, value: str, escape: str) -> None:
    rx = reference(pattern, escape)
    if rx is None:
        with pytest.raises(InvalidEscapeSequence):
            compile_like(pattern, escape=escape)
        return
    assert compile_like(pattern, escape=escape).matches(value) == (rx.fullmatch(value) is not None)


@settings(deadline=None, max_examples=300)
@given(st.text(alphabet="aAbB%_", max_size=10), st.text(alphabet="aAbBİ", max_size=12))
def test_ilike_is_like_of_the_lower_cased_text(pattern: str, value: str) -> None:
    rx = reference(pattern.lower())
    assert rx is not None
    low = "".join(c.lower() if len(c.lower()) == 1 else c for c in value)
    assert compile_like(pattern, insensitive=True).matches(value) == (rx.fullmatch(low) is not None)


def test_like_pattern_rules_are_postgresql_s() -> None:
    with pytest.raises(InvalidEscapeSequence, match="must not end with escape character"):
        compile_like("ab\\")
    with pytest.raises(InvalidEscapeCharacter):
        compile_like("ab", escape="!!")
    assert compile_like("a!%", escape="!").matches("a%")
    assert not compile_like("a!%", escape="!").matches("ab")
    assert compile_like("a\\%", escape="").matches("a\\xyz")
    assert not compile_like(EXPLOSIVE).matches("a" * 3000)
    assert compile_like(EXPLOSIVE).matches("a" * 3000 + "b")


@pytest.mark.timeout(120)
def test_like_over_a_large_value_answers_at_once_over_psycopg(
        cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        conn.execute(f"QUEUE ADD 'like:big' '{'a' * 3000}'")
        conn.execute("QUEUE ADD 'like:small' 'ab'")
        count = "SELECT count(*) FROM system.queue WHERE value {} %s"
        assert conn.execute(count.format("LIKE"), (EXPLOSIVE,)).fetchone() == (0,)
        assert conn.execute(count.format("NOT LIKE"), (EXPLOSIVE,)).fetchone() == (2,)
        assert conn.execute(count.format("ILIKE"), ("%A%B",)).fetchone() == (1,)
        assert conn.execute(count.format("LIKE"), ("a_",)).fetchone() == (1,)
        assert conn.execute(
            "SELECT count(*) FROM system.queue WHERE value LIKE 'a!_' ESCAPE '!'").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InvalidEscapeSequence):
            conn.execute(count.format("LIKE"), ("a\\",))
        assert conn.execute("SELECT 1").fetchone() == (1,)


# ---- statement size and work ---------------------------------------------------------

def plan_error(sql: str, max_bytes: int = MAX_SQL_STATEMENT_BYTES) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as e:
        plan_for(sql, max_bytes)
    assert e.value.sqlstate == "54000"
    return e.value


def test_a_statement_over_the_byte_bound_is_refused_before_parsing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("sqlglot was reached")

    monkeypatch.setattr(select.sqlglot, "parse", no_parse)
    sql = "SELECT count(*) FROM system.queue WHERE value = '" + "x" * 5000 + "'"
    err = plan_error(sql, 4096)
    assert "--max-sql-statement-bytes (4096)" in err.message and "5" in err.message
    # bytes, not characters: 1,400 three-byte characters are 4,200 bytes
    plan_error("SELECT '" + "€" * 1400 + "'", 4096)
    err = plan_error("SELECT count(*) FROM system.queue WHERE id IN ("
                     + ",".join(["1"] * 6000) + ")")
    assert f"more than {MAX_SQL_TOKENS} tokens" in err.message


def test_one_long_string_is_one_token_and_passes() -> None:
    plan = plan_for("SELECT count(*) FROM system.queue WHERE value = '" + "x" * 500_000 + "'")
    assert plan.columns[0].name == "count"


def test_in_lists_and_expressions_are_bounded_after_parsing() -> None:
    ids = lambda n: ",".join(f"'{i}'" for i in range(n))  # noqa: E731
    plan_for(f"SELECT id FROM system.queue WHERE id IN ({ids(MAX_IN_LIST_ITEMS)})")
    err = plan_error(f"SELECT id FROM system.queue WHERE id IN ({ids(MAX_IN_LIST_ITEMS + 1)})")
    assert f"IN list of {MAX_IN_LIST_ITEMS + 1} items exceeds {MAX_IN_LIST_ITEMS}" in err.message
    err = plan_error("SELECT " + "+".join(["priority"] * 3400) + " FROM system.queue")
    assert f"more than {MAX_EXPRESSION_NODES}" in err.message


def test_a_long_constant_in_list_is_a_set_with_sql_null_logic() -> None:
    store, session = MemoryStore(FakeClock(1_767_225_600_000)), PlainSession(server_version="15", user="u")
    for key in ("a", "b", "c"):
        store.execute(parse(f"QUEUE ADD 'p:{key}' 'v'"), "proc")

    def ids(where: str) -> list[object]:
        out = run_plain(f"SELECT id FROM system.queue WHERE {where} ORDER BY id", session, store)
        assert out.result is not None
        return [r[0] for r in out.result.rows]

    many = ",".join(f"'x{i}'" for i in range(900))
    assert ids(f"id IN ({many}, 'b', 'c')") == ["b", "c"]
    assert ids(f"id NOT IN ({many}, 'b')") == ["a", "c"]
    assert ids("id NOT IN ('b', NULL)") == []  # NULL: unknown, never true
    assert ids("(id IN ('b', NULL)) IS NULL") == ["a", "c"]


def test_the_limits_over_psycopg_keep_the_session(cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        big = "SELECT count(*) FROM system.queue WHERE value = '" + "x" * (2 << 20) + "'"
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as e:
            conn.execute(big)
        assert "--max-sql-statement-bytes" in e.value.diag.message_primary
        in_list = ",".join(["1"] * 6000)
        with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="tokens"):
            conn.execute(f"SELECT count(*) FROM system.queue WHERE queue_id IN ({in_list})")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="IN list"):
            conn.execute("SELECT count(*) FROM system.queue WHERE queue_id IN ("
                         + ",".join(map(str, range(2000))) + ")")
        assert conn.execute("SELECT count(*) FROM system.queue WHERE queue_id IN (1, 2)"
                            ).fetchone() == (0,)


@pytest.mark.cubequeue_args("--max-sql-statement-bytes", "2000")
def test_max_sql_statement_bytes_takes_effect_on_the_wire(
        cubequeue_server: CubequeueServer) -> None:
    """The option reaches plain SQL through the executor: SELECT and the refused DDL alike
    are measured before sqlglot reads them, and the session stays usable."""
    long_select = "SELECT count(*) FROM system.queue WHERE id = '" + "x" * 2500 + "'"
    long_ddl = "CREATE TABLE s.t (" + ", ".join(f"c{i} int" for i in range(400)) + ")"
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        for sql in (long_select, long_ddl):
            with pytest.raises(psycopg.errors.ProgramLimitExceeded,
                               match="--max-sql-statement-bytes"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM system.queue WHERE id = 'x'").fetchone() == (0,)
