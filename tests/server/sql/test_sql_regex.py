"""``~``, ``~*``, ``!~`` and ``!~*`` match through RE2 in linear time, in plain SQL and in
psql's catalog queries alike; a bad pattern is 2201B and the session keeps serving."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import parse
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.regexes import (
    MAX_REGEX_PATTERN_CHARS,
    InvalidRegularExpression,
    compile_regex,
)
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.store import MemoryStore

#: exponential for a backtracking engine: each extra ``a`` doubles the ways to split them
CATASTROPHIC = "(a+)+b"


@pytest.fixture
def no_backtracking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Python's ``re`` must never be handed the catastrophic pattern (it would hang)."""
    real = re._compile  # type: ignore[attr-defined]

    def spy(pattern: object, flags: object) -> object:
        if isinstance(pattern, str) and CATASTROPHIC in pattern:
            raise AssertionError("the pattern went to Python's backtracking re")
        return real(pattern, flags)

    monkeypatch.setattr(re, "_compile", spy)
    yield


def rows(sql: str) -> list[tuple[object, ...]]:
    store, session = MemoryStore(FakeClock(1_767_225_600_000)), PlainSession(server_version="15", user="u")
    for key, value in (("p:Ap", "Apple"), ("p:an", "banana"), ("p:ie", "cherry\npie")):
        store.execute(parse(f"QUEUE ADD '{key}' '{value}'"), "proc")
    out = run_plain(sql, session, store)
    assert out.result is not None
    return list(out.result.rows)


def test_the_catastrophic_pattern_answers_without_backtracking(no_backtracking: None) -> None:
    run = "a" * 26
    assert rows(f"SELECT '{run}' ~ '{CATASTROPHIC}', '{run}b' ~ '{CATASTROPHIC}'") == [(False, True)]
    assert compile_regex(CATASTROPHIC).search("a" * 100_000) is False
    assert rows(f"SELECT count(*) FROM system.queue WHERE value ~ '{CATASTROPHIC}'") == [(0,)]
    # psql's catalog queries run in SQLite, through the same matcher
    assert rows(f"SELECT relname FROM pg_catalog.pg_class WHERE '{run}' ~ '{CATASTROPHIC}'") == []
    assert rows("SELECT relname FROM pg_catalog.pg_class "
                f"WHERE '{run}b' OPERATOR(pg_catalog.~) '{CATASTROPHIC}' LIMIT 1") != []


def test_the_four_operators_and_nulls() -> None:
    assert rows("SELECT 'Apple' ~ 'app', 'Apple' ~* 'app', 'Apple' !~ 'app', "
                "'Apple' !~* 'app'") == [(False, True, True, False)]
    assert rows("SELECT NULL ~ 'a', 'a' ~ NULL, NULL !~* NULL") == [(None, None, None)]
    assert rows("SELECT id FROM system.queue WHERE value ~* '^a' ORDER BY id") == [("Ap",)]
    assert rows("SELECT id FROM system.queue WHERE value !~ 'an' ORDER BY id") == [("Ap",), ("ie",)]
    assert rows("SELECT id FROM system.queue WHERE value !~* 'A' ORDER BY id") == [("ie",)]
    # PostgreSQL's defaults: '.' matches a newline, '$' only at the end
    assert rows("SELECT id FROM system.queue WHERE value ~ 'y.p' ORDER BY id") == [("ie",)]
    assert rows("SELECT count(*) FROM system.queue WHERE value ~ 'y$'") == [(0,)]
    # a pattern from a column: compiled per distinct value
    assert rows("SELECT count(*) FROM system.queue WHERE value ~ id") == [(3,)]
    assert rows("SELECT id FROM system.queue WHERE value ~* prefix ORDER BY id") == [("Ap",), ("ie",)]


@pytest.mark.parametrize("pattern", ["(", "[z-a]", "*", "a{2,1}", "(?=a)", "(a)\\1", "x\\m"])
def test_a_pattern_that_does_not_compile_is_2201b(pattern: str) -> None:
    with pytest.raises(InvalidRegularExpression) as e:
        compile_regex(pattern)
    assert e.value.sqlstate == "2201B"
    assert e.value.message.startswith("invalid regular expression: ")
    assert e.value.detail == f"pattern: {pattern}"


