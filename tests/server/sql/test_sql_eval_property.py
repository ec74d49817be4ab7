"""Property: WHERE / ORDER BY / LIMIT / OFFSET over random system.queue rows give what a
plain-Python reference filter and sort gives (SQL NULL logic, PostgreSQL's default
NULLS LAST for ASC and NULLS FIRST for DESC)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.server.sql.systables import SCHEMAS
from cubequeue.storage.clock import FakeClock

T0 = 1_767_225_600_000
_KIND = {"text": ColumnType.STRING, "bigint": ColumnType.INT, "boolean": ColumnType.BOOLEAN,
         "timestamp with time zone": ColumnType.TIMESTAMP}
COLUMNS = tuple(Column(n, _KIND[t.pg_name]) for n, t in SCHEMAS["queue"])
INDEX = {c.name: i for i, c in enumerate(COLUMNS)}


class RowsStore:
    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows
        self.clock = FakeClock(T0)

    def system_table(self, name: str) -> ResultSet:
        assert name == "queue"
        return ResultSet(COLUMNS, list(self.rows))  # type: ignore[arg-type]


maybe = lambda s: st.none() | s  # noqa: E731
rows_st = st.lists(st.tuples(
    st.sampled_from(["a", "b", "c", "d"]),            # id
    st.integers(1, 6),                                # queue_id
    st.sampled_from(["p", "q"]),                      # prefix
    st.integers(T0, T0 + 5),                          # created
    st.sampled_from(["pending", "active"]),           # status
    st.integers(-2, 2),                               # priority
    maybe(st.integers(T0, T0 + 3)),                   # heartbeat
    maybe(st.integers(T0, T0 + 3)),                   # orphaned
    st.sampled_from(["x", "y"]),                      # value
    maybe(st.sampled_from(["e1", "e2"])),             # extra
    maybe(st.sampled_from(["w1"])),                   # process_id
    st.booleans(),                                    # exclusive
    maybe(st.sampled_from(["ext"])),                  # external_id
), max_size=12)


@dataclass(frozen=True)
class Pred:
    sql: str
    # three-valued: True / False / None
    fn: object


def _cmp(col: str, op: str, value: int) -> Pred:
    ops = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
    i = INDEX[col]
    return Pred(f"{col} {op} {value}", lambda r: None if r[i] is None else ops[op](r[i], value))


def _ts_cmp(col: str, op: str, k: int) -> Pred:
    """A timestamptz column against an ISO literal (heartbeat / orphaned may be NULL)."""
    p = _cmp(col, op, T0 + k)
    return Pred(f"{col} {op} '2026-01-01 00:00:00.00{k}+00'", p.fn)


def _null(col: str, negate: bool) -> Pred:
    i = INDEX[col]
    return Pred(f"{col} IS {'NOT ' if negate else ''}NULL", lambda r: (r[i] is None) != negate)


def _in(col: str, values: list[str]) -> Pred:
    i = INDEX[col]
    quoted = ", ".join(f"'{v}'" for v in values)
    return Pred(f"{col} IN ({quoted})", lambda r: None if r[i] is None else r[i] in values)


atoms = st.one_of(
    st.builds(_cmp, st.sampled_from(["priority", "queue_id"]), st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), st.integers(-2, 6)),
    st.builds(_ts_cmp, st.sampled_from(["heartbeat", "orphaned", "created"]), st.sampled_from(["=", "<>", "<", ">="]), st.integers(0, 4)),
    st.builds(_null, st.sampled_from(["heartbeat", "extra", "orphaned"]), st.booleans()),
    st.builds(_in, st.sampled_from(["id", "extra"]), st.lists(st.sampled_from(["a", "b", "e1"]), min_size=1, max_size=2)),
)


def _and(a: Pred, b: Pred) -> Pred:
    def f(r):
        x, y = a.fn(r), b.fn(r)  # type: ignore[operator]
        return False if x is False or y is False else None if x is None or y is None else True
    return Pred(f"({a.sql} AND {b.sql})", f)


def _or(a: Pred, b: Pred) -> Pred:
    def f(r):
        x, y = a.fn(r), b.fn(r)  # type: ignore[operator]
        return True if x is True or y is True else None if x is None or y is None else False
    return Pred(f"({a.sql} OR {b.sql})", f)


def _not(a: Pred) -> Pred:
    return Pred(f"NOT ({a.sql})", lambda r: None if (v := a.fn(r)) is None else not v)  # type: ignore[operator]


preds = st.recursive(atoms, lambda inner: st.one_of(
    st.builds(_and, inner, inner), st.builds(_or, inner, inner), st.builds(_not, inner)), max_leaves=6)
order_st = st.lists(st.tuples(st.sampled_from(["id", "priority", "heartbeat", "created", "extra", "queue_id"]),
                              st.booleans(), st.sampled_from([None, True, False])), max_size=3)


def _reference(rows, pred, order, limit, offset):
    out = [r for r in rows if pred is None or pred.fn(r) is True]
    for col, desc, nulls_first in reversed(order):
        i = INDEX[col]
        first = desc if nulls_first is None else nulls_first
        nulls = [r for r in out if r[i] is None]
        vals = sorted((r for r in out if r[i] is not None), key=lambda r: r[i], reverse=desc)
        out = nulls + vals if first else vals + nulls
    out = out[offset:]
    return out if limit is None else out[:limit]


@settings(deadline=None, max_examples=300)
@given(rows_st, maybe(preds), order_st, maybe(st.integers(0, 5)), st.integers(0, 3))
def test_where_order_limit_match_reference(rows, pred, order, limit, offset) -> None:
    sql = "SELECT * FROM system.queue"
    if pred is not None:
        sql += f" WHERE {pred.sql}"
    if order:
        parts = []
        for col, desc, nulls_first in order:
            nulls = "" if nulls_first is None else (" NULLS FIRST" if nulls_first else " NULLS LAST")
            parts.append(f"{col}{' DESC' if desc else ''}{nulls}")
        sql += " ORDER BY " + ", ".join(parts)
    if limit is not None:
        sql += f" LIMIT {limit}"
    sql += f" OFFSET {offset}"
    session = PlainSession(server_version="15.18", user="u")
    out = run_plain(sql, session, RowsStore(rows))
    assert out.result is not None
    assert out.result.rows == _reference(rows, pred, order, limit, offset), sql


@settings(deadline=None, max_examples=100)
@given(rows_st)
def test_group_counts_match_reference(rows) -> None:
    session = PlainSession(server_version="15.18", user="u")
    out = run_plain("SELECT prefix, status, count(*), count(heartbeat), sum(priority) FROM system.queue "
                    "GROUP BY prefix, status ORDER BY 1, 2", session, RowsStore(rows))
    expected: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        e = expected.setdefault((r[2], r[4]), [0, 0, 0])
        e[0] += 1
        e[1] += r[6] is not None
        e[2] += r[5]
    assert out.result is not None
    assert out.result.rows == [(p, s, *v) for (p, s), v in sorted(expected.items())]
