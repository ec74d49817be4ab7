"""Scalar expressions: literals, placeholders, casts, predicates, operators, functions.

Part of the compiler in :mod:`.expressions` (split for size). Column names follow
PostgreSQL's FigureColname: a column keeps its name, a function call its function's name,
a cast its operand's name or else the type's name, anything else ``?column?``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.lexical import bounded_int, shown
from cubequeue.grammar.results import Row, Value

from .datetime_functions import ANONYMOUS, NODE_NAMES, compile_typed
from .errors import DatatypeMismatch, NumericValueOutOfRange, UndefinedFunction, UndefinedObject
from .expressions import (
    _CMP,
    Compiled,
    Ctx,
    Scope,
    _and,
    _bool_operand,
    _or,
    _unify,
    arithmetic,
    cast,
    coerce,
    compare,
    compile_expr,
)
from .intervals import Interval, parse_interval_value
from .json_ops import compile_json
from .like import LikePattern, compile_like
from .limits import check_in_list
from .regexes import Regex, compile_regex
from .sqltypes import SqlType, check_int
from .strings import STRING_FUNCTIONS, STRING_NODES, compile_string, string_function
from .time_functions import TIME_FUNCTIONS, TIME_NODES, compile_time

__all__ = ["call_function", "compile_scalar", "output_name"]

T = SqlType
DT = exp.DataType.Type
_CASTS: Final = {
    DT.BIGINT: (T.INT8, "int8"), DT.INT: (T.INT4, "int4"), DT.SMALLINT: (T.INT4, "int4"),
    DT.TEXT: (T.TEXT, "text"), DT.VARCHAR: (T.TEXT, "varchar"), DT.CHAR: (T.TEXT, "bpchar"),
    DT.BOOLEAN: (T.BOOL, "bool"), DT.TIMESTAMPTZ: (T.TIMESTAMPTZ, "timestamptz"),
    DT.INTERVAL: (T.INTERVAL, "interval"),
    DT.JSON: (T.JSON, "json"), DT.JSONB: (T.JSONB, "jsonb"),
    # Cube Store's CAST(x as TIMESTAMP) (CubeStoreQuery.timeStampCast): read as timestamptz
    # in the session TimeZone, which is how PostgreSQL compares a timestamp with now().
    DT.TIMESTAMP: (T.TIMESTAMPTZ, "timestamp"), DT.DATETIME: (T.TIMESTAMPTZ, "timestamp"),
}
_FUNC_NAMES: Final = {
    exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Sum: "sum", exp.Avg: "avg",
    exp.Coalesce: "coalesce", exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length",
    exp.CurrentTimestamp: "now", exp.CurrentVersion: "version",
    exp.CurrentUser: "current_user", exp.SessionUser: "session_user",
    exp.CurrentDatabase: "current_database", exp.CurrentSchema: "current_schema",
}


def output_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name if node.this.args.get("quoted") else node.name.lower()
    if isinstance(node, exp.Paren):
        return output_name(node.this)
    if isinstance(node, exp.Cast):
        inner = output_name(node.this)
        if inner != "?column?":
            return inner
        return _CASTS.get(node.to.this, (T.TEXT, node.to.sql(dialect="postgres").lower()))[1]
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Interval):
        return "interval"
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Dot):
        return output_name(node.expression)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if type(node) in NODE_NAMES:
        return NODE_NAMES[type(node)]
    if isinstance(node, exp.Trim):
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(
            str(node.args.get("position") or "").upper(), "btrim")
    if type(node) in STRING_NODES:
        return STRING_NODES[type(node)]
    if type(node) in TIME_NODES:
        return TIME_NODES[type(node)]
    for cls, name in _FUNC_NAMES.items():
        if isinstance(node, cls):
            return name
    return "?column?"


def _const(value: Value, type_: SqlType, name: str = "?column?") -> Compiled:
    return Compiled(lambda row, ctx: value, type_, name, const=True, literal=(value,))


def _literal(node: exp.Literal) -> Compiled:
    if node.is_string:
        return _const(node.this, T.UNKNOWN)
    text = node.this
    if re.fullmatch(r"\d+", text):
        n = bounded_int(text)  # never int() of 4,300 digits (limits.bound_statement)
        if n <= 2**31 - 1:
            return _const(n, T.INT4)
        if n <= 2**63 - 1:
            return _const(n, T.INT8)
        raise NumericValueOutOfRange(f"value {shown(text)} is out of range for type bigint")
    raise FeatureNotSupported(f"numeric literal {text} is not supported (integers only)")


def _param(index: int, scope: Scope) -> Compiled:
    known = scope.params.get(index)

    def run(row: Row, ctx: Ctx) -> Value:
        return ctx.params[index - 1] if index <= len(ctx.params) else None

    raw = Compiled(run, T.UNKNOWN, "?column?", const=True, param=index)
    scope.params.setdefault(index, T.UNKNOWN)
    if known is not None and known is not T.UNKNOWN:
        return cast(raw, known)
    return raw


def _cast_node(node: exp.Cast, scope: Scope) -> Compiled:
    target = _CASTS.get(node.to.this)
    if target is None:
        raise FeatureNotSupported(
            f"type {node.to.sql(dialect='postgres').lower()} is not supported "
            "(use int8, int4, text, bool, timestamp, timestamptz, interval, json or jsonb)"
        )
    inner = compile_expr(node.this, scope)
    if inner.param is not None:
        coerce(inner, target[0], scope)
    return Compiled(cast(inner, target[0]).fn, target[0], output_name(node), inner.const)


def _text_operand(c: Compiled, scope: Scope, what: str) -> Compiled:
    if c.type in (T.TEXT, T.UNKNOWN):
        return coerce(c, T.TEXT, scope)
    raise FeatureNotSupported(f"{what} needs text, not {c.type.pg_name}")


#: patterns compiled per LIKE or ~ node and kept, so a column pattern cannot grow it per row
_LIKE_CACHE_ENTRIES: Final = 64


def _regex(node: exp.RegexpLike | exp.RegexpILike, scope: Scope) -> Compiled:
    """``~`` and ``~*`` through :mod:`.regexes` (RE2: linear, no backtracking; ``!~`` and
    ``!~*`` arrive as NOT around them). A pattern written in the statement is compiled here, once; one that
    comes from a column or a parameter is compiled at its first row and kept."""
    insensitive = isinstance(node, exp.RegexpILike)
    what = "~*" if insensitive else "~"
    a = _text_operand(compile_expr(node.this, scope), scope, what)
    b = _text_operand(compile_expr(node.expression, scope), scope, what)
    fixed = None
    if b.literal is not None and b.literal[0] is not None:
        fixed = compile_regex(str(b.literal[0]), insensitive=insensitive)
    regexes: dict[str, Regex] = {}

    def run(row: Row, ctx: Ctx) -> Value:
        x = a.fn(row, ctx)
        rx = fixed
        if rx is None:
            p = b.fn(row, ctx)
            if p is None:
                return None
            rx = regexes.get(str(p))
            if rx is None:
                rx = compile_regex(str(p), insensitive=insensitive)
                if len(regexes) < _LIKE_CACHE_ENTRIES:
                    regexes[str(p)] = rx
        if x is None:
            return None
        return rx.search(str(x))

    return Compiled(run, T.BOOL)


def _like(node: exp.Like | exp.ILike, scope: Scope,
          escape_node: exp.Expr | None = None) -> Compiled:
    """LIKE / ILIKE through :mod:`.like` (linear, no backtracking)."""
    what = "ILIKE" if isinstance(node, exp.ILike) else "LIKE"
    a = _text_operand(compile_expr(node.this, scope), scope, what)
    b = _text_operand(compile_expr(node.expression, scope), scope, what)
    esc = None if escape_node is None else _text_operand(compile_expr(escape_node, scope), scope, "ESCAPE")
    negate = bool(node.args.get("negate"))
    insensitive = isinstance(node, exp.ILike)
    patterns: dict[tuple[str, str], LikePattern] = {}

    def run(row: Row, ctx: Ctx) -> Value:
        x, p = a.fn(row, ctx), b.fn(row, ctx)
        e = "\\" if esc is None else esc.fn(row, ctx)
        if x is None or p is None or e is None:
            return None
        key = (str(p), str(e))
        pattern = patterns.get(key)
        if pattern is None:
            pattern = compile_like(key[0], escape=key[1], insensitive=insensitive)
            if len(patterns) < _LIKE_CACHE_ENTRIES:
                patterns[key] = pattern
        return pattern.matches(str(x)) != negate

    return Compiled(run, T.BOOL)


def _in(node: exp.In, scope: Scope) -> Compiled:
    """``x IN (…)``: a set lookup when every item is a constant of the statement (the
    common case, so a long list costs nothing per row), else one comparison per item."""
    if node.args.get("query") or not node.expressions:
        raise FeatureNotSupported("IN (subquery) is not supported")
    check_in_list(len(node.expressions))
    left = compile_expr(node.this, scope)
    items = []
    for item in node.expressions:
        left, right = _unify(left, compile_expr(item, scope), "=", scope)
        items.append(right)
    if left.type is T.UNKNOWN:
        left = coerce(left, T.TEXT, scope)
    items = [coerce(i, left.type, scope) if i.type is T.UNKNOWN else i for i in items]
    lf, fns = left.fn, [i.fn for i in items]
    if all(i.literal is not None for i in items):
        values = frozenset(i.literal[0] for i in items if i.literal is not None)
        saw_null = None in values

        def run_set(row: Row, ctx: Ctx) -> Value:
            x = lf(row, ctx)
            if x is None:
                return None
            return True if x in values else None if saw_null else False

        return Compiled(run_set, T.BOOL)

    def run(row: Row, ctx: Ctx) -> Value:
        x = lf(row, ctx)
        if x is None:
            return None
        saw_null = False
        for f in fns:
            y = f(row, ctx)
            if y is None:
                saw_null = True
            elif y == x:
                return True
        return None if saw_null else False

    return Compiled(run, T.BOOL)


def _is(node: exp.Is, scope: Scope) -> Compiled:
    a = compile_expr(node.this, scope).fn
    negate = bool(node.args.get("negate"))
    target = node.expression
    if isinstance(target, exp.Null):
        return Compiled(lambda row, ctx: (a(row, ctx) is None) != negate, T.BOOL)
    if isinstance(target, exp.Boolean):
        want = target.this
        return Compiled(lambda row, ctx: (a(row, ctx) is want) != negate, T.BOOL)
    raise FeatureNotSupported("IS supports NULL, TRUE and FALSE")


def _case(node: exp.Case, scope: Scope) -> Compiled:
    subject = node.args.get("this")
    conds, values = [], []
    for branch in node.args.get("ifs") or []:
        cond = branch.this if subject is None else exp.EQ(this=subject, expression=branch.this)
        conds.append(_bool_operand(compile_expr(cond, scope), "CASE/WHEN", scope))
        values.append(compile_expr(branch.args["true"], scope))
    default = node.args.get("default")
    values.append(compile_expr(default, scope) if default is not None else _const(None, T.UNKNOWN))
    result = next((v.type for v in values if v.type is not T.UNKNOWN), T.TEXT)
    for v in values:
        if v.type not in (result, T.UNKNOWN) and not (v.type.is_int and result.is_int):
            raise DatatypeMismatch(f"CASE types {result.pg_name} and {v.type.pg_name} cannot be matched")
    fns = [coerce(v, result, scope).fn for v in values]
    cfns = [c.fn for c in conds]

    def run(row: Row, ctx: Ctx) -> Value:
        for c, f in zip(cfns, fns, strict=False):
            if c(row, ctx) is True:
                return f(row, ctx)
        return fns[-1](row, ctx)

    return Compiled(run, result, "case")


def _coalesce(args: list[exp.Expr], scope: Scope) -> Compiled:
    parts = [compile_expr(a, scope) for a in args]
    result = next((p.type for p in parts if p.type is not T.UNKNOWN), T.TEXT)
    fns = [coerce(p, result, scope).fn for p in parts]

    def run(row: Row, ctx: Ctx) -> Value:
        for f in fns:
            v = f(row, ctx)
            if v is not None:
                return v
        return None

    return Compiled(run, result, "coalesce")


def _current_setting(args: list[Compiled], scope: Scope) -> Compiled:
    name = coerce(args[0], T.TEXT, scope).fn
    missing_ok = coerce(args[1], T.BOOL, scope).fn if len(args) > 1 else (lambda r, c: False)

    def run(row: Row, ctx: Ctx) -> Value:
        key = name(row, ctx)
        if key is None:
            return None
        value = ctx.session.get(str(key))
        if value is None and missing_ok(row, ctx) is not True:
            raise UndefinedObject(f'unrecognized configuration parameter "{key}"')
        return value

    return Compiled(run, T.TEXT, "current_setting")


_NILADIC: Final[dict[str, tuple[SqlType, Callable[[Ctx], Value]]]] = {
    "now": (T.TIMESTAMPTZ, lambda ctx: ctx.now_ms),
    "current_timestamp": (T.TIMESTAMPTZ, lambda ctx: ctx.now_ms),
    "statement_timestamp": (T.TIMESTAMPTZ, lambda ctx: ctx.now_ms),
    "transaction_timestamp": (T.TIMESTAMPTZ, lambda ctx: ctx.now_ms),
    "clock_timestamp": (T.TIMESTAMPTZ, lambda ctx: ctx.now_ms),
    "version": (T.TEXT, lambda ctx: version_text(ctx.session.server_version)),
    "current_user": (T.TEXT, lambda ctx: ctx.session.user),
    "user": (T.TEXT, lambda ctx: ctx.session.user),
    "session_user": (T.TEXT, lambda ctx: ctx.session.user),
    "current_database": (T.TEXT, lambda ctx: ctx.session.database),
    "current_schema": (T.TEXT, lambda ctx: "public"),
    "pg_advisory_unlock_all": (T.VOID, lambda ctx: ""),
}
_WITH_ARGS: Final[dict[str, tuple[range, Callable[[list[Compiled], Scope], Compiled]]]] = {
    "current_setting": (range(1, 3), _current_setting),
    **TIME_FUNCTIONS,
}
#: every function plain SQL answers, for the 42883 of one it does not (PostgreSQL's code)
SUPPORTED_FUNCTIONS: Final = tuple(sorted({
    *_NILADIC, *_WITH_ARGS, *ANONYMOUS, *STRING_FUNCTIONS, "concat", "concat_ws",
    "coalesce", "count", "min", "max", "sum", "date_trunc", "extract", "date_part",
    "floor", "ceil", "date_add", "date_sub", "to_timestamp", "position", "trim",
}))


def version_text(server_version: str) -> str:
    """``SELECT version()``, shaped like PostgreSQL's so that tools parsing it cope."""
    return f"PostgreSQL {server_version} on x86_64-pc-linux-gnu, compiled by CPython, 64-bit"


