"""SELECT over ``pg_catalog`` and ``information_schema``: what psql's ``\\d`` reads.

psql 15 describes objects with catalog queries of joins, subqueries, UNIONs, regexes and
arrays (PostgreSQL's ``src/bin/psql/describe.c`` and ``tab-complete.c``). Rather than
matching their texts, cubequeue runs them: the catalog rows of :mod:`.catalog_tables`
(derived from the system tables' own column tuples) are loaded into an in-memory SQLite
database (the standard library's ``sqlite3``: a complete, well-kept SQL engine with no new
dependency), with ``pg_catalog`` and ``information_schema`` attached as databases of those
names, and each statement is transpiled by sqlglot (postgres → sqlite) after the rewrites
of :mod:`.catalog_rewrite`, with PostgreSQL's functions registered by
:mod:`.catalog_functions`.

Bounded: a statement longer than :data:`MAX_STATEMENT_BYTES`, a result of more than
:data:`MAX_ROWS` rows and a run of more than :data:`MAX_STEPS` SQLite progress steps are
each refused with 54000 naming the limit. A statement the engine cannot answer (a table or
function the catalog does not have, syntax sqlglot does not read) is 0A000 with the hint
of every refusal; the connection stays usable. The database is read-only
(``PRAGMA query_only``), so a statement cannot change what the next one sees.

Entry points: :func:`is_catalog_query` (does the statement read a catalog?),
:func:`run_catalog` and :func:`describe_catalog`.
"""

from __future__ import annotations

import re
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from cubequeue.grammar.errors import FeatureNotSupported, QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet, Row, Value
from cubequeue.server.pgtypes import oids

from .catalog_functions import RegexMatch, register_functions
from .catalog_rewrite import output_columns, rewrite
from .catalog_tables import CATALOG_SCHEMAS, COLUMN_TYPES, TABLES, CatalogFacts, catalog_rows
from .errors import UndefinedColumn
from .lexer import for_sqlglot
from .like import LikePattern, compile_like
from .limits import bound_statement, check_parameter_number
from .outcome import HINT, PlainDescription, PlainOutcome
from .refusals import refuse_select
from .session import PlainSession

__all__ = [
    "MAX_ROWS",
    "MAX_STATEMENT_BYTES",
    "MAX_STEPS",
    "CatalogLimit",
    "describe_catalog",
    "is_catalog_query",
    "run_catalog",
]

MAX_STATEMENT_BYTES: Final = 64 * 1024
MAX_ROWS: Final = 10_000
#: SQLite progress-handler calls (each every :data:`_STEP_OPS` VM instructions)
MAX_STEPS: Final = 20_000
_STEP_OPS: Final = 1_000
_CONNECTIONS: Final = 8
_MENTIONS: Final = re.compile(r"\b(?:pg_catalog|information_schema|pg_[a-z_]+)\b", re.I)

#: catalog (PostgreSQL) type → how SQLite declares it (its affinity decides comparisons)
_SQLITE_DECL: Final = {"oid": "INTEGER", "int2": "INTEGER", "int4": "INTEGER",
                       "int8": "INTEGER", "bool": "INTEGER", "float4": "REAL"}
#: catalog type → (the column type of the result, the OID on the wire)
_WIRE: Final = {
    "bool": (ColumnType.BOOLEAN, oids.BOOL),
    "int2": (ColumnType.INT, oids.INT2),
    "int4": (ColumnType.INT, oids.INT4),
    "int8": (ColumnType.INT, oids.INT8),
    "oid": (ColumnType.INT, oids.INT8),
    "float4": (ColumnType.STRING, oids.FLOAT8),
    "timestamptz": (ColumnType.TIMESTAMP, oids.TIMESTAMPTZ),
}
_TEXT_WIRE: Final = (ColumnType.STRING, oids.TEXT)


class CatalogLimit(QueueError, sqlstate="54000"):
    """A catalog statement over one of the limits in the module docstring."""


@dataclass(frozen=True, slots=True)
class _Plan:
    sqlite_sql: str
    #: (name, PostgreSQL type) per result column; empty for ``SELECT *`` (read at run time)
    columns: tuple[tuple[str, str], ...]
    param_count: int


def _unsupported(what: str) -> FeatureNotSupported:
    return FeatureNotSupported(f"cubequeue's catalog does not support {what}", hint=HINT)


