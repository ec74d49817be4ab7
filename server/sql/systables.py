"""SELECT over the system tables (and SELECT without FROM), planned once per text.

A plan is built from sqlglot's AST by the compiler in :mod:`.expressions` (the module
docstring there says why not ``sqlglot.executor``) and cached by statement text; running
it reads ``store.system_table(name)`` (``docs/dialect.md`` §8 rule 11) and applies WHERE → GROUP
BY/aggregates → HAVING → select list → DISTINCT → ORDER BY → OFFSET/LIMIT, as PostgreSQL
does. Ordering follows PostgreSQL's defaults (ASC NULLS LAST, DESC NULLS FIRST); text
compares by code point (the C collation).

The column schemas are the store's own (:mod:`cubequeue.storage.system_schemas`), read
here as SQL types so that planning and Describe need no store; every store builds its
frames from the same tuples, so rows arrive in schema order and need no matching.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported, InternalError
from cubequeue.grammar.results import Column, ColumnType, ResultSet, Row, Value
from cubequeue.storage.system_schemas import SYSTEM_TABLES

from .aggregates import accumulate, compile_aggregate
from .errors import AmbiguousColumn, InvalidColumnReference, InvalidRowCount, UndefinedTable
from .expressions import (
    AGGREGATES,
    Compiled,
    Ctx,
    Grouping,
    NodeCompilers,
    Scope,
    coerce,
    compile_expr,
    signature,
)
from .outcome import HINT
from .scalars import call_function, compile_scalar, output_name
from .sqltypes import SqlType

__all__ = ["SCHEMAS", "SelectPlan", "SystemTables", "plan_select", "unsupported"]

T = SqlType
#: the node kinds the expression compiler dispatches to (:class:`.expressions.NodeCompilers`)
_NODES = NodeCompilers(aggregate=compile_aggregate, scalar=compile_scalar,
                       function=call_function, name=output_name)
#: how a store column reads in SQL: integers are bigint, times timestamptz
_SQL_TYPE = {
    ColumnType.STRING: T.TEXT,
    ColumnType.INT: T.INT8,
    ColumnType.BOOLEAN: T.BOOL,
    ColumnType.TIMESTAMP: T.TIMESTAMPTZ,
}
SCHEMAS: dict[str, tuple[tuple[str, SqlType], ...]] = {
    name: tuple((c.name, _SQL_TYPE[c.type]) for c in cols) for name, cols in SYSTEM_TABLES.items()
}
_ALLOWED_ARGS = frozenset({"kind", "hint", "distinct", "expressions", "from_", "from", "where",
                           "group", "having", "order", "limit", "offset"})


class SystemTables(Protocol):
    def system_table(self, name: str) -> ResultSet: ...


def unsupported(what: str) -> FeatureNotSupported:
    return FeatureNotSupported(f"cubequeue does not support this statement: {what}", hint=HINT)


@dataclass(frozen=True, slots=True)
class _SortKey:
    output: int | None  # index in the output row, or
    extra: int | None  # index in the extra sort values
    desc: bool
    nulls_first: bool


@dataclass(frozen=True, slots=True)
class SelectPlan:
    table: str | None
    columns: tuple[Column, ...]
    type_oids: tuple[int, ...]
    param_oids: tuple[int, ...]
    run: Callable[[Sequence[Row], Ctx], list[Row]]

    def execute(self, store: SystemTables, ctx: Ctx) -> ResultSet:
        if self.table is None:
            return ResultSet(self.columns, self.run([()], ctx))
        frame = store.system_table(self.table)
        if frame.columns != SYSTEM_TABLES[self.table]:  # the same tuple: an identity check
            raise InternalError(f"system.{self.table} from the store has other columns")
        return ResultSet(self.columns, self.run(frame.rows, ctx))


def _table(tree: exp.Select) -> tuple[str | None, str | None]:
    """(system table name, qualifier) or (None, None) without FROM."""
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        return None, None
    if from_.args.get("expressions") or tree.args.get("joins") or tree.args.get("laterals"):
        raise unsupported("joins")
    src = from_.this
    if not isinstance(src, exp.Table) or src.args.get("catalog") is not None:
        raise unsupported("SELECT from " + src.sql(dialect="postgres")[:60])
    if isinstance(src.this, exp.Func) or src.args.get("joins"):
        raise unsupported("SELECT from a function")
    db, name = src.db.lower(), src.name.lower()
    if db == "system" and name in SCHEMAS:
        return name, (src.alias or name).lower()
    if db == "system":
        raise UndefinedTable(f'relation "system.{src.name}" does not exist', hint=HINT)
    raise unsupported(f"SELECT from {src.db + '.' if src.db else ''}{src.name}")


def _check_shape(tree: exp.Expr) -> exp.Select:
    if not isinstance(tree, exp.Select):
        raise unsupported(type(tree).__name__.upper())
    for key, value in tree.args.items():
        if value not in (None, [], False) and key not in _ALLOWED_ARGS:
            raise unsupported(f"SELECT with {key.upper()}")
    if tree.args.get("distinct") is not None and tree.args["distinct"].args.get("on"):
        raise unsupported("SELECT DISTINCT ON")
    for node in tree.walk():
        if node is not tree and isinstance(node, exp.Select | exp.Subquery | exp.Window):
            raise unsupported("subqueries and window functions")
    return tree


def _has_aggregate(nodes: Sequence[exp.Expr | None]) -> bool:
    return any(n is not None and n.find(*AGGREGATES) is not None for n in nodes)


def _output(c: Compiled, scope: Scope) -> Compiled:
    if c.type is T.UNKNOWN:
        c = coerce(c, T.TEXT, scope)
    return c


def _count(node: exp.Expr | None, scope: Scope, what: str) -> Compiled | None:
    if node is None:
        return None
    inner = node.args.get("expression") if isinstance(node, exp.Limit | exp.Offset) else node
    if inner is None or isinstance(inner, exp.Var | exp.Null):
        return None
    clause = Scope({}, frozenset(), scope.params, _NODES, no_aggregates=what)
    return coerce(compile_expr(inner, clause), T.INT8, clause)


def plan_select(tree: exp.Expr) -> SelectPlan:
    """Type-check a SELECT and build its runner; raises 0A000 / 42xxx like PostgreSQL."""
    select = _check_shape(tree)
    table, qualifier = _table(select)
    schema = SCHEMAS.get(table or "", ())
    params: dict[int, SqlType] = {}
    quals = frozenset({qualifier, f"system.{table}"} if qualifier else ())
    base = Scope({n: (i, t) for i, (n, t) in enumerate(schema)}, quals, params, _NODES)

    items: list[tuple[exp.Expr, str]] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            if table is None:
                raise FeatureNotSupported("SELECT * with no tables specified is not valid")
            items.extend((exp.column(n), n) for n, _ in schema)
        else:
            node = item.this if isinstance(item, exp.Alias) else item
            items.append((node, output_name(item)))

    where_node = select.args.get("where")
    where = None
    if where_node is not None:
        ws = Scope(base.columns, base.qualifiers, params, _NODES, no_aggregates="WHERE")
        where = compile_expr(where_node.this, ws)
        if where.type is not T.BOOL:
            where = coerce(where, T.BOOL, ws)

    group_node = select.args.get("group")
    having_node = select.args.get("having")
    order_nodes = list(select.args["order"].expressions) if select.args.get("order") else []
    grouped = group_node is not None or having_node is not None or _has_aggregate(
        [n for n, _ in items] + [o.this for o in order_nodes])
    key_fns: list[Compiled] = []
    scope = base
    if grouped:
        keys: list[tuple[str, SqlType]] = []
        for g in (group_node.expressions if group_node is not None else []):
            node = g
            if isinstance(g, exp.Literal) and not g.is_string:
                pos = int(g.this)
                if not 1 <= pos <= len(items):
                    raise InvalidColumnReference(f"GROUP BY position {pos} is not in select list")
                node = items[pos - 1][0]
            elif isinstance(g, exp.Column) and not g.table and g.name.lower() not in base.columns:
                matches = [n for n, name in items if name == g.name.lower()]
                node = matches[0] if matches else g
            ks = Scope(base.columns, base.qualifiers, params, _NODES, no_aggregates="GROUP BY")
            key_fns.append(compile_expr(node, ks))
            keys.append((signature(node, base), key_fns[-1].type))
        scope = Scope(base.columns, base.qualifiers, params, _NODES, grouping=Grouping(keys))

    outputs = [_output(compile_expr(node, scope), scope) for node, _ in items]
    columns = tuple(Column(name, c.type.column_type) for (_, name), c in zip(items, outputs, strict=True))
    having = None
    if having_node is not None:
        having = coerce(compile_expr(having_node.this, scope), T.BOOL, scope)

    distinct = select.args.get("distinct") is not None
    sort: list[_SortKey] = []
    extras: list[Compiled] = []
    names = [name for _, name in items]
    for o in order_nodes:
        node, desc = o.this, bool(o.args.get("desc"))
        nulls_first = bool(o.args.get("nulls_first"))
        out_index: int | None = None
        if isinstance(node, exp.Literal) and not node.is_string:
            pos = int(node.this)
            if not 1 <= pos <= len(items):
                raise InvalidColumnReference(f"ORDER BY position {pos} is not in select list")
            out_index = pos - 1
        elif isinstance(node, exp.Column) and not node.table and not isinstance(node.this, exp.Star):
            name = node.name if node.this.args.get("quoted") else node.name.lower()
            hits = [i for i, n in enumerate(names) if n == name]
            if len(hits) > 1:
                raise AmbiguousColumn(f'ORDER BY "{name}" is ambiguous')
            out_index = hits[0] if hits else None
        if out_index is None:
            if distinct:
                raise InvalidColumnReference(
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
                )
            extras.append(_output(compile_expr(node, scope), scope))
            sort.append(_SortKey(None, len(extras) - 1, desc, nulls_first))
        else:
            sort.append(_SortKey(out_index, None, desc, nulls_first))

    limit = _count(select.args.get("limit"), base, "LIMIT")
    offset = _count(select.args.get("offset"), base, "OFFSET")
    run = _runner(where, key_fns, scope.grouping, grouped, having, outputs, extras, distinct,
                  sort, limit, offset)
    param_types = tuple(params.get(i, T.TEXT) for i in range(1, max(params, default=0) + 1))
    return SelectPlan(
        table, columns, tuple(c.type.oid for c in outputs),
        tuple(T.TEXT.oid if t is T.UNKNOWN else t.oid for t in param_types), run,
    )


def _runner(where: Compiled | None, key_fns: list[Compiled], grouping: Grouping | None,
            grouped: bool, having: Compiled | None, outputs: list[Compiled],
            extras: list[Compiled], distinct: bool, sort: list[_SortKey],
            limit: Compiled | None, offset: Compiled | None,
            ) -> Callable[[Sequence[Row], Ctx], list[Row]]:
    out_fns = [c.fn for c in outputs]
    extra_fns = [c.fn for c in extras]

    def run(rows: Sequence[Row], ctx: Ctx) -> list[Row]:
        if where is not None:
            w = where.fn
            rows = [r for r in rows if w(r, ctx) is True]
        if grouped:
            assert grouping is not None
            groups: dict[tuple[Value, ...], list[Row]] = {}
            if not key_fns:
                groups[()] = list(rows)
            for r in rows if key_fns else ():
                groups.setdefault(tuple(k.fn(r, ctx) for k in key_fns), []).append(r)
            rows = [key + accumulate(grouping.aggregates, members, ctx)
                    for key, members in groups.items()]
            if having is not None:
                h = having.fn
                rows = [r for r in rows if h(r, ctx) is True]
        pairs = [(tuple(f(r, ctx) for f in out_fns), tuple(f(r, ctx) for f in extra_fns))
                 for r in rows]
        if distinct:
            seen: set[Row] = set()
            unique = []
            for p in pairs:
                if p[0] not in seen:
                    seen.add(p[0])
                    unique.append(p)
            pairs = unique
        for key in reversed(sort):
            pairs = _sorted(pairs, key)
        start = _bound(offset, ctx, "OFFSET") or 0
        stop = _bound(limit, ctx, "LIMIT")
        return [p[0] for p in pairs[start:None if stop is None else start + stop]]

    return run


def _bound(c: Compiled | None, ctx: Ctx, what: str) -> int | None:
    if c is None:
        return None
    v = c.fn((), ctx)
    if v is None:
        return None
    assert isinstance(v, int)
    if v < 0:
        raise InvalidRowCount(f"{what} must not be negative")
    return v


def _sorted(pairs: list[tuple[Row, Row]], key: _SortKey) -> list[tuple[Row, Row]]:
    side, i = (0, key.output) if key.output is not None else (1, key.extra)
    assert i is not None
    nulls = [p for p in pairs if p[side][i] is None]
    values = [p for p in pairs if p[side][i] is not None]
    values.sort(key=lambda p: p[side][i], reverse=key.desc)  # type: ignore[arg-type,return-value]  # one type per column
    return nulls + values if key.nulls_first else values + nulls
