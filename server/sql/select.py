"""The sqlglot boundary: parse a SELECT, plan it, run it (imported on first SELECT).

sqlglot reads ``'…'`` as standard-conforming while cubequeue's server reports
``standard_conforming_strings = off`` (dialect doc §8 rule 4), so string literals are
decoded by :func:`.lexer.for_sqlglot` before parsing. A statement sqlglot cannot parse is
42601 when it names a system table, and 0A000 otherwise (psql's ``\\d`` catalog queries use
operators sqlglot does not know; what matters to the user is that cubequeue does not
answer them, postgres-wire.md §2.3 "psql").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import tzinfo
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cubequeue.grammar.errors import SyntaxError as SqlSyntaxError
from cubequeue.grammar.results import ResultSet

from .expressions import Ctx
from .lexer import for_sqlglot
from .outcome import HINT
from .session import PlainSession
from .sqltypes import zone
from .statements import PlainStore
from .systables import SelectPlan, plan_select, unsupported

__all__ = ["execute", "plan_for"]

_MENTIONS_SYSTEM = re.compile(r"\bsystem\s*\.", re.I)


def plan_for(sql: str) -> SelectPlan:
    try:
        trees = sqlglot.parse(for_sqlglot(sql), dialect="postgres")
    except (ParseError, TokenError) as e:
        if not _MENTIONS_SYSTEM.search(sql):
            raise unsupported(" ".join(sql.split()[:2])) from None
        info = e.errors[0] if isinstance(e, ParseError) and e.errors else {}
        near = info.get("highlight")
        msg = f'syntax error at or near "{near}"' if near else "syntax error"
        raise SqlSyntaxError(msg, hint=HINT) from None
    nodes = [t for t in trees if isinstance(t, exp.Expr)]
    if len(nodes) != 1:
        raise SqlSyntaxError("cannot insert multiple commands into a prepared statement")
    return plan_select(nodes[0])


@lru_cache(maxsize=64)
def _zone(name: str) -> tzinfo:
    return zone(name)


def execute(plan: SelectPlan, store: PlainStore, session: PlainSession,
            params: Sequence[str | None]) -> ResultSet:
    tz = _zone(session.get("TimeZone") or "UTC")
    ctx = Ctx(params, session, store.clock(), tz)
    return plan.execute(store, ctx)
