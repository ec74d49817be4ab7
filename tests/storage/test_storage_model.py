"""The store against a naive reference model.

The model is written from ``docs/dialect.md`` alone (§3, §8 rules 1, 2, 8, 9): a list of item
dicts and a list of result dicts, every query a linear scan, expiry a filter on read. A
``RuleBasedStateMachine`` drives both with ADD, ADD_AND_RETRIEVE, RETRIEVE, ACK, CANCEL,
HEARTBEAT, MERGE_EXTRA, RESULT, TO_CANCEL, PENDING and clock advances over a few prefixes,
priorities, concurrencies and process ids, and every answer (rows or error) must match.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cubequeue.grammar.commands import (
    Command,
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueueResult,
    QueueRetrieve,
    QueueToCancel,
)
from cubequeue.grammar.errors import QueueError
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

START = 1_700_000_000_000
RESULTS_EXPIRE_MS = 60_000
HOUR = 3_600_000

PREFIXES = ["a", "b", "a:b", ""]
KEYS = ["k1", "k2", "k3", "k4"]
PIDS = [None, "p1", "p2"]
EXTS = [None, "e1", "e2"]
JSONS = ['{"a":1}', '{"b": 2}', "null", "[1]", "bad", '{"a":null}', "7"]

paths = st.builds(
    lambda p, k: f"{p}:{k}" if p else k, st.sampled_from(PREFIXES), st.sampled_from(KEYS)
)
pids = st.sampled_from(PIDS)
priorities = st.integers(-1, 2)
concurrencies = st.integers(0, 3)


def _prefix(path: str) -> str:
    head, sep, _ = path.rpartition(":")
    return head if sep else ""


def _key(path: str) -> str:
    return path.rpartition(":")[2]


class Model:
    """Cube Store's queue, as ``docs/dialect.md`` describes it, in plain lists."""

    def __init__(self) -> None:
        self.now = START
        self.next_id = 1
        self.items: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    # visibility (§2.7, §8 rule 9)
    def live_items(self) -> list[dict[str, Any]]:
        self.items = [i for i in self.items if i["expire"] > self.now]
        return self.items

    def live_results(self) -> list[dict[str, Any]]:
        self.results = [r for r in self.results if r["expire"] >= self.now]
        return self.results

    def find(self, key: int | str) -> dict[str, Any] | None:
        for item in self.live_items():
            if (item["id"] if isinstance(key, int) else item["path"]) == key:
                return item
        return None

    def in_prefix(self, prefix: str) -> list[dict[str, Any]]:
        return [i for i in self.live_items() if _prefix(i["path"]) == prefix]

    def counts(self, prefix: str) -> tuple[int, list[dict[str, Any]]]:
        items = self.in_prefix(prefix)
        pending = sum(1 for i in items if i["status"] == "pending")
        active = sorted((i for i in items if i["status"] == "active"), key=lambda i: i["id"])
        return pending, active

    # commands
    def add(self, path: str, payload: str, priority: int, orphaned: int | None,
            ext: str | None, exclusive: bool, pid: str | None) -> tuple[dict[str, Any], bool]:
        if exclusive and pid is None:
            raise ModelError("InvalidParameterValue")
        existing = self.find(path)
        if existing is not None:
            return existing, False
        item = {
            "id": self.next_id, "path": path, "payload": payload, "priority": priority,
            "created": self.now, "status": "pending", "heartbeat": None, "extra": None,
            "orphaned": None if orphaned is None else self.now + orphaned * 1000,
            "expire": self.now + (4 * HOUR if orphaned is None else orphaned * 1000 + 2 * HOUR),
            "pid": pid, "exclusive": exclusive, "ext": ext,
        }
        self.next_id += 1
        self.items.append(item)
        return item, True

    def claim(self, item: dict[str, Any]) -> None:
        item["status"] = "active"
        item["heartbeat"] = self.now

    def retrieve(self, path: str, concurrency: int, pid: str | None) -> list[Any]:
        pending, active = self.counts(_prefix(path))
        keys = [_key(i["path"]) for i in active]
        fail = [None, None, pending, ",".join(keys) or None, None]
        if len(active) >= concurrency:
            return fail
        item = self.find(path)
        if item is None or item["status"] == "active":
            return fail
        if item["exclusive"]:
            if item["pid"] is not None and pid is None:
                raise ModelError("InvalidParameterValue")
            if item["pid"] != pid:
                return fail
        self.claim(item)
        return [item["payload"], item["extra"], pending - 1, ",".join([*keys, _key(path)]),
                str(item["id"])]

    def ack(self, key: int | str, value: str | None) -> bool:
        item = self.find(key)
        if item is None:
            return False
        self.items.remove(item)
        if value is not None:
            if item["ext"] is not None:
                self.results = [
                    r for r in self.live_results()
                    if not (r["path"] == item["path"] and r["ext"] == item["ext"])
                ]
            self.results.append({
                "id": item["id"], "path": item["path"], "value": value, "deleted": False,
                "expire": self.now + RESULTS_EXPIRE_MS, "ext": item["ext"],
            })
        return True

    def result(self, key: int | str, ext: str | None) -> list[Any] | None:
        results = self.live_results()
        if isinstance(key, int):
            for r in results:
                if r["id"] == key:
                    if ext is not None and r["ext"] != ext:
                        raise ModelError("InvalidParameterValue")
                    return [r["value"], "success", str(key), r["ext"]]
            return None
        if ext is not None:
            for r in results:
                if r["path"] == key and r["ext"] == ext:
                    return [r["value"], "success", str(r["id"]), r["ext"]]
        same = [r for r in results if r["path"] == key]
        if not same:
            return None
        latest = max(same, key=lambda r: r["id"])
        if latest["deleted"]:
            return None
        latest["deleted"] = True
        return [latest["value"], "success", str(latest["id"]), latest["ext"]]

    def merge(self, key: int | str, text: str) -> None:
        item = self.find(key)
        if item is None:
            return
        try:
            new = json.loads(text)  # the first write is validated too
        except ValueError:
            raise ModelError("InvalidTextRepresentation") from None
        if item["extra"] is None:
            item["extra"] = text
            return
        old = json.loads(item["extra"])
        if new is None:
            item["extra"] = None
            return
        merged = {**old, **new} if isinstance(old, dict) and isinstance(new, dict) else new
        item["extra"] = json.dumps(merged, sort_keys=True, separators=(",", ":"))

    def to_cancel(self, prefix: str, hb: int | None, orph: int | None) -> list[Any]:
        out = []
        for item in sorted(self.in_prefix(prefix), key=lambda i: i["id"]):
            if item["status"] == "pending" and orph is not None:
                if item["orphaned"] is not None:
                    hit = item["orphaned"] < self.now
                else:
                    hit = self.now - item["created"] > orph
            elif item["status"] == "active" and hb is not None:
                since = item["heartbeat"] if item["heartbeat"] is not None else item["created"]
                hit = self.now - since > hb
            else:
                hit = False
            if hit:
                out.append((_key(item["path"]), str(item["id"])))
        return out

    def pending(self, prefix: str, pid: str | None) -> list[Any]:
        items = [
            i for i in self.in_prefix(prefix)
            if i["status"] == "pending" and (not i["exclusive"] or i["pid"] == pid)
        ]
        items.sort(key=lambda i: (-i["priority"], i["created"], i["id"]))
        return [(_key(i["path"]), str(i["id"]), "pending", i["extra"]) for i in items]