def test_pattern_length_and_match_work_are_bounded() -> None:
    compile_regex("a" * MAX_REGEX_PATTERN_CHARS)
    with pytest.raises(LimitExceeded) as e:
        compile_regex("a" * (MAX_REGEX_PATTERN_CHARS + 1))
    assert f"exceeds the limit of {MAX_REGEX_PATTERN_CHARS}" in e.value.message
    # a pattern whose DFA blows up falls back to RE2's NFA: text x program is its cost
    with pytest.raises(LimitExceeded) as e:
        compile_regex("a[ab]{999}c").search("ab" * 500_000)
    assert "text bytes x pattern size" in e.value.message
    assert compile_regex("foo").search("x" * 500_000 + "foo") is True


# ---- the same answers as Python's re on small patterns it cannot get wrong --------------

ATOMS = st.sampled_from(["a", "b", "c", ".", "[ab]", "[^a]", "[a-c]"])


def _pattern(depth: int) -> st.SearchStrategy[str]:
    atom = ATOMS if depth == 0 else st.one_of(ATOMS, _pattern(depth - 1).map(lambda p: f"({p})"))
    piece = st.tuples(atom, st.sampled_from(["", "", "*", "+", "?"])).map("".join)
    branch = st.lists(piece, min_size=1, max_size=4).map("".join)
    return st.lists(branch, min_size=1, max_size=3).map("|".join)


PATTERNS = st.tuples(st.sampled_from(["", "^"]), _pattern(2), st.sampled_from(["", "$"])).map(
    lambda t: f"{t[0]}({t[1]}){t[2]}")


@settings(deadline=None, max_examples=400)
@given(PATTERNS, st.text(alphabet="abcAB", max_size=12), st.booleans())
def test_matches_agree_with_python_re(pattern: str, text: str, insensitive: bool) -> None:
    flags = re.S | (re.I if insensitive else 0)
    want = re.search(pattern, text, flags) is not None
    assert compile_regex(pattern, insensitive=insensitive).search(text) is want


# ---- over psycopg, with another client alongside ----------------------------------------

@pytest.mark.timeout(180)
def test_the_catastrophic_pattern_does_not_hold_other_clients(
        cubequeue_server: CubequeueServer) -> None:
    results: dict[str, object] = {}

    def catastrophic() -> None:
        with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
            results["regex"] = conn.execute(
                "SELECT %s ~ %s", ("a" * 5000, CATASTROPHIC)).fetchone()

    def select_one() -> None:
        with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
            results["one"] = conn.execute("SELECT 1").fetchone()

    first = threading.Thread(target=catastrophic, daemon=True)
    first.start()
    second = threading.Thread(target=select_one, daemon=True)
    second.start()
    # generous: a backtracking engine never answers 5,000 a's (2^5000 splits)
    first.join(60)
    second.join(60)
    assert results == {"regex": (False,), "one": (1,)}


def test_bad_patterns_over_psycopg_are_2201b_and_the_session_goes_on(
        cubequeue_server: CubequeueServer) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        for sql, params in (("SELECT 'x' ~ '('", None), ("SELECT 'x' ~* '('", None),
                            ("SELECT 'x' !~ '[z-a]'", None), ("SELECT 'x' !~* %s", ("(a)\\1",)),
                            ("SELECT relname FROM pg_catalog.pg_class "
                             "WHERE relname OPERATOR(pg_catalog.~) '('", None)):
            with pytest.raises(psycopg.errors.InvalidRegularExpression) as e:
                conn.execute(sql, params)
            assert e.value.sqlstate == "2201B"
            assert "invalid regular expression" in str(e.value)
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute("SELECT 'x' ~ %s", ("a" * (MAX_REGEX_PATTERN_CHARS + 1),))
        assert conn.execute("SELECT 'Apple' ~* 'APP', 'Apple' !~ 'p', 'Apple' !~* 'Q'").fetchone() \
            == (True, False, True)
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_the_catalog_path_has_all_four_operators(cubequeue_server: CubequeueServer) -> None:
    base = "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname {} %s ORDER BY 1"
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        def names(op: str, pattern: str) -> list[str]:
            return [r[0] for r in conn.execute(base.format(op), (pattern,)).fetchall()]

        assert names("~", "^(queue)$") == ["queue"]
        assert names("~*", "^(QUEUE)$") == ["queue"]
        assert "queue" not in names("!~", "^(queue)$") and names("!~", "^(queue)$")
        assert "queue" not in names("!~*", "^(QUEUE)$")
        assert names("OPERATOR(pg_catalog.~)", f"^({CATASTROPHIC})$") == []
