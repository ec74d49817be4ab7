"""RETRIEVE's and ADD_AND_RETRIEVE's ``active`` column under heavy churn (``docs/dialect.md`` §3.3
steps 3 and 8, §8 rule 1).

The store keeps each prefix's comma-joined active keys between calls and edits it as items
are claimed and leave; this drives many active items, claimed in any id order and removed
from anywhere (ACK, CANCEL, PURGE, expiry, TRUNCATE), and checks every answer against the
keys joined from scratch. Keys include commas, an empty key and prefixes of each other, so
a text edit in the wrong place shows.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from cubequeue.grammar.commands import (
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueuePurge,
    QueueRetrieve,
    QueueTruncate,
)
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

START = 1_700_000_000_000
HOUR = 3_600_000
PREFIX = "a,b"
KEYS = ["1", "11", "", "x,y", "y", "1,1", "2", "a,b", "3", "z"]
BIG = 1_000

paths = st.sampled_from([f"{PREFIX}:{k}" for k in KEYS])


class ActiveText(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(START)
        self.store = MemoryStore(self.clock, Limits())
        #: path → (id, active?) of the items the store holds
        self.items: dict[str, tuple[int, bool]] = {}
        self.next_id = 1

    def expected(self, claimed: str | None = None) -> str | None:
        active = sorted((id_, p) for p, (id_, on) in self.items.items() if on and p != claimed)
        keys = [p.rpartition(":")[2] for _, p in active]
        if claimed is not None:
            keys.append(claimed.rpartition(":")[2])  # the claim is appended last (§3.3 step 8)
        return ",".join(keys) if keys else None

    def _added(self, path: str) -> None:
        if path not in self.items:
            self.items[path] = (self.next_id, False)
            self.next_id += 1

    @rule(path=paths)
    def add(self, path: str) -> None:
        self.store.execute(QueueAdd(path=path, payload="v"))
        self._added(path)

    @rule(path=paths, extended=st.booleans())
    def retrieve(self, path: str, extended: bool) -> None:
        result = self.store.execute(QueueRetrieve(path=path, concurrency=BIG, extended=extended))
        item = self.items.get(path)
        if item is not None and not item[1]:
            self.items[path] = (item[0], True)
            assert result.rows == [("v", None, self.pending(), self.expected(path), str(item[0]))]
        elif extended:
            assert result.rows == [(None, None, self.pending(), self.expected(), None)]
        else:
            assert result.rows == []

    @rule(path=paths)
    def add_and_retrieve(self, path: str) -> None:
        result = self.store.execute(QueueAddAndRetrieve(path=path, payload="v", concurrency=BIG))
        self._added(path)
        id_, on = self.items[path]
        (row,) = result.rows
        if on:
            assert row[3:] == (self.expected(), None, None)
        else:
            self.items[path] = (id_, True)
            assert row[3:] == (self.expected(path), "v", None)

    @rule(path=paths, cancel=st.booleans())
    def leave(self, path: str, cancel: bool) -> None:
        self.store.execute(QueueCancel(key=path) if cancel else QueueAck(key=path, result=None))
        self.items.pop(path, None)

    @rule(status=st.sampled_from([None, "pending", "active"]))
    def purge(self, status: str | None) -> None:
        self.store.execute(QueuePurge(prefix=PREFIX, status=status))  # type: ignore[arg-type]
        self.items = {
            p: (i, on) for p, (i, on) in self.items.items()
            if status is not None and on != (status == "active")
        }

    @rule()
    def expire_all(self) -> None:
        self.clock.advance(4 * HOUR)
        self.items.clear()

    @rule()
    def truncate(self) -> None:
        self.store.execute(QueueTruncate())
        self.items.clear()

    def pending(self) -> int:
        return sum(1 for _, on in self.items.values() if not on)


ActiveText.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
TestActiveText = ActiveText.TestCase


def test_lowest_and_highest_leave_and_middle_claims():
    """The named cases behind the text edits: a claim below the highest id, then the
    highest and the lowest id leaving, then the middle one."""
    store = MemoryStore(FakeClock(START), Limits())
    for key in ("a", "bb", "c", "dd"):
        store.execute(QueueAdd(path=f"p:{key}", payload="v"))

    def claim(key: str) -> str:
        return store.execute(QueueRetrieve(path=f"p:{key}", concurrency=9)).rows[0][3]

    def active() -> str | None:
        miss = QueueRetrieve(path="p:none", concurrency=9, extended=True)
        return store.execute(miss).rows[0][3]

    assert claim("c") == "c"
    assert claim("bb") == "c,bb"  # appended last, even with a lower id
    assert active() == "bb,c"  # then in id order
    assert claim("dd") == "bb,c,dd"
    assert claim("a") == "bb,c,dd,a"
    assert active() == "a,bb,c,dd"
    store.execute(QueueAck(key="p:dd", result=None))  # highest id
    assert active() == "a,bb,c"
    store.execute(QueueAck(key="p:a", result=None))  # lowest id
    assert active() == "bb,c"
    store.execute(QueueCancel(key="p:bb"))
    assert active() == "c"
    store.execute(QueueCancel(key="p:c"))
    assert active() is None