def _catalog_tables(tree: exp.Expr) -> bool:
    for table in tree.find_all(exp.Table):
        schema = table.db.lower()
        if schema in CATALOG_SCHEMAS:
            return True
        if not schema and table.name.lower().startswith("pg_"):
            return True
    return False


@lru_cache(maxsize=512)
def _parsed(sql: str) -> exp.Expr | None:
    """The one statement of ``sql`` if it reads a catalog table, else None."""
    if len(sql) > MAX_STATEMENT_BYTES or not _MENTIONS.search(sql):
        return None
    try:
        bound_statement(sql, MAX_STATEMENT_BYTES)  # what sqlglot must not read (limits.py)
        trees = sqlglot.parse(for_sqlglot(sql), dialect="postgres")
    except (SqlglotError, QueueError):  # a refused one is refused again as a plain SELECT
        return None
    nodes = [t for t in trees if isinstance(t, exp.Expr)]
    if len(nodes) != 1 or not _catalog_tables(nodes[0]):
        return None
    if refuse_select(nodes[0], sql) is not None:  # Cube asking for pre-aggregation schemas
        return None
    return nodes[0]


def is_catalog_query(sql: str) -> bool:
    """True when ``sql`` is one SELECT that reads ``pg_catalog`` / ``information_schema``
    (psql's describe and completion queries, drivers' type lookups)."""
    return _parsed(sql) is not None


def _param_count(tree: exp.Expr) -> int:
    names = [p.name for p in tree.find_all(exp.Parameter, exp.Placeholder) if p.name.isdigit()]
    for name in names:
        check_parameter_number(name)  # before int(): no $n past what a Bind can carry
    return max(map(int, names), default=0)


