"""Classify and answer every statement that is not QUEUE/CACHE/SYS.

Dispatch is a table keyed by the first keyword. The hot statements
(``SELECT 1``, ``BEGIN``, ``COMMIT``… — pgbench and psycopg send them constantly) are
recognised first by a dict lookup on their normalised text, without tokenizing; the
session statements are read by :mod:`.lexer`; only SELECT reaches sqlglot, which is
imported on first use (it is slow to import, and the server must accept connections
within a second of starting).

Transactions mirror PostgreSQL 15's ReadyForQuery status and warnings (25001 BEGIN in a
block, 25P01 COMMIT/ROLLBACK outside one, COMMIT of a failed block answers ROLLBACK); the
store itself is not transactional. In a failed block ('E') everything but COMMIT / END /
ROLLBACK / ABORT is 25P02, as PostgreSQL.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.errors import InFailedTransaction, InvalidCursorName, bind_count_error

from .errors import ActiveSqlTransaction, UndefinedParameter
from .lexer import first_word, tokenize
from .limits import MAX_SQL_STATEMENT_BYTES, bound_statement
from .outcome import HINT, OID_INT4, OID_TEXT, OID_VOID, Notice, PlainDescription, PlainOutcome
from .plain_store import PlainStore
from .session import PlainSession
from .setshow import TokenReader, run_reset, run_set, run_show, show_columns

if TYPE_CHECKING:
    from .systables import SelectPlan

__all__ = [
    "HINT",
    "TX_END_WORDS",
    "describe_plain",
    "in_failed_transaction",
    "run_plain",
]

_PLAN_CACHE_SIZE = 256


def _unsupported(sql: str) -> FeatureNotSupported:
    words = sql.strip().split()[:2]
    shown = " ".join([words[0].upper(), *words[1:]]) if words else ""
    return FeatureNotSupported(f"cubequeue does not support this statement: {shown[:60]}", hint=HINT)


def _refuse_preaggregation(sql: str) -> None:
    """0A000 with the setup hint for what a pre-aggregation build sends (CREATE SCHEMA,
    SHOW SCHEMAS…); imported here because :mod:`.refusals` loads sqlglot."""
    from .refusals import refuse_statement

    if (refused := refuse_statement(sql)) is not None:
        raise refused


def _reported_diff(session: PlainSession, before: dict[str, str]) -> dict[str, str]:
    after = session.reported()
    return {k: v for k, v in after.items() if before.get(k) != v}


# -- transaction control -------------------------------------------------------------

_NO_TX = Notice("WARNING", "25P01", "there is no transaction in progress")
_IN_TX = Notice("WARNING", "25001", "there is already a transaction in progress")


def _begin(session: PlainSession) -> PlainOutcome:
    if session.begin():
        return PlainOutcome(None, "BEGIN", tx="begin")
    return PlainOutcome(None, "BEGIN", [_IN_TX], tx="begin")


def _end(session: PlainSession, commit: bool) -> PlainOutcome:
    failed = session.tx_status == "E"
    before = session.reported()
    if not session.end(commit=commit):
        return PlainOutcome(None, "COMMIT" if commit else "ROLLBACK", [_NO_TX],
                            tx="commit" if commit else "rollback")
    rolled_back = failed or not commit
    return PlainOutcome(None, "ROLLBACK" if rolled_back else "COMMIT",
                        tx="rollback" if rolled_back else "commit",
                        parameter_status=_reported_diff(session, before))


def _tx_statement(r: TokenReader, session: PlainSession, word: str) -> PlainOutcome:
    if word in ("begin", "start"):
        if word == "start" and not r.accept("transaction"):
            raise r.error()
        if word == "begin":
            r.accept("work") or r.accept("transaction")
        r.tx_modes()
        return _begin(session)
    r.accept("work") or r.accept("transaction")
    if r.accept("and"):
        raise FeatureNotSupported(f"{word.upper()} AND CHAIN is not supported", hint=HINT)
    if not r.at_end():
        raise _unsupported(r.sql)  # ROLLBACK TO SAVEPOINT, COMMIT PREPARED …
    return _end(session, commit=word in ("commit", "end"))


# -- other session statements --------------------------------------------------------

def _discard(r: TokenReader, session: PlainSession) -> PlainOutcome:
    for what in ("all", "plans", "sequences", "temp", "temporary"):
        if r.accept(what):
            r.end()
            break
    else:
        raise r.error()
    if what != "all":
        return PlainOutcome(None, "DISCARD " + ("TEMP" if what == "temporary" else what.upper()))
    if session.tx_status != "I":
        raise ActiveSqlTransaction("DISCARD ALL cannot run inside a transaction block")
    before = session.reported()
    session.reset_all()
    return PlainOutcome(None, "DISCARD ALL", effect="discard_all",
                        parameter_status=_reported_diff(session, before))


def _deallocate(r: TokenReader) -> PlainOutcome:
    r.accept("prepare")
    if r.accept("all"):
        r.end()
        return PlainOutcome(None, "DEALLOCATE ALL", effect="deallocate_all")
    t = r.peek()
    if t is None or t.kind not in ("word", "ident"):
        raise r.error()
    r.i += 1
    r.end()
    return PlainOutcome(None, "DEALLOCATE", effect=("deallocate", t.value))


def _close(r: TokenReader) -> PlainOutcome:
    if r.accept("all"):
        r.end()
        return PlainOutcome(None, "CLOSE CURSOR ALL", effect="close_all")
    name = r.name()
    r.end()
    raise InvalidCursorName(f'cursor "{name}" does not exist')


def _unlisten(r: TokenReader) -> PlainOutcome:
    if not r.accept("*"):
        r.name()
    r.end()
    return PlainOutcome(None, "UNLISTEN")


def _with_diff(fn: Callable[[TokenReader, PlainSession], PlainOutcome]
               ) -> Callable[[TokenReader, PlainSession], PlainOutcome]:
    def run(r: TokenReader, session: PlainSession) -> PlainOutcome:
        before = session.reported()
        out = fn(r, session)
        diff = _reported_diff(session, before)
        if not diff:
            return out
        return PlainOutcome(out.result, out.tag, out.notices, out.tx, diff, out.effect, out.type_oids)

    return run


_SESSION: dict[str, Callable[[TokenReader, PlainSession], PlainOutcome]] = {
    "set": _with_diff(run_set),
    "reset": _with_diff(run_reset),
    "show": run_show,
    "discard": _discard,
    "deallocate": lambda r, s: _deallocate(r),
    "close": lambda r, s: _close(r),
    "unlisten": lambda r, s: _unlisten(r),
}
_TX_WORDS = frozenset({"begin", "start", "commit", "end", "rollback", "abort"})
#: first words of what a pre-aggregation build sends, and of writes to the system tables
#: (refused by :mod:`.refusals`)
_REFUSED_WORDS = frozenset({"create", "drop", "insert", "alter", "show", "delete", "update",
                            "truncate"})
#: the first words that may run in a failed transaction block (they end it)
TX_END_WORDS = frozenset({"commit", "end", "rollback", "abort"})


# -- SELECT --------------------------------------------------------------------------

_plans: OrderedDict[str, SelectPlan] = OrderedDict()


#: texts longer than this are planned every time, so the plan cache holds at most
#: _PLAN_CACHE_SIZE × this many characters of statement text
_MAX_CACHED_PLAN_TEXT = 64 * 1024


def _plan(sql: str, max_bytes: int) -> SelectPlan:
    plan = _plans.get(sql)
    if plan is not None:
        _plans.move_to_end(sql)
        return plan
    from .select import plan_for

    plan = plan_for(sql, max_bytes)
    if len(sql) <= _MAX_CACHED_PLAN_TEXT:
        _plans[sql] = plan
        if len(_plans) > _PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def _select(sql: str, session: PlainSession, store: PlainStore,
            params: Sequence[str | None], max_bytes: int) -> PlainOutcome:
    from .catalog import is_catalog_query, run_catalog

    if is_catalog_query(sql):
        return run_catalog(sql, session, params)
    plan = _plan(sql, max_bytes)
    need = len(plan.param_oids)
    if need and not params:
        raise UndefinedParameter("there is no parameter $1")
    if params and len(params) != need:
        raise bind_count_error(len(params), need)
    from .select import execute

    rs = execute(plan, store, session, params)
    return PlainOutcome(rs, f"SELECT {len(rs.rows)}", type_oids=plan.type_oids)


# -- fast path -----------------------------------------------------------------------

# Constant answers are built once: nothing downstream changes an outcome or its rows
# (the wires only encode them), and ``constant`` lets a wire keep the encoded reply.
_SELECT_ONE = PlainOutcome(ResultSet((Column("?column?", ColumnType.INT),), [(1,)]),
                           "SELECT 1", type_oids=(OID_INT4,), constant=True)
_UNLOCK_ALL = PlainOutcome(
    ResultSet((Column("pg_advisory_unlock_all", ColumnType.STRING),), [("",)]),
    "SELECT 1", type_oids=(OID_VOID,), constant=True)
_UNLISTEN = PlainOutcome(None, "UNLISTEN", constant=True)

_FAST: dict[str, Callable[[PlainSession], PlainOutcome]] = {
    "select 1": lambda s: _SELECT_ONE,
    "select pg_advisory_unlock_all()": lambda s: _UNLOCK_ALL,
    "close all": lambda s: PlainOutcome(None, "CLOSE CURSOR ALL", effect="close_all"),
    "unlisten *": lambda s: _UNLISTEN,
    "deallocate all": lambda s: PlainOutcome(None, "DEALLOCATE ALL", effect="deallocate_all"),
}
_FAST_TX: dict[str, Callable[[PlainSession], PlainOutcome]] = {
    **{w: _begin for w in ("begin", "begin work", "begin transaction", "start transaction")},
    **{w: (lambda s: _end(s, True)) for w in ("commit", "end", "commit work", "commit transaction", "end work", "end transaction")},
    **{w: (lambda s: _end(s, False)) for w in ("rollback", "abort", "rollback work", "rollback transaction", "abort work", "abort transaction")},
}


@lru_cache(maxsize=1024)
def _normalized(sql: str) -> str:
    return " ".join(sql.split()).rstrip(";").rstrip().lower()


def run_plain(sql: str, session: PlainSession, store: PlainStore,
              params: Sequence[str | None] = (), *,
              max_bytes: int = MAX_SQL_STATEMENT_BYTES) -> PlainOutcome:
    """Answer one plain statement; raises QueueError (nothing changed) on failure.
    ``max_bytes`` is ``--max-sql-statement-bytes``, measured before sqlglot reads a text.

    An error does not move the session to the failed state: the wire calls
    ``session.fail_transaction()`` for every failed statement, queue commands included.
    """
    key = _normalized(sql) if len(sql) < 80 else ""
    tx = _FAST_TX.get(key)
    if tx is not None:
        if session.tx_status == "E" and key.split()[0] not in TX_END_WORDS:
            raise in_failed_transaction()
        return tx(session)
    if session.tx_status == "E":
        word = first_word(sql)
        if word not in TX_END_WORDS:
            raise in_failed_transaction()
    fast = _FAST.get(key)
    if fast is not None:
        return fast(session)
    word = first_word(sql)
    if word in _REFUSED_WORDS:
        bound_statement(sql, max_bytes)
        _refuse_preaggregation(sql)
    if word == "select":
        return _select(sql, session, store, params, max_bytes)
    if word == "":
        return PlainOutcome(None, "")
    handler = _SESSION.get(word)
    if handler is None and word not in _TX_WORDS:
        raise _unsupported(sql)
    r = TokenReader(tokenize(sql), sql)
    r.i = 1
    if handler is None:
        return _tx_statement(r, session, word)
    return handler(r, session)


def in_failed_transaction() -> InFailedTransaction:
    """25P02, in PostgreSQL's words."""
    return InFailedTransaction(
        "current transaction is aborted, commands ignored until end of transaction block"
    )


