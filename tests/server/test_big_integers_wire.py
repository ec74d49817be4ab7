"""Integers of any length over the PostgreSQL wire: each field's own error, never XX000.

Python's ``int()`` refuses more than 4,300 digits; the server measures a client's digit
string first (grammar.lexical.bounded_int, server/sql/limits.py), so a 5,000-digit
``QUEUE GET``, ``ADD PRIORITY``, ``RESULT_BLOCKING`` or ``CACHE SET TTL`` gets the field's
22023, and plain SQL its 22003 / 42P02 / 54000, as literals and as parameters (psycopg).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wsclient import WsClient

from cubequeue.grammar.lexical import INT_RANGES
from cubequeue.server.cubews.messages import HttpError, HttpResultSet
from cubequeue.server.options import ConfigError, load_config
from cubequeue.server.pytest_plugin import CubequeueServer

BIG = "9" * 5000

#: (statement with ``{n}``, the field its error names); RESULT_BLOCKING's own waits and
#: SYS CLOCK are left to the grammar's tests (in-range values would wait or move time)
FIELDS = [
    ("QUEUE ADD PRIORITY {n} 'bigint:k' 'v'", "priority"),
    ("QUEUE ADD ORPHANED {n} 'bigint:k' 'v'", "orphaned"),
    ("CACHE SET TTL {n} 'bigint:k' 'v'", "ttl"),
    ("QUEUE RETRIEVE CONCURRENCY {n} 'bigint:k'", "concurrency"),
    ("QUEUE RESULT_BLOCKING {n} 'bigint:k'", "timeout"),
    ("QUEUE TO_CANCEL {n} 1 'bigint'", "heartbeat timeout"),
    ("QUEUE TO_CANCEL 1 {n} 'bigint'", "orphaned timeout"),
    ("QUEUE GET {n}", "id"),
    ("QUEUE ACK {n} 'r'", "id"),
]


@pytest.fixture(scope="module")
def srv(launcher: Callable[..., CubequeueServer]) -> CubequeueServer:
    return launcher()


@pytest.fixture(scope="module")
def conn(srv: CubequeueServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(srv.dsn, autocommit=True) as connection:
        yield connection


def _error(conn: psycopg.Connection, sql: str,
           params: tuple[str, ...] | None = None) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(sql, params)
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    return raised.value


def _out_of_range(field: str) -> st.SearchStrategy[str]:
    """Digit strings outside ``field``'s range: just past either end, long, very long."""
    lo, hi = INT_RANGES[field]
    ends = [str(hi + 1), str(2**63), str(2**64), "9" * 34, BIG, "-" + BIG, "0" * 4999 + "1" + "0" * 20]
    if lo == 0:
        ends += ["-1", str(-(2**63))]
    else:
        ends += [str(lo - 1), "-" + "9" * 34]
    long = st.integers(21, 6000).map(lambda n: "9" * n)
    above = st.integers(hi + 1, hi * 10**6).map(str)
    return st.one_of(st.sampled_from([e for e in ends if _outside(e, lo, hi)]), long, above)


def _outside(text: str, lo: int, hi: int) -> bool:
    digits = text.lstrip("-").lstrip("0") or "0"
    if len(digits) > 30:
        return True
    value = int(digits) * (-1 if text.startswith("-") else 1)
    return not lo <= value <= hi


@pytest.mark.parametrize(("template", "field"), FIELDS)
def test_a_5000_digit_literal_gets_the_fields_22023(conn: psycopg.Connection, template: str,
                                                    field: str) -> None:
    err = _error(conn, template.format(n=BIG))
    assert err.sqlstate == "22023"
    assert err.diag.message_primary is not None
    assert err.diag.message_primary.startswith(f"{field} must be a valid integer"), err


