"""Statements Cube sends to a pre-aggregation store, refused by what they ask for.

When Cube Store is also Cube's pre-aggregation store, Cube's ``CubeStoreDriver`` and
``BaseDriver`` (``@cubejs-backend/cubestore-driver`` / ``base-driver``, 0.35 and 1.x) send
``CREATE SCHEMA IF NOT EXISTS``, ``CREATE TABLE … WITH (…) LOCATION …``, ``INSERT INTO``,
``DROP TABLE``, ``SELECT schema_name FROM information_schema.schemata WHERE schema_name =
'…'``, ``SELECT table_name, build_range_end FROM information_schema.tables WHERE
table_schema = '…'`` and reads such as ``SELECT … FROM dev_pre_aggregations.orders_main…``.
cubequeue keeps no tables outside ``system``, so each of these is 0A000 naming the
feature and the setup that works: pre-aggregations built in the source database.

The decision reads the statement's structure, not a word in it: ``information_schema``
queries about the system tables (psql, DBeaver) are not refused here; only those that ask
about another schema or for Cube Store's ``build_range_end`` column are.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

from cubequeue.grammar import strip_leading_comments
from cubequeue.grammar.errors import FeatureNotSupported

__all__ = ["OWN_SCHEMAS", "PREAGGREGATION_HINT", "refuse_select", "refuse_statement",
           "refuse_system_write"]

#: schemas cubequeue answers about: everything else is a pre-aggregation store's.
OWN_SCHEMAS: Final = frozenset({"system", "information_schema", "pg_catalog", "public"})
PREAGGREGATION_HINT: Final = (
    "cubequeue serves Cube Store's queue and cache, not pre-aggregations, which need a "
    "real Cube Store (CUBEJS_EXT_DB_TYPE=cubestore). With cubequeue, build pre-aggregations "
    "in the source database: `external: false` on the pre-aggregation, or "
    "CUBEJS_EXTERNAL_DEFAULT=false; refresh keys and the query cache keep working."
)
_MAX_SHOWN = 60
#: (leading words, feature) — the DDL and writes a pre-aggregation build sends.
_STATEMENTS: Final = (
    (re.compile(r"create\s+schema\b", re.I), "pre-aggregation schemas (CREATE SCHEMA)"),
    (re.compile(r"create\s+(?:or\s+replace\s+)?table\b", re.I),
     "pre-aggregation tables (CREATE TABLE)"),
    (re.compile(r"create\s+(?:unique\s+)?index\b", re.I), "pre-aggregation indexes (CREATE INDEX)"),
    (re.compile(r"create\s+source\b", re.I), "streaming pre-aggregation sources (CREATE SOURCE)"),
    (re.compile(r"drop\s+(?:table|schema)\b", re.I), "pre-aggregation tables (DROP)"),
    (re.compile(r"insert\s+into\b", re.I), "pre-aggregation tables (INSERT)"),
    (re.compile(r"alter\s+table\b", re.I), "pre-aggregation tables (ALTER TABLE)"),
    (re.compile(r"show\s+(?:schemas|tables)\b", re.I), "pre-aggregation schemas (SHOW)"),
)
#: information_schema columns that name the schema a query asks about.
_SCHEMA_COLUMNS: Final = frozenset({"table_schema", "schema_name"})
#: a Cube Store-only column (the build range of a partitioned pre-aggregation).
_CUBESTORE_COLUMNS: Final = frozenset({"build_range_end", "build_range_start"})


#: a write to a table: the verb and the (optionally ``system.``-qualified) table name
_WRITE: Final = re.compile(
    r'(insert\s+into|delete\s+from|update|truncate(?:\s+table)?)\s+(?:only\s+)?'
    r'(?:"?system"?\s*\.\s*)?"?([A-Za-z_]+)"?',
    re.I,
)
_ITEMS_GONE = ("QUEUE CANCEL '<path>' removes one item; QUEUE PURGE [PENDING | ACTIVE] "
               "'<prefix>' removes a prefix's items; QUEUE TRUNCATE removes every item "
               "and result")
#: (verb, system table) → the dialect statements that make that change
_INSTEAD: Final[dict[tuple[str, str], str]] = {
    ("insert", "queue"): "QUEUE ADD '<prefix>:<key>' '<payload>' adds an item "
                         "(QUEUE ADD_AND_RETRIEVE adds and claims it)",
    ("delete", "queue"): _ITEMS_GONE,
    ("truncate", "queue"): _ITEMS_GONE,
    ("update", "queue"): "QUEUE RETRIEVE '<prefix>' claims an item, QUEUE HEARTBEAT '<path>' "
                         "renews a claim, QUEUE MERGE_EXTRA '<path>' '<json>' changes its "
                         "extra, QUEUE ACK '<path>' '<result>' completes it",
    ("insert", "queue_results"): "QUEUE ACK '<path>' '<result>' stores an item's result",
    ("update", "queue_results"): "QUEUE ACK '<path>' '<result>' stores an item's result",
    ("delete", "queue_results"): "QUEUE RESULT '<path>' reads a result and removes it; "
                                 "QUEUE TRUNCATE removes every item and result",
    ("truncate", "queue_results"): "QUEUE TRUNCATE removes every item and result",
    ("insert", "cache"): "CACHE SET [TTL <seconds>] [NX] '<key>' '<value>' stores a value",
    ("update", "cache"): "CACHE SET '<key>' '<value>' replaces a value; CACHE INCR '<key>' "
                         "adds one to a counter",
    ("delete", "cache"): "CACHE REMOVE '<key>' removes one key; CACHE PURGE '<prefix>:*' a "
                         "prefix's keys; CACHE TRUNCATE every key",
    ("truncate", "cache"): "CACHE TRUNCATE removes every key; CACHE PURGE '<prefix>:*' a "
                           "prefix's keys",
}
_DERIVED: Final = {
    "queue_prefixes": "it counts the items of system.queue: QUEUE ADD, QUEUE CANCEL and "
                      "QUEUE PURGE change it",
    "queue_log": "the store writes it as items come and go",
}


def refuse_system_write(sql: str) -> FeatureNotSupported | None:
    """0A000 for ``INSERT``/``UPDATE``/``DELETE``/``TRUNCATE`` of a system table (with or
    without ``system.``: the schema is on the search path), as PostgreSQL refuses a write
    to a view that cannot take it; the hint names the dialect statements that do it."""
    m = _WRITE.match(strip_leading_comments(sql))
    if m is None:
        return None
    verb, table = m.group(1).split()[0].lower(), m.group(2).lower()
    if table not in _DERIVED and (verb, table) not in _INSTEAD:
        return None
    what = {"insert": "insert into", "delete": "delete from"}.get(verb, verb)
    instead = _INSTEAD.get((verb, table))
    return FeatureNotSupported(
        f"cannot {what} system.{table}: the system tables are read-only",
        detail=None if instead is None else f"system.{table} shows the store; "
        "the QUEUE and CACHE statements change it.",
        hint=instead if instead is not None else
        f"system.{table} cannot be changed directly: {_DERIVED[table]}",
    )


def _shown(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _refusal(feature: str, sql: str) -> FeatureNotSupported:
    return FeatureNotSupported(
        f"cubequeue does not support {feature}: {_shown(sql)}", hint=PREAGGREGATION_HINT
    )


def refuse_statement(sql: str) -> FeatureNotSupported | None:
    """The refusal of a non-SELECT statement a pre-aggregation build sends, or of a write
    to a system table (:func:`refuse_system_write`), or None."""
    system_write = refuse_system_write(sql)
    if system_write is not None:
        return system_write
    body = strip_leading_comments(sql)
    for pattern, feature in _STATEMENTS:
        if pattern.match(body):
            return _refusal(feature, body)
    return None


def _asks_other_schema(tree: exp.Expr) -> bool:
    """``table_schema = 'x'`` / ``schema_name IN ('x', …)`` naming a schema not ours."""
    for node in tree.find_all(exp.EQ, exp.In):
        col, values = node.this, (
            [node.expression] if isinstance(node, exp.EQ) else list(node.expressions)
        )
        if isinstance(node, exp.EQ) and not isinstance(col, exp.Column):
            col, values = node.expression, [node.this]
        if not isinstance(col, exp.Column) or col.name.lower() not in _SCHEMA_COLUMNS:
            continue
        if node.args.get("negate") or isinstance(node.parent, exp.Not):
            continue
        literals = [v.name.lower() for v in values if isinstance(v, exp.Literal) and v.is_string]
        if any(name not in OWN_SCHEMAS for name in literals):
            return True
    return False


def refuse_select(tree: exp.Expr, sql: str) -> FeatureNotSupported | None:
    """The refusal of a SELECT that reads a pre-aggregation store, or None.

    * ``FROM <schema>.<table>`` for a schema cubequeue does not have: a pre-aggregation
      read (cubequeue has no tables outside ``system``);
    * ``information_schema`` asked about another schema, or for ``build_range_end``:
      Cube listing its pre-aggregation tables.
    """
    tables = list(tree.find_all(exp.Table))
    for table in tables:
        schema = table.db.lower()
        if schema and schema not in OWN_SCHEMAS:
            return _refusal("pre-aggregation reads (SELECT from a pre-aggregation table)", sql)
    if not any(t.db.lower() == "information_schema" for t in tables):
        return None
    if any(c.name.lower() in _CUBESTORE_COLUMNS for c in tree.find_all(exp.Column)):
        return _refusal("pre-aggregation tables (Cube Store's build ranges)", sql)
    if _asks_other_schema(tree):
        return _refusal("pre-aggregation schemas (information_schema)", sql)
    return None
