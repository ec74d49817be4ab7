"""Errors a psql user can act on, over psycopg (docs/dialect.md §1.7).

The grammar keeps Cube Store's wording (the WebSocket's text); the PostgreSQL wire drops
the ``at Line: L, Column: C`` suffix where field P carries the position, adds hints
(field H) and names ``SET process_id`` where the WebSocket names its header.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import errors

from cubequeue.grammar import parse
from cubequeue.grammar.errors import SyntaxError as DialectSyntaxError


def kw(server) -> dict:
    return {"host": server.host, "port": server.port, "user": "cube", "dbname": "cube"}


def failure(server, sql: str) -> psycopg.Error:
    with psycopg.connect(**kw(server), autocommit=True) as c:
        with pytest.raises(psycopg.Error) as info:
            c.execute(sql)
        assert c.execute("SELECT 1").fetchone() == (1,)  # the session stays usable
    return info.value


@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        ("QUEUE ADDD 'q:a' 'x'", "did you mean ADD?"),
        ("QUEUE RETRIVE 'q:a'", "did you mean RETRIEVE?"),
        ("CACHE GTE 'c:k'", "did you mean GET?"),
        ("SYS CACHESTORE HEALTHCHEK", "did you mean HEALTHCHECK?"),
    ],
)
def test_unknown_command_suggests_the_nearest(server, sql, hint):
    exc = failure(server, sql)
    assert isinstance(exc, errors.SyntaxError)
    assert exc.diag.message_hint == hint


def test_unknown_command_far_from_any_has_no_hint(server):
    exc = failure(server, "QUEUE XYZZY")
    assert exc.diag.message_primary == "Unknown queue command: xyzzy"
    assert exc.diag.message_hint is None


@pytest.mark.parametrize(
    ("sql", "path"),
    [
        ("CACHE GET c:k", "c:k"),
        ("QUEUE GET q:k1", "q:k1"),
        ("CACHE SET c:a:b '1'", "c:a:b"),
        ("QUEUE ADD PRIORITY 1 q:a '{}'", "q:a"),
    ],
)
def test_unquoted_path_hint_quotes_it(server, sql, path):
    exc = failure(server, sql)
    assert isinstance(exc, errors.SyntaxError)
    assert exc.diag.message_hint == f"paths and keys are string literals: write '{path}'"


def test_position_is_a_field_not_part_of_the_message(server):
    sql = "QUEUE ADD 'q:a' 'x' extra"
    exc = failure(server, sql)
    assert exc.diag.message_primary == "Expected: end of statement, found: extra"
    assert exc.diag.statement_position == str(sql.index("extra") + 1)
    # the grammar (and so the WebSocket) keeps Cube Store's wording
    with pytest.raises(DialectSyntaxError) as info:
        parse(sql)
    assert info.value.message.endswith("at Line: 1, Column: 21")


def test_unterminated_literal_message_without_location(server):
    exc = failure(server, "QUEUE GET 'q:a")
    assert exc.diag.message_primary == "Unterminated string literal, found: 'q:a"
    assert exc.diag.statement_position == "11"


def test_process_id_error_names_set_process_id(server):
    exc = failure(server, f"QUEUE ADD EXCLUSIVE '{uuid.uuid4().hex}:a' 'x'")
    assert isinstance(exc, errors.InvalidParameterValue)
    message = exc.diag.message_primary or ""
    assert "SET process_id = '…'" in message
    assert "x-process-id" not in message
