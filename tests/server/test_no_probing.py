"""Issue 24: nothing in server/ probes a store or a result for what it can do.

Optional capabilities are Protocols of ``storage/capabilities.py``, checked once where
the store is built or attached; a store's other parts are typed (``StoreSlot``'s
``recovery_progress``, ``StoreBackend.kind``); a result is told apart by its type. The
scan below fails on a new ``getattr``/``hasattr`` outside the uses listed with their
reason, and on a comparison of a store's ``kind``.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.sql import PlainSession, run_plain
from cubequeue.storage.capabilities import PoolHealth

SERVER = Path(__file__).resolve().parents[2] / "server"

#: the getattr/hasattr calls left in server/, by file, each for a reason that is not a
#: store or a result
LEGITIMATE = {
    "config.py": "a Config dataclass field read by its name",
    "logs.py": "a LogRecord's extras, which logging sets as attributes",
    "console/process.py": "os.sysconf exists only on POSIX",
    "cubews/inline_frames.py": "websockets' connection: its size limits, the frames it parsed "
                      "before the lane took over, its parser's buffer",
    "cubews/endpoint.py": "websockets sets ServerConnection.username only after Basic auth",
    "pgwire/startup.py": "the session's hooks (the connection) may lack peer and conn_id "
                         "in tests",
    "row_sink.py": "a RowStream's slices are a plain Iterator; the close that releases a "
                   "store's snapshot is found on them until storage/interface.py types it",
}


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in names]


def _store_kind_comparisons(tree: ast.AST) -> list[int]:
    """``store.kind == …`` / ``ctx.store.kind != …``: a store's capability by its name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            if (isinstance(side, ast.Attribute) and side.attr == "kind"
                    and ((isinstance(side.value, ast.Name) and side.value.id == "store")
                         or (isinstance(side.value, ast.Attribute)
                             and side.value.attr == "store"))):
                found.append(node.lineno)
    return found


def test_no_getattr_or_hasattr_probes_outside_the_listed_uses() -> None:
    probes = []
    for path in sorted(SERVER.rglob("*.py")):
        name = path.relative_to(SERVER).as_posix()
        if name in LEGITIMATE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        probes += [f"server/{name}:{line}" for line in _calls(tree, {"getattr", "hasattr"})]
    assert probes == []


def test_the_listed_uses_still_exist() -> None:
    """An entry whose file lost its last probe goes from the list, so it stays true."""
    for name in LEGITIMATE:
        tree = ast.parse((SERVER / name).read_text(encoding="utf-8"))
        assert _calls(tree, {"getattr", "hasattr"}), name


def test_no_store_is_told_apart_by_its_kind() -> None:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(SERVER)}:{line}" for line in _store_kind_comparisons(tree)]
    assert found == []


class _Tables:
    """Plain SQL's store with no limit of its own (it used to be read off the store)."""

    clock = staticmethod(lambda: 0)

    def system_table(self, name: str) -> ResultSet:
        raise AssertionError("not reached")


def test_plain_sql_takes_its_statement_limit_as_an_argument() -> None:
    session = PlainSession(server_version="15", user="cube")
    padding = "x" * 3000
    assert run_plain(f"SELECT 1 /* {padding} */", session, _Tables()).result is not None
    with pytest.raises(QueueError) as caught:  # another text: plans are cached by text
        run_plain(f"SELECT 2 /* {padding} */", session, _Tables(), max_bytes=2000)
    assert caught.value.sqlstate == "54000"


class _PooledStore:
    """A store that reaches its rows through a database pool (ReportsPoolHealth)."""

    kind = "elsewhere"

    def pool_health(self) -> PoolHealth:
        return PoolHealth(open=1, in_use=0, max_size=1, reachable=True)

    def stats(self) -> object:
        raise AssertionError("a pooled store's rows are not counted here")


def test_the_heap_policy_counts_no_rows_of_a_store_behind_a_pool() -> None:
    from cubequeue.server.app import _row_counter

    counter = _row_counter(SimpleNamespace(store=_PooledStore()))  # type: ignore[arg-type]
    assert counter() is None


def test_the_console_reads_the_slots_recovery_progress(tmp_path: Path) -> None:
    from cubequeue.server.app import build_context
    from cubequeue.server.console import build_console
    from cubequeue.server.options import load_config

    config = dataclasses.replace(load_config([], {}), data_dir=str(tmp_path))
    ctx = build_context(config)
    console = build_console(ctx, lambda header: False)
    assert console._recovery is ctx.store.recovery_progress is not None  # type: ignore[attr-defined]
