"""PostgresStore against the in-memory MemoryStore, step by step (hypothesis state machine).

Both stores get the same random QUEUE and CACHE statements over a few prefixes, keys,
priorities, concurrencies, process ids and external ids, with clock advances in between;
every answer (the frame, or the error's class, SQLSTATE and message) must be identical,
and so must the live system tables. The departure log is left out: expired items are
logged by the memory store at its next step and by the PostgreSQL store's housekeeping
leader, which these tests do not run. SYS CACHESTORE WIPE is one of the rules, and the
PostgreSQL store's per-prefix counters (cq_prefix.pending/active) must equal its rows.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pgstore_backend import Backend

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CacheSet,
    Command,
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueuePurge,
    QueueResult,
    QueueRetrieve,
    QueueToCancel,
    SysCachestore,
)
from cubequeue.storage.limits import Limits

PREFIXES = ["a", "b", ""]
paths = st.builds(lambda p, k: f"{p}:{k}" if p else k, st.sampled_from(PREFIXES),
                  st.sampled_from(["k1", "k2", "k3"]))  # fmt: skip
keys = st.one_of(paths, st.integers(1, 12))
pids = st.sampled_from([None, "p1", "p2"])
exts = st.sampled_from([None, "e1"])
jsons = st.sampled_from(['{"a":1}', '{"b": [1, 2]}', "null", "bad", '{"a":null}'])
results = st.sampled_from([None, "r1", "r2"])
statuses = st.sampled_from([None, "pending", "active"])
LIMITS = Limits(max_items=6, results_expire_ms=5_000, clock_control=True)

#: prefixes whose counters differ from their rows in cq_item (expired rows included)
COUNTER_DRIFT = """
select x.prefix, x.items, x.pending, x.active, count(i.id), count(i.id) filter (where i.status = 0)
from cq_prefix x left join cq_item i on i.prefix = x.prefix
group by x.prefix, x.items, x.pending, x.active
having x.pending <> count(i.id) filter (where i.status = 0)
    or x.active <> count(i.id) filter (where i.status = 1) or x.items <> count(i.id)
"""

_dsn: dict[str, str] = {}


class StoresAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = Backend("memory", LIMITS, None)
        self.pg = Backend("postgresql", LIMITS, _dsn["dsn"])

    def teardown(self) -> None:
        self.memory.close()
        self.pg.close()

    def check(self, cmd: Command, pid: str | None = None) -> None:
        want = self.memory.outcome(cmd, pid)
        got = self.pg.outcome(cmd, pid)
        assert got == want, f"{cmd} (pid {pid}): postgresql {got} != memory {want}"

    @rule(path=paths, priority=st.integers(-1, 1), pid=pids, exclusive=st.booleans(), ext=exts,
          orphaned=st.sampled_from([None, 1, 20_000]))
    def add(self, path, priority, pid, exclusive, ext, orphaned) -> None:
        self.check(QueueAdd(path=path, payload=f"pl-{path}", priority=priority,
                            exclusive=exclusive, external_id=ext, orphaned=orphaned), pid)

    @rule(path=paths, conc=st.integers(0, 3), pid=pids, ext=exts)
    def add_and_retrieve(self, path, conc, pid, ext) -> None:
        self.check(QueueAddAndRetrieve(path=path, payload="x", concurrency=conc,
                                       external_id=ext), pid)

    @rule(path=paths, conc=st.integers(0, 3), pid=pids, extended=st.booleans())
    def retrieve(self, path, conc, pid, extended) -> None:
        self.check(QueueRetrieve(path=path, concurrency=conc, extended=extended), pid)

    @rule(key=keys, result=results)
    def ack(self, key, result) -> None:
        self.check(QueueAck(key=key, result=result))

    @rule(key=keys)
    def cancel(self, key) -> None:
        self.check(QueueCancel(key=key))

    @rule(key=keys)
    def heartbeat(self, key) -> None:
        self.check(QueueHeartbeat(key=key))

    @rule(key=keys, json=jsons)
    def merge_extra(self, key, json) -> None:
        self.check(QueueMergeExtra(key=key, json=json))

    @rule(key=keys, ext=exts)
    def result(self, key, ext) -> None:
        self.check(QueueResult(key=key, external_id=ext))

    @rule(prefix=st.sampled_from(PREFIXES), status=statuses, pid=pids, payload=st.booleans())
    def list(self, prefix, status, pid, payload) -> None:
        self.check(QueueList(prefix=prefix, status=status, with_payload=payload), pid)

    @rule(prefix=st.sampled_from(PREFIXES), hb=st.sampled_from([None, 0, 1_000]),
          orph=st.sampled_from([None, 0, 1_000]))
    def to_cancel(self, prefix, hb, orph) -> None:
        self.check(QueueToCancel(prefix=prefix, heartbeat_timeout=hb, orphaned_timeout=orph))

    @rule(prefix=st.sampled_from(PREFIXES), status=statuses)
    def purge(self, prefix, status) -> None:
        self.check(QueuePurge(prefix=prefix, status=status))

    @rule()
    def wipe(self) -> None:
        self.check(SysCachestore(action="wipe"))

    @rule(key=paths, value=st.sampled_from(["1", "v", "41"]), ttl=st.sampled_from([None, 0, 2]),
          nx=st.booleans())
    def cache_set(self, key, value, ttl, nx) -> None:
        self.check(CacheSet(key=key, value=value, ttl=ttl, nx=nx))

    @rule(key=paths)
    def cache_get_incr(self, key) -> None:
        self.check(CacheGet(key=key))
        self.check(CacheIncr(key=key))

    @rule(prefix=st.sampled_from(PREFIXES))
    def cache_keys(self, prefix) -> None:
        self.check(CacheKeys(pattern=prefix))

    @rule(ms=st.sampled_from([1, 999, 1_000, 1_001, 5_000, 20_000_000]))
    def advance(self, ms) -> None:
        self.memory.advance(ms)
        self.pg.advance(ms)

    @precondition(lambda self: True)
    @invariant()
    def tables_agree(self) -> None:
        for name in ("queue", "queue_results", "queue_prefixes", "cache"):
            assert self.pg.table(name) == self.memory.table(name), name

    @invariant()
    def counters_match_rows(self) -> None:
        assert self.pg.query(COUNTER_DRIFT) == []


@pytest.fixture
def model_dsn(pg_dsn: str) -> str:
    _dsn["dsn"] = pg_dsn
    return pg_dsn


def test_postgres_store_matches_memory_store(model_dsn: str) -> None:
    StoresAgree.TestCase.settings = settings(
        max_examples=25, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    StoresAgree.TestCase("runTest").runTest()
