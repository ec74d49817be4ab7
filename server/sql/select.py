"""The sqlglot boundary: parse a SELECT, plan it, run it (imported on first SELECT).

``?`` placeholders (what Cube's driver writes) are numbered in order of appearance, as
``$1, $2, …``. A statement that asks a pre-aggregation store for something (``FROM
dev_pre_aggregations.…``, ``information_schema`` about another schema) is refused by
:mod:`.refusals` before planning; Cube Store's own SQL (backquoted names) that sqlglot's
postgres dialect cannot read is classified through its mysql dialect, for that only.
The clock is the store's (``now_ms()`` of the store seam, storage/interface.py).

sqlglot reads ``'…'`` as standard-conforming while cubequeue's server reports
``standard_conforming_strings = off`` (dialect doc §8 rule 4), so string literals are
decoded by :func:`.lexer.for_sqlglot` before parsing. A statement sqlglot cannot parse is
42601 when it names a system table, and 0A000 otherwise (psql's ``\\d`` catalog queries use
operators sqlglot does not know; what matters to the user is that cubequeue does not
answer them, PostgreSQL's protocol docs, "psql").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import tzinfo
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.postgres import PostgresParser

from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.grammar.results import ResultSet

from .expressions import Ctx
from .lexer import for_sqlglot
from .limits import MAX_SQL_STATEMENT_BYTES, bound_statement, check_expression_nodes
from .outcome import HINT
from .plain_store import PlainStore
from .refusals import refuse_select
from .session import PlainSession
from .sqltypes import zone
from .systables import SelectPlan, plan_select, unsupported

__all__ = ["execute", "plan_for"]

_MENTIONS_SYSTEM = re.compile(r"\bsystem\s*\.", re.I)
#: functions sqlglot folds into another's node (substr into substring, date_part into
#: extract, to_char into a strftime format…), kept as called so that a column is named
#: as PostgreSQL names it and to_char sees its own format
_KEPT_AS_CALLED = frozenset({"SUBSTR", "STRPOS", "DATE_PART", "CHAR_LENGTH",
                             "CHARACTER_LENGTH", "TO_CHAR"})


class _Postgres(Postgres):
    """sqlglot's postgres dialect, reading the functions above as plain calls
    (sqlglot's documented way to adjust a dialect: subclass its Parser)."""

    class Parser(PostgresParser):  # Postgres.Parser, by its module's name for mypy
        FUNCTIONS = {k: v for k, v in PostgresParser.FUNCTIONS.items()
                     if k not in _KEPT_AS_CALLED}
        FUNCTION_PARSERS = {k: v for k, v in PostgresParser.FUNCTION_PARSERS.items()
                            if k not in _KEPT_AS_CALLED}


def _refusal_of_foreign(sql: str) -> Exception | None:
    """The pre-aggregation refusal of SQL only Cube Store's dialect reads, if it is one."""
    try:
        trees = sqlglot.parse(sql, dialect="mysql")
    except (ParseError, TokenError):
        return None
    for tree in trees:
        if isinstance(tree, exp.Expr) and (refused := refuse_select(tree, sql)) is not None:
            return refused
    return None


def _number_placeholders(tree: exp.Expr) -> exp.Expr:
    """``?`` → ``$n`` in order of appearance (JDBC / Cube style placeholders)."""
    counter = iter(range(1, 1 << 16))

    def number(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and not node.name.isdigit():
            return exp.Placeholder(this=str(next(counter)))
        return node

    if tree.find(exp.Placeholder) is None:
        return tree
    return tree.transform(number, copy=False)


def plan_for(sql: str, max_bytes: int = MAX_SQL_STATEMENT_BYTES) -> SelectPlan:
    """The plan of one SELECT; 54000 (:mod:`.limits`) before sqlglot reads a statement
    too large or with too many tokens, and after it for too many expression nodes."""
    bound_statement(sql, max_bytes)
    try:
        trees = sqlglot.parse(for_sqlglot(sql), dialect=_Postgres)
    except (ParseError, TokenError) as e:
        foreign = _refusal_of_foreign(sql)
        if foreign is not None:
            raise foreign from None
        if not _MENTIONS_SYSTEM.search(sql):
            raise unsupported(" ".join(sql.split()[:2])) from None
        info = e.errors[0] if isinstance(e, ParseError) and e.errors else {}
        near = info.get("highlight")
        msg = f'syntax error at or near "{near}"' if near else "syntax error"
        raise SqlSyntaxError(msg, hint=HINT) from None
    nodes = [t for t in trees if isinstance(t, exp.Expr)]
    if len(nodes) != 1:
        raise SqlSyntaxError("cannot insert multiple commands into a prepared statement")
    check_expression_nodes(sum(1 for _ in nodes[0].walk()))
    refused = refuse_select(nodes[0], sql)
    if refused is not None:
        raise refused
    return plan_select(_number_placeholders(nodes[0]))


def _now_ms(store: PlainStore) -> int:
    """The store's clock (the executor's plain tables give the store's ``now_ms``)."""
    return store.clock()


@lru_cache(maxsize=64)
def _zone(name: str) -> tzinfo:
    return zone(name)


def execute(plan: SelectPlan, store: PlainStore, session: PlainSession,
            params: Sequence[str | None]) -> ResultSet:
    tz = _zone(session.get("TimeZone") or "UTC")
    ctx = Ctx(params, session, _now_ms(store), tz)
    return plan.execute(store, ctx)
