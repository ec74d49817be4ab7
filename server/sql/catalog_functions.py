"""PostgreSQL's catalog functions, as SQLite functions over the catalog rows.

psql's describe queries call ``pg_catalog.format_type``, ``pg_get_userbyid``,
``pg_table_is_visible``, ``pg_get_expr``, ``obj_description``, ``array_to_string`` and a
dozen more (PostgreSQL 15 docs, §9.26 "System Information Functions and Operators").
Each is registered on the SQLite connection under the name :mod:`.catalog_rewrite`
gives it, and answers from the same facts the catalog rows come from: cubequeue objects
have no defaults, comments, indexes, constraints or policies, so the functions that
decompile those answer NULL, as PostgreSQL does for an object without one.

Arrays are kept as PostgreSQL's text form (``{a,b}``): that is what psql receives from
PostgreSQL anyway, and the few array operations psql uses (``= ANY``, subscripts,
``unnest``, ``array_to_string``) read it back with :func:`parse_array`.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from typing import Final

from cubequeue.grammar.errors import QueueError

from .catalog_tables import (
    PG_CATALOG_OID,
    ROLE_OID,
    SYSTEM_SCHEMA_OID,
    TYPE_SQL_NAMES,
    UTF8_ENCODING,
    CatalogFacts,
    relation_names,
)
from .regexes import compile_regex

__all__ = ["RegexMatch", "format_array", "parse_array", "register_functions"]

_SQL = int | float | str | bytes | None
#: schemas a name is visible in without qualification: cubequeue's tables are reached
#: as ``queue`` as well as ``system.queue``, so psql's ``\d`` lists them
_VISIBLE_SCHEMAS: Final = frozenset({"system", "public", "pg_catalog"})
_MAX_SERIES: Final = 10_000
_NEEDS_QUOTES: Final = re.compile(r'[{},"\\\s]|^$|^null$', re.I)


def parse_array(text: object) -> list[str | None]:
    """PostgreSQL's text form of a one-dimensional array → its elements."""
    if not isinstance(text, str) or not text.startswith("{") or not text.endswith("}"):
        return []
    body, i = text[1:-1], 0
    out: list[str | None] = []
    while i < len(body):
        if body[i] == '"':
            j = i + 1
            value: list[str] = []
            while j < len(body) and body[j] != '"':
                if body[j] == "\\" and j + 1 < len(body):
                    j += 1
                value.append(body[j])
                j += 1
            out.append("".join(value))
            i = j + 2
        else:
            j = body.find(",", i)
            j = len(body) if j < 0 else j
            item = body[i:j].strip()
            out.append(None if item.upper() == "NULL" else item)
            i = j + 1
    return out


def format_array(items: list[object]) -> str:
    """Elements → PostgreSQL's text form, quoting as ``array_out`` does."""
    parts = []
    for item in items:
        if item is None:
            parts.append("NULL")
            continue
        text = str(item)
        if _NEEDS_QUOTES.search(text):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(text)
    return "{" + ",".join(parts) + "}"


class RegexMatch:
    """``pg_regex(value, pattern, insensitive)``: ``value ~ pattern`` (``~*`` when
    ``insensitive``), through the same RE2 matching as plain SQL (:mod:`.regexes`).

    SQLite keeps only "user-defined function raised exception" of a function's error, so
    one is registered per statement and keeps the error (2201B, 54000) for the caller."""

    def __init__(self) -> None:
        self.error: QueueError | None = None

    def __call__(self, value: _SQL, pattern: _SQL, insensitive: _SQL) -> int | None:
        if value is None or pattern is None:
            return None
        try:
            return int(compile_regex(str(pattern), insensitive=bool(insensitive)).search(str(value)))
        except QueueError as e:
            self.error = e
            raise


class _ArrayAgg:
    """``ARRAY(SELECT …)``: the rows of a one-column subquery as an array's text."""

    def __init__(self) -> None:
        self.items: list[object] = []

    def step(self, value: object) -> None:
        self.items.append(value)

    def finalize(self) -> str:
        return format_array(self.items)


def _pretty_size(size: _SQL) -> str | None:
    if size is None:
        return None
    n = int(size)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(n) < 10 * 1024 or unit == "TB":
            return f"{n} {unit}"
        n = (n + 512) // 1024
    return f"{n} PB"  # pragma: no cover  # unreachable: the loop ends at TB


