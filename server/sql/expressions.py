"""Compile sqlglot expressions into typed Python closures (``(row, ctx) -> value``).

Why a compiler of our own rather than ``sqlglot.executor``: the executor goes through
Python ``eval`` of generated code per query, loses our types (timestamps are plain ints to
it, ``count(*)`` comes back untyped, NULL logic is Python's not SQL's) and costs
milliseconds per call; Describe also needs every column's PostgreSQL type *without
running* the query. So each expression is
typed once, at compile time, with PostgreSQL's rules (an untyped literal or placeholder
takes the type of what it is compared with; ``text = integer`` is 42883), and evaluated
with SQL's three-valued logic.

Grouped queries: the planner gives a :class:`Grouping`; a sub-expression equal to a GROUP
BY key reads that key, an aggregate reads its accumulated value, and any other column is
42803, as in PostgreSQL.

This module holds the compiler's values and the dispatch; the node kinds that recurse
(:mod:`.scalars`, :mod:`.aggregates`, :mod:`.datetime_functions`) sit above it and call
:func:`compile_expr` for their operands. The dispatch reaches them through the
:class:`NodeCompilers` every :class:`Scope` carries (the planner, :mod:`.systables`, builds
it), so nothing here imports the modules above.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import Row, Value

from .errors import (
    DatatypeMismatch,
    DivisionByZero,
    GroupingError,
    IndeterminateDatatype,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
)
from .intervals import Interval, shift, since
from .sqltypes import SqlType, cast_value, check_int

if TYPE_CHECKING:
    from .session import PlainSession

__all__ = [
    "AGGREGATES",
    "Aggregate",
    "Compiled",
    "Ctx",
    "Grouping",
    "NodeCompilers",
    "Scope",
    "compile_expr",
]

T = SqlType
AGGREGATES = (exp.Count, exp.Min, exp.Max, exp.Sum, exp.Avg)
_HINT_CAST = (
    "No operator matches the given name and argument types. "
    "You might need to add explicit type casts."
)


@dataclass(slots=True)
class Ctx:
    """Per-execution inputs: bound parameters (text), session, clock reading."""

    params: Sequence[str | None]
    session: PlainSession
    now_ms: int
    tz: tzinfo
    cache: dict[object, Value] = field(default_factory=dict)


Eval = Callable[[Row, Ctx], Value]


@dataclass(frozen=True, slots=True)
class Compiled:
    fn: Eval
    type: SqlType
    name: str = "?column?"
    #: no column or aggregate inside: the value is the same for every row.
    const: bool = False
    #: set for a bare placeholder whose type is still open.
    param: int | None = None
    #: a literal written in the statement: (value,), so casts can fail at plan time.
    literal: tuple[Value] | None = None


@dataclass(slots=True)
class Aggregate:
    kind: str  # count_star, count, min, max, sum
    arg: Compiled | None
    distinct: bool
    type: SqlType


@dataclass(slots=True)
class Grouping:
    """GROUP BY keys (by signature) and the aggregates met while compiling."""

    keys: list[tuple[str, SqlType]]
    aggregates: list[Aggregate] = field(default_factory=list)
    agg_signatures: list[str] = field(default_factory=list)


NodeCompiler = Callable[[exp.Expr, "Scope"], Compiled]


@dataclass(frozen=True, slots=True)
class NodeCompilers:
    """The compilers :func:`compile_expr` dispatches to, which live in the modules above
    this one (they import :func:`compile_expr` to compile their operands)."""

    #: count/min/max/sum/avg (:func:`.aggregates.compile_aggregate`)
    aggregate: NodeCompiler
    #: every other node (:func:`.scalars.compile_scalar`)
    scalar: NodeCompiler
    #: a function by name: ``user``, ``current_user``… written without parentheses
    function: Callable[[str, list[exp.Expr], Scope, exp.Expr], Compiled]
    #: PostgreSQL's output column name of a node (:func:`.scalars.output_name`)
    name: Callable[[exp.Expr], str]


@dataclass(slots=True)
class Scope:
    #: input column name → (index in the row, type)
    columns: dict[str, tuple[int, SqlType]]
    #: table names a column may be qualified with (the alias, else the table name)
    qualifiers: frozenset[str]
    #: placeholder number → deduced type, shared by the whole statement
    params: dict[int, SqlType]
    #: the node kinds compiled above this module
    nodes: NodeCompilers
    grouping: Grouping | None = None
    #: "WHERE", "LIMIT"…: where aggregates are refused, for the message
    no_aggregates: str | None = None
    in_aggregate: bool = False


def getter(index: int) -> Eval:
    """The evaluator of an input column (or of a GROUP BY key / aggregate slot)."""

    def run(row: Row, ctx: Ctx) -> Value:
        return row[index]

    return run


def _memo(fn: Eval) -> Eval:
    """Evaluate a constant once per execution (a literal timestamp is parsed once)."""
    key = object()

    def run(row: Row, ctx: Ctx) -> Value:
        try:
            return ctx.cache[key]
        except KeyError:
            value = ctx.cache[key] = fn(row, ctx)
            return value

    return run


def coerce(c: Compiled, target: SqlType, scope: Scope) -> Compiled:
    """Give an untyped literal/placeholder the type ``target`` (implicit cast)."""
    if c.type is target or target is T.UNKNOWN:
        return c
    if c.param is not None:
        prev = scope.params.get(c.param)
        if prev not in (None, T.UNKNOWN, target):
            raise IndeterminateDatatype(f"inconsistent types deduced for parameter ${c.param}")
        scope.params[c.param] = target
    if c.type is T.UNKNOWN or (c.type.is_int and target.is_int):
        return cast(c, target)
    raise DatatypeMismatch(f"cannot use a value of type {c.type.pg_name} as {target.pg_name}")


def cast(c: Compiled, target: SqlType) -> Compiled:
    """``c::target``; a literal is converted now, so ``priority = 'x'`` fails at plan
    time as in PostgreSQL (a timestamp literal is re-read per run: it depends on the
    session TimeZone and on ``now``)."""
    src, inner = c.type, c.fn
    if c.literal is not None:
        value = cast_value(c.literal[0], src, target, UTC, 0)
        if target is not T.TIMESTAMPTZ:
            return Compiled(lambda row, ctx: value, target, c.name, True, literal=(value,))

    def run(row: Row, ctx: Ctx) -> Value:
        return cast_value(inner(row, ctx), src, target, ctx.tz, ctx.now_ms)

    return Compiled(_memo(run) if c.const else run, target, c.name, c.const)


def _unify(a: Compiled, b: Compiled, op: str, scope: Scope) -> tuple[Compiled, Compiled]:
    if a.type is b.type or (a.type.is_number and b.type.is_number):
        return a, b
    if a.type is T.UNKNOWN and b.type is T.TEXT:
        return coerce(a, T.TEXT, scope), b
    if b.type is T.UNKNOWN:
        return a, coerce(b, a.type, scope)
    if a.type is T.UNKNOWN:
        return coerce(a, b.type, scope), b
    raise UndefinedFunction(
        f"operator does not exist: {a.type.pg_name} {op} {b.type.pg_name}", hint=_HINT_CAST
    )


def _null_safe(op: Callable[[Any, Any], Any], a: Eval, b: Eval) -> Eval:
    def run(row: Row, ctx: Ctx) -> Value:
        x = a(row, ctx)
        if x is None:
            return None
        y = b(row, ctx)
        return None if y is None else op(x, y)

    return run


def _bool_operand(c: Compiled, what: str, scope: Scope) -> Compiled:
    if c.type is T.BOOL:
        return c
    if c.type is T.UNKNOWN:
        return coerce(c, T.BOOL, scope)
    raise DatatypeMismatch(f"argument of {what} must be type boolean, not type {c.type.pg_name}")


def _and(a: Eval, b: Eval) -> Eval:
    def run(row: Row, ctx: Ctx) -> Value:
        x = a(row, ctx)
        if x is False:
            return False
        y = b(row, ctx)
        if y is False:
            return False
        return None if x is None or y is None else True

    return run


def _or(a: Eval, b: Eval) -> Eval:
    def run(row: Row, ctx: Ctx) -> Value:
        x = a(row, ctx)
        if x is True:
            return True
        y = b(row, ctx)
        if y is True:
            return True
        return None if x is None or y is None else False

    return run


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise DivisionByZero("division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise DivisionByZero("division by zero")
    return a - b * _int_div(a, b)


_CMP: dict[type[exp.Expr], tuple[str, Callable[[Any, Any], Any]]] = {
    exp.EQ: ("=", operator.eq), exp.NEQ: ("<>", operator.ne), exp.LT: ("<", operator.lt),
    exp.LTE: ("<=", operator.le), exp.GT: (">", operator.gt), exp.GTE: (">=", operator.ge),
}
_ARITH: dict[type[exp.Expr], tuple[str, Callable[[int, int], int]]] = {
    exp.Add: ("+", operator.add), exp.Sub: ("-", operator.sub), exp.Mul: ("*", operator.mul),
    exp.Div: ("/", _int_div), exp.Mod: ("%", _int_mod),
}


def signature(node: exp.Expr, scope: Scope) -> str:
    """Identity of an expression for GROUP BY matching (a column by its index)."""
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return f"#col{resolve_column(node, scope)[0]}"
    if isinstance(node, exp.Paren):
        return signature(node.this, scope)
    return node.sql(dialect="postgres")


def resolve_column(node: exp.Column, scope: Scope) -> tuple[int, SqlType]:
    qual = node.table
    name = node.name if node.this.args.get("quoted") else node.name.lower()
    if qual and qual.lower() not in scope.qualifiers:
        raise UndefinedTable(f'missing FROM-clause entry for table "{qual}"')
    found = scope.columns.get(name)
    if found is None:
        shown = f"{qual}.{name}" if qual else name
        raise UndefinedColumn(f'column "{shown}" does not exist',
                              hint=_column_hint(name, scope.columns))
    return found


#: the dialect's word for a column the system tables name otherwise (QUEUE statements say
#: ``payload``; system.queue and system.cache call it ``value``)
_DIALECT_NAMES = {"payload": "value"}


def _column_hint(name: str, known: Mapping[str, object]) -> str | None:
    """PostgreSQL's "Perhaps you meant…" hint: the dialect's alias, else the nearest name."""
    alias = _DIALECT_NAMES.get(name)
    if alias is not None and alias in known:
        return f'Perhaps you meant to reference the column "{alias}" (what QUEUE statements call {name}).'
    near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f'Perhaps you meant to reference the column "{near[0]}".' if near else None


def compile_expr(node: exp.Expr, scope: Scope) -> Compiled:
    """Type-check ``node`` in ``scope`` and return its evaluator."""
    g = scope.grouping
    if g is not None and not scope.in_aggregate and not isinstance(node, exp.Literal):
        sig = signature(node, scope) if not isinstance(node, AGGREGATES) else None
        for i, (key_sig, key_type) in enumerate(g.keys):
            if sig == key_sig:
                return Compiled(getter(i), key_type, scope.nodes.name(node))
    if isinstance(node, AGGREGATES):
        return scope.nodes.aggregate(node, scope)
    if isinstance(node, exp.Column):
        if isinstance(node.this, exp.Star):
            raise FeatureNotSupported("* is only allowed alone in the select list or in count(*)")
        name = node.name.lower()
        if name in ("user", "current_user", "session_user") and name not in scope.columns \
                and not node.table and not node.this.args.get("quoted"):
            return scope.nodes.function(name, [], scope, node)
        if g is not None and not scope.in_aggregate:
            resolve_column(node, scope)  # 42703 before 42803, as PostgreSQL
            raise GroupingError(
                f'column "{node.sql(dialect="postgres")}" must appear in the GROUP BY clause '
                "or be used in an aggregate function"
            )
        index, type_ = resolve_column(node, scope)
        return Compiled(getter(index), type_, node.name)
    return scope.nodes.scalar(node, scope)


def compare(node: exp.Expr, a: Compiled, b: Compiled, scope: Scope) -> Compiled:
    op_text, op = _CMP[type(node)]
    a, b = _unify(a, b, op_text, scope)
    if a.type is T.UNKNOWN:  # 'x' = 'y': both text
        a, b = coerce(a, T.TEXT, scope), coerce(b, T.TEXT, scope)
    return Compiled(_null_safe(op, a.fn, b.fn), T.BOOL, const=a.const and b.const)


def arithmetic(node: exp.Expr, a: Compiled, b: Compiled, scope: Scope) -> Compiled:
    op_text, op = _ARITH[type(node)]
    const = a.const and b.const
    if a.type is T.TIMESTAMPTZ and b.type is T.UNKNOWN and op_text in "+-":
        b = coerce(b, T.INTERVAL, scope)
    if b.type is T.TIMESTAMPTZ and a.type is T.UNKNOWN and op_text == "+":
        a = coerce(a, T.INTERVAL, scope)
    if op_text == "*" and T.INTERVAL in (a.type, b.type):  # interval * 3
        a = coerce(a, T.INT8, scope) if a.type is T.UNKNOWN else a
        b = coerce(b, T.INT8, scope) if b.type is T.UNKNOWN else b
    if a.type is T.UNKNOWN and b.type is not T.UNKNOWN:
        a = coerce(a, b.type, scope)
    if b.type is T.UNKNOWN and a.type is not T.UNKNOWN:
        b = coerce(b, a.type, scope)
    pair = (a.type, b.type)
    if not (a.type.is_int and b.type.is_int):
        temporal = _TEMPORAL.get((op_text, pair[0], pair[1]))
        if temporal is None:
            raise UndefinedFunction(
                f"operator does not exist: {a.type.pg_name} {op_text} {b.type.pg_name}",
                hint=_HINT_CAST,
            )
        result, run = temporal
        return Compiled(_temporal(run, a.fn, b.fn), result, const=const)
    result = T.INT4 if pair == (T.INT4, T.INT4) else T.INT8
    fn = _null_safe(op, a.fn, b.fn)
    inner = fn

    def checked(row: Row, ctx: Ctx) -> Value:
        v = inner(row, ctx)
        return None if v is None else check_int(int(v), result)

    return Compiled(checked, result, const=const)


_Temporal = Callable[[Any, Any, tzinfo], int]


def _temporal(run: _Temporal, a: Eval, b: Eval) -> Eval:
    def evaluate(row: Row, ctx: Ctx) -> Value:
        x = a(row, ctx)
        if x is None:
            return None
        y = b(row, ctx)
        # not int(): an Interval is an int that keeps its months and days
        return None if y is None else run(x, y, ctx.tz)

    return evaluate


#: (operator, left, right) → (result, evaluation) of timestamp and interval arithmetic,
#: as PostgreSQL's operators (:mod:`.intervals`)
_TEMPORAL: dict[tuple[str, SqlType, SqlType], tuple[SqlType, _Temporal]] = {
    ("+", T.TIMESTAMPTZ, T.INTERVAL): (T.TIMESTAMPTZ, lambda ts, iv, tz: shift(ts, iv, tz)),
    ("+", T.INTERVAL, T.TIMESTAMPTZ): (T.TIMESTAMPTZ, lambda iv, ts, tz: shift(ts, iv, tz)),
    ("-", T.TIMESTAMPTZ, T.INTERVAL): (T.TIMESTAMPTZ, lambda ts, iv, tz: shift(ts, iv, tz, -1)),
    ("-", T.TIMESTAMPTZ, T.TIMESTAMPTZ): (T.INTERVAL, lambda x, y, tz: since(x, y)),
    ("+", T.INTERVAL, T.INTERVAL): (T.INTERVAL,
                                    lambda x, y, tz: Interval.of(x).plus(Interval.of(y))),
    ("-", T.INTERVAL, T.INTERVAL): (T.INTERVAL,
                                    lambda x, y, tz: Interval.of(x).plus(-Interval.of(y))),
    ("*", T.INTERVAL, T.INT4): (T.INTERVAL, lambda iv, n, tz: Interval.of(iv).times(n)),
    ("*", T.INTERVAL, T.INT8): (T.INTERVAL, lambda iv, n, tz: Interval.of(iv).times(n)),
    ("*", T.INT4, T.INTERVAL): (T.INTERVAL, lambda n, iv, tz: Interval.of(iv).times(n)),
    ("*", T.INT8, T.INTERVAL): (T.INTERVAL, lambda n, iv, tz: Interval.of(iv).times(n)),
}