@lru_cache(maxsize=256)
def _plan(sql: str) -> _Plan:
    if len(sql.encode("utf-8")) > MAX_STATEMENT_BYTES:
        raise CatalogLimit(f"catalog statement is longer than {MAX_STATEMENT_BYTES} bytes")
    tree = _parsed(sql)
    if tree is None:
        try:
            sqlglot.parse(for_sqlglot(sql), dialect="postgres")
        except (ParseError, TokenError):
            raise _unsupported("this statement's syntax") from None
        raise _unsupported("this statement")
    columns = output_columns(tree)
    rewritten = rewrite(tree.copy())
    try:
        text = rewritten.sql(dialect="sqlite", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except SqlglotError as e:
        raise _unsupported(str(e).splitlines()[0][:80]) from None
    return _Plan(text, columns, _param_count(tree))


# --- the database ----------------------------------------------------------------------

@lru_cache(maxsize=64)
def _like_pattern(pattern: str, escape: str) -> LikePattern:
    """LIKE in linear time (:mod:`.like`), the compiled pattern cached per (pattern, escape)."""
    return compile_like(pattern, escape=escape)


def _like(pattern: object, value: object, escape: object = "\\") -> int | None:
    """PostgreSQL's LIKE: case-sensitive, ``\\`` the default escape (SQLite calls
    ``like(pattern, value[, escape])`` for its LIKE operator)."""
    if pattern is None or value is None:
        return None
    return int(_like_pattern(str(pattern), str(escape or "")).matches(str(value)))


def _ilike(value: object, pattern: object) -> int | None:
    if pattern is None or value is None:
        return None
    return _like(str(pattern).lower(), str(value).lower())


def _build(facts: CatalogFacts) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    rows = catalog_rows(facts)
    for schema in sorted({t.schema for t in TABLES}):
        conn.execute(f"ATTACH DATABASE ':memory:' AS {schema}")
    for table in TABLES:
        cols = ", ".join(f'"{c}" {_SQLITE_DECL.get(t, "TEXT")}' for c, t in table.columns)
        conn.execute(f"CREATE TABLE {table.schema}.{table.name} ({cols})")
        marks = ", ".join("?" * len(table.columns))
        conn.executemany(f"INSERT INTO {table.schema}.{table.name} VALUES ({marks})",
                         rows[f"{table.schema}.{table.name}"])
    register_functions(conn, facts)
    conn.create_function("like", 2, _like, deterministic=True)
    conn.create_function("like", 3, _like, deterministic=True)
    conn.create_function("pg_ilike", 2, _ilike, deterministic=True)
    conn.execute("PRAGMA query_only = ON")
    return conn


_connections: OrderedDict[CatalogFacts, sqlite3.Connection] = OrderedDict()


def _connection(facts: CatalogFacts) -> sqlite3.Connection:
    """One read-only database per (user, database), the few most recent kept."""
    conn = _connections.get(facts)
    if conn is not None:
        _connections.move_to_end(facts)
        return conn
    conn = _build(facts)
    _connections[facts] = conn
    if len(_connections) > _CONNECTIONS:
        _connections.popitem(last=False)[1].close()
    return conn


def _facts(session: PlainSession) -> CatalogFacts:
    return CatalogFacts(user=session.user, database=session.database)


def _sqlite_error(e: sqlite3.Error) -> QueueError:
    text = str(e)
    if text.startswith("no such column: "):
        return UndefinedColumn(f'column "{text.removeprefix("no such column: ")}" does not exist')
    if text.startswith("no such table: "):
        name = text.removeprefix("no such table: ")
        return _unsupported(f"the table {name}")
    if text.startswith("no such function: "):
        return _unsupported(f"the function {text.removeprefix('no such function: ')}")
    if text == "interrupted":
        return CatalogLimit(f"catalog statement ran longer than {MAX_STEPS * _STEP_OPS} steps")
    return _unsupported(f"this statement ({text[:80]})")


def _execute(plan: _Plan, facts: CatalogFacts, params: Sequence[str | None]
             ) -> tuple[list[str], list[tuple[object, ...]]]:
    conn = _connection(facts)
    steps = 0

    def progress() -> int:
        nonlocal steps
        steps += 1
        return int(steps > MAX_STEPS)

    conn.set_progress_handler(progress, _STEP_OPS)
    regex = RegexMatch()
    conn.create_function("pg_regex", 3, regex, deterministic=True)
    try:
        cursor = conn.execute(plan.sqlite_sql, {str(i + 1): v for i, v in enumerate(params)})
        rows = cursor.fetchmany(MAX_ROWS + 1)
        names = [d[0] for d in cursor.description or ()]
        cursor.close()
    except sqlite3.Error as e:
        raise (regex.error or _sqlite_error(e)) from None
    finally:
        conn.set_progress_handler(None, 0)
    if len(rows) > MAX_ROWS:
        raise CatalogLimit(f"catalog result has more than {MAX_ROWS} rows")
    return names, rows


def _value(value: object, pg_type: str) -> Value:
    if value is None:
        return None
    if pg_type == "bool":
        return bool(value) if not isinstance(value, str) else value in ("t", "true", "1")
    if _WIRE.get(pg_type, _TEXT_WIRE)[0] is ColumnType.INT:
        try:
            return int(str(value)) if not isinstance(value, int | float) else int(value)
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else str(value)


def _columns(plan: _Plan, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    if plan.columns:
        return plan.columns
    return tuple((n, COLUMN_TYPES.get(n, "text")) for n in names)


def _shape(columns: tuple[tuple[str, str], ...]) -> tuple[tuple[Column, ...], tuple[int, ...]]:
    wires = [_WIRE.get(t, _TEXT_WIRE) for _, t in columns]
    return (tuple(Column(n, w[0]) for (n, _), w in zip(columns, wires, strict=True)),
            tuple(w[1] for w in wires))


def run_catalog(sql: str, session: PlainSession,
                params: Sequence[str | None] = ()) -> PlainOutcome:
    """Answer one catalog SELECT (``is_catalog_query(sql)`` is true)."""
    plan = _plan(sql)
    if len(params) < plan.param_count:
        from .errors import UndefinedParameter

        raise UndefinedParameter(f"there is no parameter ${len(params) + 1}")
    names, raw = _execute(plan, _facts(session), params)
    columns = _columns(plan, names)
    if len(columns) != len(names):
        raise _unsupported("this statement's result columns")
    types = [t for _, t in columns]
    rows: list[Row] = [tuple(_value(v, t) for v, t in zip(r, types, strict=True)) for r in raw]
    cols, type_oids = _shape(columns)
    return PlainOutcome(ResultSet(cols, rows), f"SELECT {len(rows)}", type_oids=type_oids)


def describe_catalog(sql: str, session: PlainSession) -> PlainDescription:
    """Parameters and result columns of a catalog SELECT, for the extended protocol."""
    plan = _plan(sql)
    columns = plan.columns
    if not columns:
        names, _ = _execute(plan, _facts(session), [None] * plan.param_count)
        columns = _columns(plan, names)
    cols, type_oids = _shape(columns)
    return PlainDescription(plan.param_count, cols, type_oids, (oids.TEXT,) * plan.param_count)