def call_function(name: str, args: list[exp.Expr], scope: Scope,
                  node: exp.Expr) -> Compiled:
    shown = "user" if name == "user" else output_name(node) if not isinstance(node, exp.Column) else name
    if name in _NILADIC and not args:
        type_, f = _NILADIC[name]
        if name == "pg_advisory_unlock_all":
            shown = name
        return Compiled(lambda row, ctx: f(ctx), type_, shown, const=True)
    if name in _WITH_ARGS:
        arity, build = _WITH_ARGS[name]
        if len(args) in arity:
            return build([compile_expr(a, scope) for a in args], scope)
    if name in ANONYMOUS:
        arity, build = ANONYMOUS[name]
        if len(args) in arity:
            return build([compile_expr(a, scope) for a in args], scope)
    if name == "coalesce" and args:
        return _coalesce(args, scope)
    compiled = [compile_expr(a, scope) for a in args]
    found = string_function(name, compiled, scope)
    if found is not None:
        return found
    raise unknown_function(name, compiled)


def unknown_function(name: str, args: list[Compiled] | None = None) -> UndefinedFunction:
    """42883 as PostgreSQL words it, with the list of what plain SQL answers."""
    types = "" if args is None else ", ".join(a.type.pg_name for a in args)
    return UndefinedFunction(
        f"function {name}({types}) does not exist",
        hint="cubequeue's plain SQL supports " + ", ".join(SUPPORTED_FUNCTIONS)
        + " (and the operators ->, ->>, ||, LIKE, ~).",
    )


