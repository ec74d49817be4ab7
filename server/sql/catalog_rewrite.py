"""PostgreSQL catalog SQL → SQL that SQLite runs, and the PostgreSQL types of its result.

sqlglot transpiles most of what psql sends (joins, subqueries, CASE, UNION, LIKE,
``string_agg``); what it leaves as PostgreSQL-only is rewritten on the tree first, into
calls of the functions :mod:`.catalog_functions` registers:

* ``pg_catalog.f(…)`` → ``f(…)`` (SQLite has no function schemas; the tables keep theirs,
  as attached databases named ``pg_catalog`` and ``information_schema``);
* ``~``, ``!~``, ``~*``, ``OPERATOR(pg_catalog.~)`` → ``pg_regex``; ``COLLATE …`` dropped
  (the catalogs compare in the C collation, which is SQLite's BINARY);
* ``x::regclass`` / ``regtype`` / ``regnamespace`` → the name (or, from text, the OID);
  other casts to the SQL type SQLite stores them as;
* arrays, kept as their text form: ``x = ANY(arr)``, ``arr[i]``, ``ARRAY(SELECT …)``,
  ``unnest(arr)`` and ``generate_series`` in FROM (through ``json_each``);
* ``ILIKE`` → ``pg_ilike``; ``LIKE`` itself is PostgreSQL's through the ``like`` function
  the engine overrides (case-sensitive, ``\\`` escapes).

The result types come from the tree before rewriting: a catalog column has its
catalog's type, a comparison is boolean, a cast its target, a function its declared
result; anything else is text, which is what psql reads every value as.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sqlglot import exp

from cubequeue.grammar.errors import FeatureNotSupported

from .catalog_tables import COLUMN_TYPES
from .outcome import HINT

__all__ = ["output_columns", "rewrite"]

_REG_FUNCS: Final = {"regclass": "pg_regclass", "regtype": "pg_regtype",
                     "regnamespace": "pg_regnamespace"}
_TEXT_TYPES: Final = frozenset({"text", "name", "varchar", "char", "bpchar", "regproc",
                                "character varying", "character", "unknown"})
_INT_TYPES: Final = frozenset({"oid", "int", "int2", "int4", "int8", "integer", "bigint",
                               "smallint", "xid", "cid", "tinyint"})
_BOOL_TYPES: Final = frozenset({"bool", "boolean"})
#: declared result types of the functions psql calls (anything else: text)
_FUNCTION_TYPES: Final = {
    "pg_table_is_visible": "bool", "pg_type_is_visible": "bool",
    "pg_function_is_visible": "bool", "has_table_privilege": "bool",
    "has_schema_privilege": "bool", "pg_has_role": "bool", "pg_relation_is_publishable": "bool",
    "pg_table_size": "int8", "pg_relation_size": "int8", "pg_total_relation_size": "int8",
    "count": "int8", "array_upper": "int4", "pg_backend_pid": "int4",
}
_BOOL_NODES: Final = (exp.Predicate, exp.Not, exp.And, exp.Or, exp.Exists, exp.Boolean)


def _unsupported(what: str) -> FeatureNotSupported:
    return FeatureNotSupported(f"cubequeue's catalog does not support {what}", hint=HINT)


def _type_name(to: exp.Expr) -> str:
    """The lower-case name of a cast's target type (``pg_catalog.regclass`` → regclass)."""
    if isinstance(to, exp.DataType):
        if to.this == exp.DType.ARRAY:
            return "array"
        kind = to.args.get("kind")
        if kind is not None:
            return (kind.name if isinstance(kind, exp.Dot) else kind.sql()).lower()
        return to.sql(dialect="postgres").lower()
    return to.name.lower() if to.name else to.sql(dialect="postgres").lower()


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _cast(node: exp.Cast) -> exp.Expr:
    target = _type_name(node.to)
    inner: exp.Expr = node.this
    if target in _REG_FUNCS:
        return _call(_REG_FUNCS[target], inner)
    if target in _TEXT_TYPES:
        return exp.Cast(this=inner, to=exp.DataType.build("text"))
    if target in _INT_TYPES:
        return exp.Cast(this=inner, to=exp.DataType.build("int"))
    return inner  # bool, arrays and the rest: SQLite keeps the value as it is


