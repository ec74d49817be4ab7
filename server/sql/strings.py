"""String functions for reading payloads from psql, with PostgreSQL's semantics.

``substr``/``substring`` (``(s, from [, count])`` and ``(s FROM f FOR c)``), ``left``,
``right``, ``length``/``char_length``, ``octet_length``, ``lower``, ``upper``,
``position(x IN s)``/``strpos``, ``replace``, ``trim([LEADING|TRAILING|BOTH] [chars]
FROM s)``/``ltrim``/``rtrim``/``btrim``, ``concat``, ``concat_ws``, ``split_part``,
``starts_with``, ``reverse`` and ``||`` (in :mod:`.scalars`). Positions count characters
from 1 as PostgreSQL does (a start before 1 shortens the result: ``substr('hello', 0, 3)``
is ``he``); NULL in, NULL out, except ``concat``/``concat_ws``, which skip NULLs.

Every one is linear in its inputs. Only ``replace`` can make a result much longer than
what it reads, so its result is measured before it is built (54000 past
:data:`MAX_TEXT_RESULT`); the regular-expression forms of ``substring`` are not offered
(a backtracking pattern is not linear).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported, InvalidParameterValue, LimitExceeded
from cubequeue.grammar.results import Row, Value

from .errors import UndefinedFunction
from .expressions import Compiled, Ctx, Scope, cast, coerce, compile_expr
from .sqltypes import SqlType

__all__ = ["MAX_TEXT_RESULT", "STRING_NODES", "compile_string", "string_function"]

T = SqlType
#: characters one string function may produce (a payload is far smaller; a replace of
#: every character by a long string is what reaches it)
MAX_TEXT_RESULT: Final = 1 << 24
_HINT: Final = ("No function matches the given name and argument types. "
                "You might need to add explicit type casts.")


class SubstringError(InvalidParameterValue, sqlstate="22011"):
    """``substring_error``: a negative length."""


def _no_function(name: str, args: list[Compiled]) -> UndefinedFunction:
    types = ", ".join(a.type.pg_name for a in args)
    return UndefinedFunction(f"function {name}({types}) does not exist", hint=_HINT)


def _typed(name: str, args: list[Compiled], want: tuple[SqlType, ...],
           scope: Scope) -> list[Compiled]:
    """``args`` as ``want`` (text or an integer type): an untyped literal or parameter
    takes the type, an integer widens; anything else is 42883 as in PostgreSQL."""
    out = []
    for arg, target in zip(args, want, strict=True):
        if arg.type is target or (arg.type.is_int and target.is_int):
            out.append(arg)
        elif arg.type is T.UNKNOWN:
            out.append(coerce(arg, target, scope))
        else:
            raise _no_function(name, args)
    return out


def _build(name: str, want: tuple[SqlType, ...], out: SqlType,
           f: Callable[..., Value]) -> Callable[[list[Compiled], Scope], Compiled]:
    """A strict function (NULL if any argument is NULL) of fixed argument types."""

    def build(args: list[Compiled], scope: Scope) -> Compiled:
        fns = [a.fn for a in _typed(name, args, want[: len(args)], scope)]

        def run(row: Row, ctx: Ctx) -> Value:
            values = []
            for fn in fns:
                v = fn(row, ctx)
                if v is None:
                    return None
                values.append(v)
            return f(*values)

        return Compiled(run, out, name, const=all(a.const for a in args))

    return build


def substr(s: str, start: int, count: int | None = None) -> str:
    """PostgreSQL's ``substr``: characters ``start`` .. ``start + count - 1`` that exist."""
    if count is None:
        return s[max(start, 1) - 1 :]
    if count < 0:
        raise SubstringError("negative substring length not allowed")
    first, stop = max(start, 1), start + count
    return s[first - 1 : stop - 1] if stop > first else ""


def left(s: str, n: int) -> str:
    return s[:n] if n >= 0 else s[: max(len(s) + n, 0)]


def right(s: str, n: int) -> str:
    if n >= 0:
        return s[max(len(s) - n, 0) :] if n else ""
    return s[min(-n, len(s)) :]


def replace(s: str, old: str, new: str) -> str:
    if not old:
        return s
    if len(new) > len(old):
        size = len(s) + s.count(old) * (len(new) - len(old))
        if size > MAX_TEXT_RESULT:
            raise LimitExceeded(
                f"replace() would make a string of {size} characters, more than "
                f"{MAX_TEXT_RESULT} (the limit of one string function's result)")
    return s.replace(old, new)


def split_part(s: str, delimiter: str, n: int) -> str:
    if n == 0:
        raise InvalidParameterValue("field position must not be zero")
    if not delimiter:
        return s if n in (1, -1) else ""
    parts = s.split(delimiter)
    index = n - 1 if n > 0 else len(parts) + n
    return parts[index] if 0 <= index < len(parts) else ""


def strpos(s: str, sub: str) -> int:
    return s.find(sub) + 1


