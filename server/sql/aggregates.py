"""Aggregates: count(*), count([DISTINCT] x), min, max, sum — typed as PostgreSQL types
them, except ``sum(int8)``, which PostgreSQL types ``numeric``: cubequeue keeps it
``int8`` because the wire speaks only the builtin OIDs of PostgreSQL's protocol docs, "Types"
(a queue's sums never approach 2^63)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import Row, Value

from .errors import GroupingError, UndefinedFunction
from .expressions import Aggregate, Compiled, Ctx, Scope, coerce, compile_expr
from .sqltypes import SqlType, check_int

__all__ = ["accumulate", "compile_aggregate"]

T = SqlType


def compile_aggregate(node: exp.Expr, scope: Scope) -> Compiled:
    kind = type(node).__name__.lower()
    if scope.no_aggregates is not None:
        raise GroupingError(f"aggregate functions are not allowed in {scope.no_aggregates}")
    if scope.in_aggregate:
        raise GroupingError("aggregate function calls cannot be nested")
    g = scope.grouping
    assert g is not None, "the planner groups every query that has an aggregate"
    if isinstance(node, exp.Avg):
        raise FeatureNotSupported("avg() is not supported (it is numeric); use sum() and count()")
    sig = node.sql(dialect="postgres")
    if sig in g.agg_signatures:
        i = g.agg_signatures.index(sig)
        return _ref(len(g.keys) + i, g.aggregates[i].type, kind)
    arg_node = node.this
    distinct = isinstance(arg_node, exp.Distinct)
    if distinct:
        if len(arg_node.expressions) != 1:
            raise FeatureNotSupported("DISTINCT in an aggregate takes one expression")
        arg_node = arg_node.expressions[0]
    arg: Compiled | None = None
    if isinstance(node, exp.Count) and (arg_node is None or isinstance(arg_node, exp.Star)):
        kind, out = "count_star", T.INT8
    else:
        scope.in_aggregate = True
        try:
            arg = compile_expr(arg_node, scope)
        finally:
            scope.in_aggregate = False
        if arg.type is T.UNKNOWN:
            arg = coerce(arg, T.TEXT, scope)
        out = _result_type(kind, arg.type)
    g.aggregates.append(Aggregate(kind, arg, distinct, out))
    g.agg_signatures.append(sig)
    return _ref(len(g.keys) + len(g.aggregates) - 1, out, "count" if kind == "count_star" else kind)


def _ref(index: int, type_: SqlType, name: str) -> Compiled:
    return Compiled(lambda row, ctx: row[index], type_, name)


def _result_type(kind: str, arg: SqlType) -> SqlType:
    if kind == "count":
        return T.INT8
    if kind == "sum" and arg.is_int:
        return T.INT8
    if kind in ("min", "max") and arg in (T.INT4, T.INT8, T.TEXT, T.TIMESTAMPTZ, T.INTERVAL,
                                          T.NUMERIC):
        return arg
    raise UndefinedFunction(
        f"function {kind}({arg.pg_name}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


def accumulate(aggs: list[Aggregate], rows: Sequence[Row], ctx: Ctx) -> tuple[Value, ...]:
    """The aggregates' values over one group's input rows (NULLs skipped, SQL style)."""
    out: list[Value] = []
    for agg in aggs:
        if agg.kind == "count_star":
            out.append(len(rows))
            continue
        assert agg.arg is not None
        f = agg.arg.fn
        values = [v for v in (f(r, ctx) for r in rows) if v is not None]
        if agg.distinct:
            values = list(dict.fromkeys(values))
        if agg.kind == "count":
            out.append(len(values))
        elif not values:
            out.append(None)
        elif agg.kind == "sum":
            out.append(check_int(sum(int(v) for v in values), T.INT8))
        elif agg.kind == "min":
            out.append(min(values))
        else:
            out.append(max(values))
    return tuple(out)