def _interval(node: exp.Interval) -> Compiled:
    text = node.this.name if node.this is not None else ""
    unit = node.args.get("unit")
    if unit is not None:
        text = f"{text} {unit.name}"
    return _const(parse_interval_value(text), T.INTERVAL, "interval")


def compile_scalar(node: exp.Expr, scope: Scope) -> Compiled:
    if isinstance(node, exp.Paren):
        return compile_expr(node.this, scope)
    if isinstance(node, exp.Literal):
        return _literal(node)
    if isinstance(node, exp.Boolean):
        return _const(bool(node.this), T.BOOL, "bool")
    if isinstance(node, exp.Null):
        return _const(None, T.UNKNOWN)
    if isinstance(node, exp.Parameter | exp.Placeholder):
        return _param(int(node.name), scope)
    if isinstance(node, exp.Cast):
        return _cast_node(node, scope)
    if type(node) in _CMP:
        return compare(node, compile_expr(node.this, scope), compile_expr(node.expression, scope), scope)
    if isinstance(node, exp.And | exp.Or):
        what = "AND" if isinstance(node, exp.And) else "OR"
        a = _bool_operand(compile_expr(node.this, scope), what, scope)
        b = _bool_operand(compile_expr(node.expression, scope), what, scope)
        return Compiled((_and if what == "AND" else _or)(a.fn, b.fn), T.BOOL)
    if isinstance(node, exp.Not):
        neg = _bool_operand(compile_expr(node.this, scope), "NOT", scope).fn
        return Compiled(lambda row, ctx: None if (v := neg(row, ctx)) is None else not v, T.BOOL)
    if isinstance(node, exp.Is):
        return _is(node, scope)
    if isinstance(node, exp.In):
        return _in(node, scope)
    if isinstance(node, exp.Between):
        low = exp.GTE(this=node.this, expression=node.args["low"])
        high = exp.LTE(this=node.this, expression=node.args["high"])
        return compile_expr(exp.And(this=low, expression=high), scope)
    if isinstance(node, exp.Like | exp.ILike):
        return _like(node, scope)
    if isinstance(node, exp.RegexpLike | exp.RegexpILike):
        return _regex(node, scope)
    if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like | exp.ILike):
        return _like(node.this, scope, node.expression)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
        return arithmetic(node, compile_expr(node.this, scope), compile_expr(node.expression, scope), scope)
    if isinstance(node, exp.Neg):
        operand = compile_expr(node.this, scope)
        if operand.type is T.UNKNOWN:
            operand = coerce(operand, T.INT8, scope)
        if not (operand.type.is_int or operand.type is T.INTERVAL):
            raise FeatureNotSupported(f"operator does not exist: - {operand.type.pg_name}")
        f, t = operand.fn, operand.type
        return Compiled(lambda row, ctx: None if (v := f(row, ctx)) is None
                        else check_int(-int(v), t) if t.is_int else -Interval.of(v), t,
                        const=operand.const)
    if isinstance(node, exp.DPipe):
        parts = [compile_expr(node.this, scope), compile_expr(node.expression, scope)]
        fns = [cast(p, T.TEXT).fn if p.type not in (T.TEXT, T.UNKNOWN) else p.fn for p in parts]
        return Compiled(lambda row, ctx: None if (x := fns[0](row, ctx)) is None or (y := fns[1](row, ctx)) is None
                        else str(x) + str(y), T.TEXT)
    if isinstance(node, exp.Case):
        return _case(node, scope)
    if isinstance(node, exp.Interval):
        return _interval(node)
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) \
            and node.this.name.lower() == "pg_catalog" and isinstance(node.expression, exp.Func):
        return compile_expr(node.expression, scope)
    if isinstance(node, exp.Anonymous):
        return call_function(str(node.this).lower(), list(node.expressions), scope, node)
    if isinstance(node, exp.Coalesce):
        return _coalesce([node.this, *node.expressions], scope)
    typed = (compile_typed(node, scope) or compile_string(node, scope)
             or compile_json(node, scope) or compile_time(node, scope))
    if typed is not None:
        return typed
    for cls, name in _FUNC_NAMES.items():
        if isinstance(node, cls) and name not in ("count", "min", "max", "sum", "avg", "coalesce"):
            args = [a for a in (node.args.get("this"), *node.expressions) if isinstance(a, exp.Expr)]
            return call_function(name, args, scope, node)
    if isinstance(node, exp.Func):
        raise unknown_function(node.sql_name().lower())
    raise FeatureNotSupported(
        f"cubequeue does not support this expression: {node.sql(dialect='postgres')[:60]}"
    )