def _regex(value: exp.Expr, pattern: exp.Expr, insensitive: bool, negate: bool) -> exp.Expr:
    call = _call("pg_regex", value, pattern, exp.Literal.number(int(insensitive)))
    return exp.Not(this=call) if negate else call


_OPERATORS: Final = {"~": (False, False), "!~": (False, True), "~*": (True, False),
                     "!~*": (True, True)}
_BINARY: Final = {"=": exp.EQ, "<>": exp.NEQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE,
                  ">": exp.GT, ">=": exp.GTE}


def _operator(node: exp.Operator) -> exp.Expr:
    op = str(node.args.get("operator", "")).removeprefix("pg_catalog.").strip()
    if op in _OPERATORS:
        insensitive, negate = _OPERATORS[op]
        return _regex(node.this, node.expression, insensitive, negate)
    if op in _BINARY:
        return _BINARY[op](this=node.this, expression=node.expression)
    raise _unsupported(f"the operator {op}")


def _array(node: exp.Array) -> exp.Expr:
    items = node.expressions
    if len(items) == 1 and isinstance(items[0], exp.Select | exp.Subquery):
        select = items[0] if isinstance(items[0], exp.Select) else items[0].this
        assert isinstance(select, exp.Select)
        if len(select.expressions) != 1:
            raise _unsupported("ARRAY(SELECT …) of more than one column")
        first = select.expressions[0]
        select.expressions[0] = exp.alias_(first.this if isinstance(first, exp.Alias) else first,
                                           "_element")
        agg = exp.Coalesce(this=_call("pg_array_agg", exp.column("_element", "_a")),
                           expressions=[exp.Literal.string("{}")])
        return exp.Subquery(this=exp.select(agg)
                            .from_(exp.Subquery(this=select, alias=exp.TableAlias(
                                this=exp.to_identifier("_a")))))
    if all(isinstance(i, (exp.Literal, exp.Null)) for i in items):
        from .catalog_functions import format_array

        return exp.Literal.string(format_array([None if isinstance(i, exp.Null) else i.name
                                                for i in items]))
    raise _unsupported("ARRAY[…] of expressions")


def _any(node: exp.EQ | exp.NEQ) -> exp.Expr | None:
    """``x = ANY(arr)`` / ``x <> ALL(arr)``; an ANY over a subquery becomes IN."""
    other = node.expression
    inner = other.this if isinstance(other, exp.Any | exp.All) else None
    if inner is None:
        return None
    if isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Select | exp.Subquery):
        query = inner if isinstance(inner, exp.Select) else inner.this
        in_ = exp.In(this=node.this, query=exp.Subquery(this=query))
        return in_ if isinstance(node, exp.EQ) else exp.Not(this=in_)
    call = _call("pg_any_eq", node.this, inner)
    return call if isinstance(node, exp.EQ) and isinstance(other, exp.Any) else exp.Not(this=call)


def _table_function(table: exp.Table) -> tuple[exp.Expr, str] | None:
    """``unnest(arr) x`` / ``generate_series(a, b) s`` in FROM → ``json_each(…) AS x``."""
    fn = table.this
    if isinstance(fn, exp.Explode | exp.Unnest):
        arg = fn.this if isinstance(fn, exp.Explode) else fn.expressions[0]
        source = _call("pg_array_json", arg)
    elif isinstance(fn, exp.GenerateSeries):
        source = _call("pg_series_json", fn.args["start"], fn.args["end"])
    elif isinstance(fn, exp.Anonymous) and str(fn.this).lower() == "generate_series":
        source = _call("pg_series_json", *fn.expressions[:2])
    else:
        return None
    alias = table.alias_or_name or "_series"
    return exp.Table(this=_call("json_each", source),
                     alias=exp.TableAlias(this=exp.to_identifier(alias))), alias


