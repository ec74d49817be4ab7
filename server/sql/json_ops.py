"""``->`` and ``->>`` over ``json`` / ``jsonb`` (``value::json->>'sql'``), compiled.

The left side must be json or jsonb, as in PostgreSQL (``text -> unknown`` is 42883: cast
the payload, ``value::json``); the right side is a key (text) or an array index (an
integer, negative from the end). ``->`` keeps the left side's type, ``->>`` is text. The
work per row is :func:`.json_values.member`'s, one pass over the value.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from cubequeue.grammar.results import Row, Value

from .errors import UndefinedFunction
from .expressions import Compiled, Ctx, Scope, coerce, compile_expr
from .json_values import member
from .sqltypes import SqlType

__all__ = ["JSON_NODES", "compile_json"]

T = SqlType
JSON_NODES: Final[dict[type[exp.Expr], str]] = {
    exp.JSONExtract: "->", exp.JSONExtractScalar: "->>",
}


def _literal_key(path: exp.Expr) -> str | int | None:
    """The one key or index sqlglot read into a JSON path from a literal, or None."""
    if not isinstance(path, exp.JSONPath) or len(path.expressions) != 2:
        return None
    part = path.expressions[1]
    if isinstance(part, exp.JSONPathKey) and isinstance(part.this, str):
        return part.this
    if isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
        return part.this
    return None


def compile_json(node: exp.Expr, scope: Scope) -> Compiled | None:
    """The evaluator of ``a -> b`` / ``a ->> b``, or None for any other node."""
    op = JSON_NODES.get(type(node))
    if op is None:
        return None
    left = compile_expr(node.this, scope)
    path = node.expression
    key = _literal_key(path)
    if key is None:
        right = compile_expr(path, scope)
        if right.type is T.UNKNOWN:
            right = coerce(right, T.TEXT, scope)
        right_type = right.type
    else:
        right = Compiled(lambda row, ctx: key, T.INT4 if isinstance(key, int) else T.TEXT,
                         const=True)
        right_type = T.INT4 if isinstance(key, int) else T.UNKNOWN
    if left.type not in (T.JSON, T.JSONB) or not (right.type.is_int or right.type is T.TEXT):
        raise UndefinedFunction(
            f"operator does not exist: {left.type.pg_name} {op} {right_type.pg_name}",
            hint="Cast the text to json first: value::json->>'key'.")
    as_text = op == "->>"
    lf, rf = left.fn, right.fn

    def run(row: Row, ctx: Ctx) -> Value:
        doc = lf(row, ctx)
        if doc is None:
            return None
        k = rf(row, ctx)
        if k is None:
            return None
        return member(str(doc), k if isinstance(k, int) else str(k), as_text)

    return Compiled(run, T.TEXT if as_text else left.type, "?column?",
                    const=left.const and right.const)