@settings(deadline=None, max_examples=120,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), index=st.integers(0, len(FIELDS) - 1), as_param=st.booleans())
def test_out_of_range_integers_name_their_field(conn: psycopg.Connection, data: st.DataObject,
                                                index: int, as_param: bool) -> None:
    template, field = FIELDS[index]
    if as_param and field == "id":
        template = template.replace("{n}", "{n}::bigint")  # a bare text id is a path
    text = data.draw(_out_of_range(field))
    if as_param:
        err = _error(conn, template.format(n="%s"), (text,))
    else:
        err = _error(conn, template.format(n=text))
    assert err.sqlstate == "22023", (text[:40], err)
    message = err.diag.message_primary or ""
    assert message.startswith(f"{field} must be a"), message
    assert len(message) < 200


PLAIN = [
    (f"SELECT {BIG}", "22003"),
    (f"SELECT * FROM system.queue LIMIT {BIG}", "22003"),
    (f"SELECT * FROM system.queue OFFSET {BIG}", "22003"),
    ("SELECT * FROM system.queue LIMIT 9999999999999999999999999999999999", "22003"),
    (f"SELECT 1 LIMIT {2**63}", "22003"),
    (f"SELECT * FROM system.queue WHERE queue_id = {BIG}", "22003"),
    (f"SELECT * FROM system.queue ORDER BY {BIG}", "22003"),
    (f"SELECT count(*) FROM system.queue GROUP BY {BIG}", "22003"),
    (f"SELECT 1 + {BIG}", "22003"),
    (f"SELECT '{BIG}'::int8", "22003"),
    (f"SELECT * FROM system.queue LIMIT '{BIG}'", "22003"),
    (f"SELECT ${BIG}", "42P02"),
    ("SELECT $100000000", "42P02"),
    (f"SELECT * FROM pg_class WHERE oid = ${BIG}", "42P02"),
    ("SELECT * FROM pg_class WHERE oid = $100000000", "42P02"),
    (f"SELECT interval '{BIG}:00'", "54000"),
    ("SELECT interval '99999999999999999999999 hours'", "22003"),
    (f"SET statement_timeout = {BIG}", "22023"),
    (f"SET statement_timeout = '{BIG}ms'", "22023"),
]


@pytest.mark.parametrize(("sql", "sqlstate"), PLAIN, ids=lambda v: v[:40])
def test_plain_sql_numbers_are_range_checked(conn: psycopg.Connection, sql: str,
                                             sqlstate: str) -> None:
    err = _error(conn, sql)
    assert err.sqlstate == sqlstate, err
    assert len(str(err)) < 400  # a 5,000-digit literal is not echoed back whole


@pytest.mark.parametrize("sql", [
    "SELECT * FROM system.queue LIMIT %s",
    "SELECT %s::int8",
])
def test_plain_sql_parameters_are_range_checked(conn: psycopg.Connection, sql: str) -> None:
    err = _error(conn, sql, (BIG,))
    assert err.sqlstate == "22003", err


@pytest.mark.parametrize("text", [BIG, "-" + BIG, "0" * 5000 + "1" + "0" * 25])
def test_an_option_of_thousands_of_digits_is_one_line_naming_it(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^invalid value for --max-items: .* must be at least 1"):
        load_config(["--max-items", "-" + BIG], {})
    with pytest.raises(ConfigError, match=r"^invalid value for --port: .* must be between 1 and"):
        load_config(["--port", text], {})


def test_the_websocket_wire_names_the_field_too(srv: CubequeueServer) -> None:
    async def ask() -> list[str]:
        async with WsClient(srv.ws_url) as client:
            answers = [await client.query(template.format(n=BIG)) for template, _ in FIELDS]
            answers.append(await client.query("SELECT 1"))
        errors = [a.error for a in answers[:-1] if isinstance(a, HttpError)]
        assert isinstance(answers[-1], HttpResultSet)  # the connection goes on
        return errors

    errors = asyncio.run(ask())
    assert [e.split(" must be")[0] for e in errors] == [field for _, field in FIELDS]
    assert all(len(e) < 200 for e in errors)