def _post_order(node: exp.Expr, visit: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``visit`` every node children first, so a rewrite sees rewritten operands (sqlglot's
    ``transform`` does not descend into the nodes it returns)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _post_order(value, visit))
        elif isinstance(value, list):
            node.set(key, [_post_order(v, visit) if isinstance(v, exp.Expr) else v
                           for v in value])
    return visit(node)


def rewrite(tree: exp.Expr) -> exp.Expr:
    """The statement with every PostgreSQL-only construct replaced (module docstring)."""
    series_aliases: set[str] = set()

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func) \
                and node.this.name.lower() == "pg_catalog":
            return node.expression
        if isinstance(node, exp.Collate):
            collated: exp.Expr = node.this
            return collated
        if isinstance(node, exp.Operator):
            return _operator(node)
        if isinstance(node, exp.RegexpLike | exp.RegexpILike):
            return _regex(node.this, node.expression, isinstance(node, exp.RegexpILike), False)
        if isinstance(node, exp.ILike):
            return _call("pg_ilike", node.this, node.expression)
        if isinstance(node, exp.Cast):
            return _cast(node)
        if isinstance(node, exp.EQ | exp.NEQ):
            replaced = _any(node)
            if replaced is not None:
                return replaced
        if isinstance(node, exp.Array):
            return _array(node)
        if isinstance(node, exp.Bracket):
            return _call("pg_array_get", node.this, *node.expressions[:1])
        if isinstance(node, exp.Table):
            found = _table_function(node)
            if found is not None:
                series_aliases.add(found[1])
                return found[0]
        if isinstance(node, exp.CurrentUser):
            return _call("current_user")
        if isinstance(node, exp.CurrentSchema):
            return _call("current_schema")
        if isinstance(node, exp.CurrentVersion):
            return _call("version")
        if isinstance(node, exp.Parameter | exp.Placeholder):
            return exp.Var(this=f"?{node.name}")
        return node

    out = _post_order(tree, visit)
    if series_aliases:
        def values(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and not node.table and node.name in series_aliases:
                return exp.column("value", node.name)
            return node

        out = out.transform(values)
    return out


def _expr_type(node: exp.Expr) -> str:
    """The PostgreSQL type of one result expression (module docstring)."""
    if isinstance(node, exp.Alias | exp.Paren):
        return _expr_type(node.this)
    if isinstance(node, exp.Column):
        return COLUMN_TYPES.get(node.name, "text")
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return _expr_type(node.expression)
    if isinstance(node, exp.Cast):
        target = _type_name(node.to)
        if target in _BOOL_TYPES:
            return "bool"
        if target in _INT_TYPES:
            return "oid" if target == "oid" else "int8"
        return "text"
    if isinstance(node, (_BOOL_NODES, exp.Operator)):
        return "bool"
    if isinstance(node, exp.Literal):
        return "text" if node.is_string else "int4"
    if isinstance(node, exp.Count):
        return "int8"
    if isinstance(node, exp.Case):
        for branch in node.args.get("ifs") or []:
            return _expr_type(branch.args["true"])
        return "text"
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select) \
            and len(node.this.expressions) == 1:
        return _expr_type(node.this.expressions[0])
    if isinstance(node, exp.Anonymous):
        return _FUNCTION_TYPES.get(str(node.this).lower(), "text")
    return "text"


def _output_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return _output_name(node.expression)
    if isinstance(node, exp.Cast):
        inner = _output_name(node.this)
        return inner if inner != "?column?" else _type_name(node.to)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Array):
        return "array"
    if isinstance(node, exp.Func) and not isinstance(node, exp.Predicate):
        return node.sql_name().lower()
    return "?column?"


def output_columns(tree: exp.Expr) -> tuple[tuple[str, str], ...]:
    """(name, PostgreSQL type) of each result column, from the unrewritten tree."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        raise _unsupported(f"{type(tree).__name__} statements")
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in select.expressions):
        return ()  # the engine reads the names from SQLite's cursor
    return tuple((_output_name(e), _expr_type(e)) for e in select.expressions)