_TEXT, _INT = T.TEXT, T.INT8
#: function name → (argument counts, builder); what :mod:`.scalars` looks names up in
STRING_FUNCTIONS: Final[dict[str, tuple[range, Callable[[list[Compiled], Scope], Compiled]]]] = {
    "substr": (range(2, 4), _build("substr", (_TEXT, _INT, _INT), T.TEXT, substr)),
    "substring": (range(2, 4), _build("substring", (_TEXT, _INT, _INT), T.TEXT, substr)),
    "left": (range(2, 3), _build("left", (_TEXT, _INT), T.TEXT, left)),
    "right": (range(2, 3), _build("right", (_TEXT, _INT), T.TEXT, right)),
    "length": (range(1, 2), _build("length", (_TEXT,), T.INT4, len)),
    "char_length": (range(1, 2), _build("char_length", (_TEXT,), T.INT4, len)),
    "character_length": (range(1, 2), _build("character_length", (_TEXT,), T.INT4, len)),
    "octet_length": (range(1, 2), _build(
        "octet_length", (_TEXT,), T.INT4, lambda s: len(s.encode("utf-8", "surrogatepass")))),
    "lower": (range(1, 2), _build("lower", (_TEXT,), T.TEXT, str.lower)),
    "upper": (range(1, 2), _build("upper", (_TEXT,), T.TEXT, str.upper)),
    "strpos": (range(2, 3), _build("strpos", (_TEXT, _TEXT), T.INT4, strpos)),
    "replace": (range(3, 4), _build("replace", (_TEXT, _TEXT, _TEXT), T.TEXT, replace)),
    "split_part": (range(3, 4), _build("split_part", (_TEXT, _TEXT, _INT), T.TEXT,
                                       split_part)),
    "starts_with": (range(2, 3), _build("starts_with", (_TEXT, _TEXT), T.BOOL,
                                        str.startswith)),
    "reverse": (range(1, 2), _build("reverse", (_TEXT,), T.TEXT, lambda s: s[::-1])),
    "btrim": (range(1, 3), _build("btrim", (_TEXT, _TEXT), T.TEXT,
                                  lambda s, chars=" ": s.strip(chars))),
    "ltrim": (range(1, 3), _build("ltrim", (_TEXT, _TEXT), T.TEXT,
                                  lambda s, chars=" ": s.lstrip(chars))),
    "rtrim": (range(1, 3), _build("rtrim", (_TEXT, _TEXT), T.TEXT,
                                  lambda s, chars=" ": s.rstrip(chars))),
}


def _as_text(c: Compiled, scope: Scope) -> Compiled:
    """Any value as text, as ``concat`` and ``||`` take it (its text output)."""
    if c.type is T.UNKNOWN:
        return coerce(c, T.TEXT, scope)
    return c if c.type is T.TEXT else cast(c, T.TEXT)


def _concat(args: list[Compiled], scope: Scope, separated: bool) -> Compiled:
    name = "concat_ws" if separated else "concat"
    parts = [_as_text(a, scope).fn for a in args]

    def run(row: Row, ctx: Ctx) -> Value:
        values = [f(row, ctx) for f in parts]
        if separated:
            sep = values.pop(0)
            if sep is None:
                return None
            return str(sep).join(str(v) for v in values if v is not None)
        return "".join(str(v) for v in values if v is not None)

    return Compiled(run, T.TEXT, name, const=all(a.const for a in args))


def string_function(name: str, args: list[Compiled], scope: Scope) -> Compiled | None:
    """The evaluator of string function ``name``, or None when it is not one."""
    if name in ("concat", "concat_ws") and args:
        return _concat(args, scope, name == "concat_ws")
    entry = STRING_FUNCTIONS.get(name)
    if entry is None:
        return None
    arity, build = entry
    if len(args) not in arity:
        raise _no_function(name, args)
    return build(args, scope)


#: sqlglot's nodes for these functions → the name PostgreSQL shows (FigureColname)
STRING_NODES: Final[dict[type[exp.Expr], str]] = {
    exp.Substring: "substring", exp.Left: "left", exp.Right: "right",
    exp.StrPosition: "position", exp.Replace: "replace", exp.Trim: "btrim",
    exp.Concat: "concat", exp.ConcatWs: "concat_ws", exp.SplitPart: "split_part",
    exp.StartsWith: "starts_with", exp.Reverse: "reverse",
}
_TRIM: Final = {"LEADING": "ltrim", "TRAILING": "rtrim", "BOTH": "btrim"}


def compile_string(node: exp.Expr, scope: Scope) -> Compiled | None:
    """The evaluator of a string-function node sqlglot built, or None."""
    name = STRING_NODES.get(type(node))
    if name is None:
        return None
    if isinstance(node, exp.Concat | exp.ConcatWs):
        operands = list(node.expressions)
    elif isinstance(node, exp.Substring):
        operands = [node.this, node.args["start"]]
        if node.args.get("length") is not None:
            operands.append(node.args["length"])
    elif isinstance(node, exp.StrPosition):
        if node.args.get("position") is not None or node.args.get("occurrence") is not None:
            raise FeatureNotSupported("strpos() takes two arguments")
        name = "strpos"  # position(x IN s) is strpos(s, x), named "position"
        operands = [node.this, node.args["substr"]]
    elif isinstance(node, exp.Trim):
        name = _TRIM.get(str(node.args.get("position") or "BOTH").upper(), "btrim")
        operands = [node.this] + ([node.expression] if node.expression is not None else [])
    elif isinstance(node, exp.Replace):
        operands = [node.this, node.expression, node.args["replacement"]]
    elif isinstance(node, exp.SplitPart):
        operands = [node.this, node.args["delimiter"], node.args["part_index"]]
    else:
        operands = [node.this] + ([node.expression] if node.expression is not None else [])
    args = [compile_expr(a, scope) for a in operands]
    start = node.args.get("start")
    if isinstance(node, exp.Substring) and (args[1].type is T.TEXT or (
            isinstance(start, exp.Literal) and start.is_string)):
        raise FeatureNotSupported(
            "substring(text FROM pattern) is not supported (a regular expression); use "
            "substring(text FROM start FOR count), position() or split_part()")
    compiled = string_function(name, args, scope)
    assert compiled is not None
    return compiled
