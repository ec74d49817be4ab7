"""The lexical bugs the one tokenizer fixed, seen end to end over the PostgreSQL wire (psycopg 3)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors


@pytest.fixture
def conn(cubequeue_server):
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as connection:
        yield connection


def test_block_comments_nest_in_the_dialect(conn):
    row = conn.execute("QUEUE ADD /* a /* b */ c */ 'lexq:1' '{}'").fetchone()
    assert row is not None and row[1] is True
    assert conn.execute("QUEUE GET /* x /* y */ z */ 'lexq:1'").fetchone() == ("{}", None)


def test_block_comments_nest_between_statements(conn):
    cur = conn.execute("/* a /* ; */ b; */ QUEUE ADD 'lexq:2' '{}'; CACHE SET 'lexc:k' 'v'")
    assert cur.fetchone()[1] is True  # type: ignore[index]
    assert cur.nextset()
    assert cur.fetchone() == (True,)


@pytest.mark.parametrize(
    "sql",
    ["QUEUE ADD 'lexq:3' E'\\777'", "SELECT E'\\777'", "SET application_name = E'\\777'"],
    ids=["dialect", "select", "set"],
)
def test_octal_escape_is_a_byte_and_must_be_utf8(conn, sql):
    with pytest.raises(errors.CharacterNotInRepertoire) as info:
        conn.execute(sql)
    assert info.value.diag.sqlstate == "22021"
    assert info.value.diag.message_primary == 'invalid byte sequence for encoding "UTF8": 0xff'
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_escaped_bytes_that_form_utf8_are_one_character(conn):
    conn.execute("CACHE SET 'lexc:e' E'\\303\\251\\xC3\\xA9'")
    assert conn.execute("CACHE GET 'lexc:e'").fetchone() == ("éé",)
    assert conn.execute("SELECT E'\\303\\251'").fetchone() == ("é",)


@pytest.mark.parametrize(
    "sql",
    ["QUEUE ADD 'lexq:4' E'\\U00110000'", "SELECT E'\\U00110000'", "SET application_name = E'\\U00110000'"],
    ids=["dialect", "select", "set"],
)
def test_unicode_escape_beyond_the_range_is_42601(conn, sql):
    with pytest.raises(errors.SyntaxError) as info:
        conn.execute(sql)
    assert info.value.diag.sqlstate == "42601"
    assert "invalid Unicode escape value" in (info.value.diag.message_primary or "")