class ModelError(Exception):
    """The model's error: the name of the QueueError subclass the store must raise."""


class StoreVsModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.clock = FakeClock(START)
        self.store = MemoryStore(self.clock, Limits(results_expire_ms=RESULTS_EXPIRE_MS))
        self.model = Model()
        self.claimed: set[int] = set()
        self.max_id = 0
        self.consumed_by_path: set[int] = set()
        #: result id → expire, for results that must stay readable by id
        self.readable: dict[int, int] = {}

    def both(self, cmd: Command, pid: str | None, model_call: Any) -> list[Any] | str:
        """Run ``cmd`` on the store and ``model_call`` on the model; compare; return."""
        try:
            expected: Any = model_call()
        except ModelError as exc:
            expected = str(exc)
        try:
            got: Any = self.store.execute(cmd, pid).rows
        except QueueError as exc:
            got = type(exc).__name__
        assert got == expected, (cmd, pid, got, expected)
        return got  # type: ignore[no-any-return]

    @rule(ms=st.sampled_from([1, 999, 1000, 1001, 30_000, 60_001, HOUR, 2 * HOUR]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.model.now += ms

    @rule(path=paths, priority=priorities, orphaned=st.sampled_from([None, 1, 100]),
          ext=st.sampled_from(EXTS), exclusive=st.booleans(), pid=pids)
    def add(self, path: str, priority: int, orphaned: int | None, ext: str | None,
            exclusive: bool, pid: str | None) -> None:
        m = self.model

        def call() -> list[Any]:
            item, added = m.add(path, "pay", priority, orphaned, ext, exclusive, pid)
            return [(str(item["id"]), added, m.counts(_prefix(path))[0])]

        cmd = QueueAdd(path=path, payload="pay", priority=priority, orphaned=orphaned,
                       external_id=ext, exclusive=exclusive)
        got = self.both(cmd, pid, call)
        if isinstance(got, list) and got[0][1]:
            new_id = int(got[0][0])
            assert new_id > self.max_id
            self.max_id = new_id

    @rule(path=paths, priority=priorities, concurrency=concurrencies, exclusive=st.booleans(),
          pid=pids)
    def add_and_retrieve(self, path: str, priority: int, concurrency: int, exclusive: bool,
                         pid: str | None) -> None:
        m = self.model
        before_pending, before_active = m.counts(_prefix(path))
        already = m.find(path)

        def call() -> list[Any]:
            item, added = m.add(path, "pay", priority, None, None, exclusive, pid)
            pending, active = m.counts(_prefix(path))
            keys = [_key(i["path"]) for i in active]
            own = not item["exclusive"] or item["pid"] == pid
            if item["status"] == "pending" and own and len(active) + pending - 1 < concurrency:
                m.claim(item)
                return [(str(item["id"]), added, pending - 1, ",".join([*keys, _key(path)]),
                         item["payload"], item["extra"])]
            return [(str(item["id"]), added, pending, ",".join(keys) or None, None, None)]

        cmd = QueueAddAndRetrieve(path=path, payload="pay", priority=priority,
                                  concurrency=concurrency, exclusive=exclusive)
        got = self.both(cmd, pid, call)
        if isinstance(got, list) and got[0][4] is not None:
            id_ = int(got[0][0])
            assert id_ not in self.claimed
            self.claimed.add(id_)
            other_pending = before_pending - (1 if already is not None else 0)
            assert len(before_active) + other_pending < concurrency
        if isinstance(got, list) and got[0][1]:
            assert int(got[0][0]) > self.max_id
            self.max_id = int(got[0][0])

    @rule(path=paths, concurrency=concurrencies, pid=pids, extended=st.booleans())
    def retrieve(self, path: str, concurrency: int, pid: str | None, extended: bool) -> None:
        def call() -> list[Any]:
            row = self.model.retrieve(path, concurrency, pid)
            if row[0] is None and not extended:
                return []
            return [tuple(row)]

        cmd = QueueRetrieve(path=path, concurrency=concurrency, extended=extended)
        got = self.both(cmd, pid, call)
        if isinstance(got, list) and got and got[0][4] is not None:
            id_ = int(got[0][4])
            assert id_ not in self.claimed
            self.claimed.add(id_)

    @rule(key=st.one_of(st.integers(1, 40), paths), value=st.sampled_from([None, "r1", "r2"]))
    def ack(self, key: int | str, value: str | None) -> None:
        item = self.model.find(key)
        got = self.both(QueueAck(key=key, result=value), None,
                        lambda: [(self.model.ack(key, value),)])
        if item is not None and value is not None and got == [(True,)]:
            # §8 rule 8: a same path + external_id result was replaced, not kept
            kept = {r["id"] for r in self.model.results}
            self.readable = {i: e for i, e in self.readable.items() if i in kept}
            self.readable[item["id"]] = self.model.now + RESULTS_EXPIRE_MS

    @rule(key=st.one_of(st.integers(1, 40), paths))
    def cancel(self, key: int | str) -> None:
        def call() -> list[Any]:
            item = self.model.find(key)
            if item is None:
                return []
            self.model.items.remove(item)
            return [(item["payload"], item["extra"])]

        self.both(QueueCancel(key=key), None, call)

    @rule(key=st.one_of(st.integers(1, 40), paths))
    def heartbeat(self, key: int | str) -> None:
        def call() -> list[Any]:
            item = self.model.find(key)
            if item is not None:
                item["heartbeat"] = self.model.now
            return []

        self.both(QueueHeartbeat(key=key), None, call)

    @rule(key=st.one_of(st.integers(1, 40), paths), text=st.sampled_from(JSONS))
    def merge_extra(self, key: int | str, text: str) -> None:
        def call() -> list[Any]:
            self.model.merge(key, text)
            return []

        self.both(QueueMergeExtra(key=key, json=text), None, call)

    @rule(key=st.one_of(st.integers(1, 40), paths), ext=st.sampled_from(EXTS))
    def result(self, key: int | str, ext: str | None) -> None:
        def call() -> list[Any]:
            row = self.model.result(key, ext)
            return [] if row is None else [tuple(row)]

        got = self.both(QueueResult(key=key, external_id=ext), None, call)
        if isinstance(key, str) and ext is None and isinstance(got, list) and got:
            id_ = int(got[0][2])
            assert id_ not in self.consumed_by_path, "latest result read twice by path"
            self.consumed_by_path.add(id_)

    @rule(prefix=st.sampled_from(PREFIXES), hb=st.sampled_from([None, 0, 1000, 60_000]),
          orph=st.sampled_from([None, 0, 1000, 60_000]))
    def to_cancel(self, prefix: str, hb: int | None, orph: int | None) -> None:
        cmd = QueueToCancel(prefix=prefix, heartbeat_timeout=hb, orphaned_timeout=orph)
        self.both(cmd, None, lambda: self.model.to_cancel(prefix, hb, orph))

    @rule(prefix=st.sampled_from(PREFIXES), pid=pids)
    def pending(self, prefix: str, pid: str | None) -> None:
        self.both(QueueList(prefix=prefix, status="pending"), pid,
                  lambda: self.model.pending(prefix, pid))

    @invariant()
    def pending_is_sorted(self) -> None:
        if not hasattr(self, "store"):
            return
        ranks = {
            row[1]: (-int(row[5]), row[3], row[1])  # type: ignore[arg-type]
            for row in self.store.system_table("queue").rows
        }
        for prefix in PREFIXES:
            listed = self.store.execute(QueueList(prefix=prefix, status="pending"), "p1").rows
            order = [ranks[int(row[1])] for row in listed]  # type: ignore[arg-type]
            assert order == sorted(order)

    @invariant()
    def acked_results_readable_by_id_until_expiry(self) -> None:
        if not hasattr(self, "store"):
            return
        now = self.model.now
        self.readable = {i: e for i, e in self.readable.items() if e >= now}
        live = {r[0] for r in self.store.system_table("queue_results").rows}
        for id_ in self.readable:
            assert id_ in live, f"result {id_} vanished before its expiry"

    @invariant()
    def counts_match(self) -> None:
        if not hasattr(self, "store"):
            return
        stats = self.store.stats()
        assert stats.items_total == len(self.model.live_items())
        for pc in stats.prefixes:
            pending, active = self.model.counts(pc.prefix)
            assert (pc.pending, pc.active) == (pending, len(active))


StoreVsModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
test_store_matches_model = StoreVsModel.TestCase
