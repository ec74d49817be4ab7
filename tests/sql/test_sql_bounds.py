"""Plain SQL is bounded in time and bytes: LIKE matches without backtracking, and a
statement too large or too complex for the planner is refused with 54000 naming the limit
before sqlglot reads it."""

from __future__ import annotations

import re

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql.like import (
    InvalidEscapeCharacter,
    InvalidEscapeSequence,
    compile_like,
)

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