_SELECT_ONE_DESCRIPTION = PlainDescription(0, (Column("?column?", ColumnType.INT),),
                                           (OID_INT4,), stable=True)
_NO_DATA = PlainDescription(0, None, None, stable=True)


def describe_plain(sql: str, session: PlainSession, store: PlainStore, *,
                   max_bytes: int = MAX_SQL_STATEMENT_BYTES) -> PlainDescription:
    """Parameter count, result columns and type OIDs of ``sql``, without running it
    (``max_bytes`` as :func:`run_plain`'s)."""
    key = _normalized(sql) if len(sql) < 80 else ""
    if key == "select 1":
        return _SELECT_ONE_DESCRIPTION
    if key in _FAST_TX or (key in _FAST and key != "select pg_advisory_unlock_all()"):
        return _NO_DATA
    word = first_word(sql)
    if word == "select":
        from .catalog import describe_catalog, is_catalog_query

        if is_catalog_query(sql):
            return describe_catalog(sql, session)
        plan = _plan(sql, max_bytes)
        return PlainDescription(len(plan.param_oids), plan.columns, plan.type_oids,
                                plan.param_oids, stable=True)
    if word in _REFUSED_WORDS:
        bound_statement(sql, max_bytes)
        _refuse_preaggregation(sql)
    if word == "show":
        r = TokenReader(tokenize(sql), sql)
        r.i = 1
        cols = show_columns(r)
        return PlainDescription(0, cols, (OID_TEXT,) * len(cols), stable=True)
    if word in _SESSION or word in _TX_WORDS or word == "":
        return _NO_DATA
    raise _unsupported(sql)

