"""The queue's state and its primitive transitions (``docs/dialect.md`` §2, §8 rules 2, 9).

:class:`QueueState` owns every queue structure: items by id and by path, the per-prefix
pending/active sets (:mod:`.prefixes`), the acknowledged results (:mod:`.ack_results`),
the RESULT_BLOCKING waiters (:mod:`.waiters`), the expiry heaps (:mod:`.expiry`) and the
departure log (:mod:`.queue_log`). Commands
(:mod:`.queue_commands`) validate first and then call these primitives, which never fail,
so a statement that raises has changed nothing.

Effects that must run *after* a step commits (waiter callbacks, §8 rule 13, and the
``on_departure`` hook) are queued in :attr:`QueueState.post_commit`; the store runs them
once the command returned.

Ids come from one monotonic sequence starting at 1, shared by all prefixes, never reused
and not reset by TRUNCATE (§2.5); a result takes its item's id (§2.3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from cubequeue.storage.ack_results import Result, Results
from cubequeue.storage.expiry import ExpiryHeap
from cubequeue.storage.prefixes import Prefixes, PrefixState
from cubequeue.storage.queue_item import Item, path_prefix
from cubequeue.storage.queue_log import Departure, DepartureLog, Reason
from cubequeue.storage.record_kinds import (
    ITEM_DEL,
    ITEM_PUT,
    ITEM_SET,
    RESULT_DEL,
    RESULT_FLAG,
    RESULT_PUT,
    TRUNCATE,
)
from cubequeue.storage.waiters import Waiters


def item_record(item: Item) -> tuple[object, ...]:
    """An item as its ITEM_PUT state record (what it now is, whole)."""
    return (ITEM_PUT, item.id, item.path, item.payload, item.priority, item.created,
            item.orphaned, item.expire, item.process_id, item.exclusive, item.external_id,
            item.extra, item.heartbeat, item.activated)

__all__ = ["QueueState"]

#: a sweep instant no clock reaches (ms since the epoch, far beyond any i64 expiry)
_NEVER = 1 << 64


class QueueState:
    __slots__ = (
        "_by_id",
        "_by_path",
        "_item_expiry",
        "_next_id",
        "_next_sweep",
        "_on_departure",
        "_result_expiry",
        "journal",
        "log",
        "post_commit",
        "prefixes",
        "results",
        "waiters",
    )

    def __init__(
        self,
        *,
        queue_log_size: int,
        on_departure: Callable[[Departure], None] | None = None,
    ) -> None:
        self._by_id: dict[int, Item] = {}
        self._by_path: dict[str, Item] = {}
        self.prefixes = Prefixes()
        self.results = Results()
        self.waiters = Waiters()
        self.log = DepartureLog(queue_log_size)
        # two heaps: results expire minutes after their ACK, items hours after their ADD,
        # so in one heap every result would sift up past the items (O(log n) cache misses)
        self._item_expiry = ExpiryHeap(self._item_live)
        self._result_expiry = ExpiryHeap(self._result_live)
        #: no heap entry is due before this instant, so :meth:`sweep` returns at once
        #: until then (never later than the true earliest due; earlier only costs a look)
        self._next_sweep = _NEVER
        self._next_id = 1
        self._on_departure = on_departure
        #: post-commit effects of the current step, run by the store
        self.post_commit: list[Callable[[], None]] = []
        #: durable mode: each change appends its state record here (None: in memory only;
        #: expiry is never journaled, it follows from the absolute timestamps)
        self.journal: list[tuple[object, ...]] | None = None

    # -- lookups ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_id)

    def by_id(self, id_: int) -> Item | None:
        return self._by_id.get(id_)

    def live(self, id_: int) -> Item:
        """The item with id ``id_``, which an index says exists (a miss is our bug)."""
        return self._by_id[id_]

    def by_path(self, path: str) -> Item | None:
        return self._by_path.get(path)

    def find(self, key: int | str) -> Item | None:
        """A QKEY lookup: an int is an id, a str a path (§1.3). Expired items were swept
        already, so they are unreachable by id too (§8 rule 9)."""
        if isinstance(key, int):
            return self._by_id.get(key)
        return self._by_path.get(key)

    def items(self) -> Iterator[Item]:
        """Every item in ascending id order (dict order is insertion order = id order)."""
        return iter(self._by_id.values())

    def item_ids(self) -> list[int]:
        """The ids of every item, ascending (a list of ints: cheap next to the items)."""
        return list(self._by_id)

    def peek_next_id(self) -> int:
        return self._next_id

    # -- transitions --------------------------------------------------------------------

    def insert(
        self,
        *,
        path: str,
        payload: str,
        priority: int,
        orphaned_s: int | None,
        process_id: str | None,
        exclusive: bool,
        external_id: str | None,
        now: int,
    ) -> tuple[Item, PrefixState]:
        """A new pending item (§3.1 step 4); expiry per §2.2."""
        prefix = path_prefix(path)
        state = self.prefixes.ensure(prefix)
        orphaned = None if orphaned_s is None else now + orphaned_s * 1000
        expire = now + 4 * 3_600_000 if orphaned is None else orphaned + 2 * 3_600_000
        item = Item(
            id=self._next_id,
            path=path,
            prefix=state.prefix,
            payload=payload,
            priority=priority,
            created=now,
            orphaned=orphaned,
            expire=expire,
            process_id=process_id,
            exclusive=exclusive,
            external_id=external_id,
        )
        self._next_id += 1
        self._by_id[item.id] = item
        self._by_path[path] = item
        state.add_pending(item)
        self._item_expiry.push(expire, item.id)
        if expire < self._next_sweep:
            self._next_sweep = expire
        if self.journal is not None:
            self.journal.append(item_record(item))
        return item, state

    def note_item(self, item: Item) -> None:
        """Journal an item's mutable fields after a claim, heartbeat or MERGE_EXTRA."""
        if self.journal is not None:
            self.journal.append((ITEM_SET, item.id, item.activated, item.heartbeat, item.extra))

    def note_result_consumed(self, result: Result) -> None:
        if self.journal is not None:
            self.journal.append((RESULT_FLAG, result.id))

    def restore_item(self, item: Item) -> None:
        """Recovery: put back an item exactly as it was (claim and heartbeat included)."""
        activated, heartbeat = item.activated, item.heartbeat
        item.activated = None
        state = self.prefixes.ensure(item.prefix)
        item.prefix = state.prefix
        self._by_id[item.id] = item
        self._by_path[item.path] = item
        state.add_pending(item)
        if activated is not None:
            state.activate(item, activated)
        if heartbeat is not None:
            state.beat(item, heartbeat)
        self._item_expiry.push(item.expire, item.id)
        self._next_sweep = min(self._next_sweep, item.expire)
        self._next_id = max(self._next_id, item.id + 1)

    def reserve_ids(self, next_id: int) -> None:
        """Recovery: hand out ids from ``next_id`` on (past every id possibly seen)."""
        self._next_id = max(self._next_id, next_id)

    def depart(self, item: Item, reason: Reason, now: int, *, in_sweep: bool = False) -> None:
        """Remove ``item`` from every index and log its departure; ``in_sweep``: the sweep
        popped its expiry entry already (otherwise that entry is now dead)."""
        del self._by_id[item.id]
        del self._by_path[item.path]
        if self.journal is not None and not in_sweep:
            self.journal.append((ITEM_DEL, item.id))
        state = self.prefixes.get(item.prefix)
        if state is not None:
            state.remove(item)
            self.prefixes.release(state)
        if not in_sweep:
            self._item_expiry.note_dead()
        departure = Departure.of(item, reason, now)
        self.log.record(departure)
        hook = self._on_departure
        if hook is not None:
            self.post_commit.append(partial(hook, departure))

    def add_result(self, result: Result) -> None:
        self.results.add(result)
        if self.journal is not None:
            self.journal.append((RESULT_PUT, result.id, result.path, result.value,
                                 result.expire, result.external_id, result.deleted))
        self.prefixes.ensure(result.prefix).results += 1
        # due one ms after expire: results are readable while expire >= now (§2.7)
        due = result.expire + 1
        self._result_expiry.push(due, result.id)
        if due < self._next_sweep:
            self._next_sweep = due

    def remove_result(self, result: Result, *, in_sweep: bool = False) -> None:
        self.results.remove(result)
        if self.journal is not None and not in_sweep:
            self.journal.append((RESULT_DEL, result.id))
        state = self.prefixes.get(result.prefix)
        if state is not None:
            state.results -= 1
            self.prefixes.release(state)
        if not in_sweep:
            self._result_expiry.note_dead()

    def _item_live(self, due: int, id_: int) -> bool:
        return id_ in self._by_id  # an item's expiry never changes: its id decides

    def _result_live(self, due: int, id_: int) -> bool:
        return self.results.by_id(id_) is not None

    def sweep(self, now: int) -> None:
        """Drop every item and result due at ``now`` (§8 rule 9); O(1) when none is."""
        if now < self._next_sweep:
            return
        self._sweep(now)
        item_due = self._item_expiry.next_due()
        result_due = self._result_expiry.next_due()
        self._next_sweep = min(
            _NEVER if item_due is None else item_due,
            _NEVER if result_due is None else result_due,
        )

    def _sweep(self, now: int) -> None:
        by_id = self._by_id
        for id_ in self._item_expiry.pop_due(now):
            self.depart(by_id[id_], "expired", now, in_sweep=True)
        results = self.results
        for id_ in self._result_expiry.pop_due(now):
            result = results.by_id(id_)
            assert result is not None  # pop_due returns live entries only
            self.remove_result(result, in_sweep=True)

    def truncate(self, now: int) -> None:
        """QUEUE TRUNCATE (§3.13): every item and result; ids are not reset."""
        for item in list(self._by_id.values()):
            departure = Departure.of(item, "truncated", now)
            self.log.record(departure)
            hook = self._on_departure
            if hook is not None:
                self.post_commit.append(partial(hook, departure))
        if self.journal is not None:
            self.journal.append((TRUNCATE, "queue"))
        self._by_id.clear()
        self._by_path.clear()
        self.results.clear()
        self.prefixes.clear()
        self._item_expiry.clear()
        self._result_expiry.clear()
        self._next_sweep = _NEVER