def register_functions(conn: sqlite3.Connection, facts: CatalogFacts) -> None:
    """Register every function the rewritten statements may call."""
    relations = relation_names()
    by_name = {f"{schema}.{name}": oid for oid, (schema, name) in relations.items()}
    by_name.update({name: oid for oid, (_schema, name) in relations.items()})
    namespaces = {PG_CATALOG_OID: "pg_catalog", SYSTEM_SCHEMA_OID: "system", 2200: "public",
                  13_000: "information_schema"}

    def regclass(value: _SQL) -> _SQL:
        if isinstance(value, int):
            schema_name = relations.get(value)
            if schema_name is None:
                return str(value)
            schema, name = schema_name
            return name if schema in _VISIBLE_SCHEMAS else f"{schema}.{name}"
        if value is None:
            return None
        text = str(value).removeprefix("pg_catalog.")
        return by_name.get(text, 0)

    def format_type(type_oid: _SQL, _typmod: _SQL = None) -> str | None:
        if type_oid is None:
            return None
        return TYPE_SQL_NAMES.get(int(type_oid), "???")

    def array_to_string(arr: _SQL, sep: _SQL, null: _SQL = None) -> str | None:
        if arr is None or sep is None:
            return None
        items = parse_array(arr)
        shown = [i if i is not None else null for i in items]
        return str(sep).join(str(i) for i in shown if i is not None)

    def any_eq(value: _SQL, arr: _SQL) -> int | None:
        if value is None or arr is None:
            return None
        return int(str(value) in parse_array(arr))

    def array_get(arr: _SQL, index: _SQL) -> str | None:
        items = parse_array(arr)
        if index is None or not 1 <= int(index) <= len(items):
            return None
        return items[int(index) - 1]

    def array_json(arr: _SQL) -> str:
        return json.dumps(parse_array(arr))

    def series_json(start: _SQL, stop: _SQL) -> str:
        if start is None or stop is None:
            return "[]"
        lo, hi = int(start), int(stop)
        if hi - lo >= _MAX_SERIES:
            raise ValueError(f"generate_series is limited to {_MAX_SERIES} rows here")
        return json.dumps(list(range(lo, hi + 1)))

    def quote_ident(name: _SQL) -> str | None:
        if name is None:
            return None
        text = str(name)
        if re.fullmatch(r"[a-z_][a-z0-9_$]*", text):
            return text
        return '"' + text.replace('"', '""') + '"'

    def array_upper(arr: _SQL, _dim: _SQL) -> int | None:
        items = parse_array(arr)
        return len(items) or None

    functions: dict[str, tuple[int, Callable[..., _SQL]]] = {
        "pg_get_userbyid": (1, lambda oid: facts.user if oid == ROLE_OID else (
            "pg_database_owner" if oid == 6171 else f"unknown (OID={oid})")),
        "format_type": (2, format_type),
        "pg_table_is_visible": (1, lambda oid: int(
            relations.get(int(oid or 0), ("", ""))[0] in _VISIBLE_SCHEMAS)),
        "pg_type_is_visible": (1, lambda oid: 1),
        "pg_function_is_visible": (1, lambda oid: 1),
        "pg_collation_is_visible": (1, lambda oid: 1),
        "pg_encoding_to_char": (1, lambda enc: "UTF8" if enc == UTF8_ENCODING else ""),
        "array_to_string": (-1, array_to_string),
        "pg_any_eq": (2, any_eq),
        "pg_array_get": (2, array_get),
        "pg_array_json": (1, array_json),
        "pg_series_json": (2, series_json),
        "pg_regclass": (1, regclass),
        "pg_regtype": (1, lambda oid: format_type(oid)),
        "pg_regnamespace": (1, lambda oid: namespaces.get(int(oid or 0), str(oid))),
        "quote_ident": (1, quote_ident),
        "array_upper": (2, array_upper),
        "pg_size_pretty": (1, _pretty_size),
        "current_database": (0, lambda: facts.database),
        "current_schema": (0, lambda: "system"),
        "current_user": (0, lambda: facts.user),
        "session_user": (0, lambda: facts.user),
        "pg_backend_pid": (0, lambda: 0),
        "version": (0, lambda: "PostgreSQL 15.0 (cubequeue)"),
    }
    for name, (nargs, fn) in functions.items():
        conn.create_function(name, nargs, fn, deterministic=True)
    # what cubequeue's objects do not have: no defaults, comments, sizes, privileges
    for name, nargs in (
        ("pg_get_expr", -1), ("obj_description", -1), ("col_description", 2),
        ("shobj_description", 2), ("pg_get_statisticsobjdef_columns", 1),
        ("pg_get_function_result", 1), ("pg_get_function_arguments", 1),
        ("pg_get_function_identity_arguments", 1), ("pg_tablespace_location", 1),
        ("pg_get_indexdef", -1), ("pg_get_constraintdef", -1), ("pg_get_viewdef", -1),
        ("pg_get_triggerdef", -1), ("pg_get_ruledef", -1), ("pg_get_partkeydef", 1),
    ):
        conn.create_function(name, nargs, lambda *_args: None, deterministic=True)
    for name, value in (("pg_table_size", 0), ("pg_database_size", 0), ("pg_relation_size", 0),
                        ("pg_total_relation_size", 0), ("pg_indexes_size", 0),
                        ("pg_relation_is_publishable", 0), ("has_table_privilege", 1),
                        ("has_schema_privilege", 1), ("has_database_privilege", 1),
                        ("has_column_privilege", 1), ("pg_has_role", 1)):
        conn.create_function(name, -1, lambda *_args, v=value: v, deterministic=True)
    conn.create_aggregate("pg_array_agg", 1, _ArrayAgg)  # type: ignore[arg-type]  # typeshed wants an _AggregateProtocol; _ArrayAgg is one
