"""``--max-sql-rows``: a system table above it is refused before its rows are built, and
the refusal names what works instead (issue 23 item 7)."""

from __future__ import annotations

import pytest

from cubequeue.grammar.commands import QueueAdd, QueueList
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.server.executor import Executor
from cubequeue.server.sql import PlainSession
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.prefixes import PrefixState
from cubequeue.storage.store import MemoryStore

PREFIXES = 10


def _session() -> PlainSession:
    return PlainSession(server_version="14.0", user="cube")


@pytest.fixture
def store() -> MemoryStore:
    """Ten prefixes, a work budget of four rows: system.queue_prefixes is a stream."""
    store = MemoryStore(FakeClock(1_700_000_000_000), Limits(work_budget=4))
    for i in range(PREFIXES):
        store.execute(QueueAdd(path=f"p{i:02}:k", payload="{}"), None)
    return store


@pytest.fixture
def rows_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prefixes whose system.queue_prefixes row was built."""
    built: list[str] = []
    summary_row = PrefixState.summary_row

    def counting(self: PrefixState, now: int) -> object:
        built.append(self.prefix)
        return summary_row(self, now)

    monkeypatch.setattr(PrefixState, "summary_row", counting)
    return built


@pytest.mark.parametrize("sql", [
    "SELECT * FROM system.queue_prefixes",
    "SELECT count(*) FROM system.queue_prefixes",
    "SELECT prefix FROM system.queue_prefixes WHERE prefix = 'p01' LIMIT 1",
])
def test_queue_prefixes_above_the_limit_is_refused_before_a_row_is_built(
        store: MemoryStore, rows_built: list[str], sql: str) -> None:
    assert isinstance(store.system_table("queue_prefixes"), RowStream)
    rows_built.clear()
    with pytest.raises(LimitExceeded, match=r"--max-sql-rows=9") as refused:
        Executor(store, max_sql_rows=PREFIXES - 1).plain(sql, _session())
    assert refused.value.sqlstate == "54000"
    assert rows_built == []


def test_the_refusal_suggests_what_works_not_the_table_it_refuses(store: MemoryStore) -> None:
    with pytest.raises(LimitExceeded) as refused:
        Executor(store, max_sql_rows=PREFIXES - 1).plain(
            "SELECT * FROM system.queue_prefixes", _session())
    hint = refused.value.hint or ""
    assert "system.queue_prefixes" not in hint
    assert "QUEUE LIST / PENDING / ACTIVE '<prefix>'" in hint
    assert "--max-sql-rows" in hint
    # what the hint suggests answers at any size
    listed = store.execute(QueueList(prefix="p01"), None)
    assert not isinstance(listed, RowStream) and len(listed.rows) == 1


def test_system_queue_refusal_points_at_the_per_prefix_counts(store: MemoryStore) -> None:
    with pytest.raises(LimitExceeded) as refused:
        Executor(store, max_sql_rows=PREFIXES - 1).plain("SELECT * FROM system.queue", _session())
    assert "system.queue_prefixes counts" in (refused.value.hint or "")


def test_at_the_limit_the_streamed_table_reads_whole_and_in_order(
        store: MemoryStore, rows_built: list[str]) -> None:
    answer = Executor(store, max_sql_rows=PREFIXES).plain(
        "SELECT prefix, pending FROM system.queue_prefixes", _session())
    assert answer.result is not None
    assert answer.result.rows == [(f"p{i:02}", 1) for i in range(PREFIXES)]
    assert len(rows_built) == PREFIXES
