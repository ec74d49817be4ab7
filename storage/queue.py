"""The queue's state and its primitive transitions (dialect doc §2, §8 rules 2, 9, issue 9).

:class:`QueueState` owns every queue structure: items by id and by path, the per-prefix
pending/active sets (:mod:`.prefixes`), the results and waiters (:mod:`.queue_results`),
the expiry heap (:mod:`.expiry`) and the departure log (:mod:`.queue_log`). Commands
(:mod:`.queue_commands`) validate first and then call these primitives, which never fail,
so a statement that raises has changed nothing.

Effects that must run *after* a step commits (waiter callbacks, §8 rule 13, and the
``on_departure`` hook) are queued in :attr:`QueueState.after`; the store runs them once
the command returned.

Ids come from one monotonic sequence starting at 1, shared by all prefixes, never reused
and not reset by TRUNCATE (§2.5); a result takes its item's id (§2.3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from cubequeue.storage.expiry import ITEM, RESULT, ExpiryHeap
from cubequeue.storage.prefixes import Prefixes, PrefixState
from cubequeue.storage.queue_item import Item, path_prefix
from cubequeue.storage.queue_log import Departure, DepartureLog, Reason
from cubequeue.storage.queue_results import Result, Results, Waiters

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
        "after",
        "log",
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
        self._item_expiry = ExpiryHeap()
        self._result_expiry = ExpiryHeap()
        #: no heap entry is due before this instant, so :meth:`sweep` returns at once
        #: until then (never later than the true earliest due; earlier only costs a look)
        self._next_sweep = _NEVER
        self._next_id = 1
        self._on_departure = on_departure
        #: post-commit effects of the current step, run by the store
        self.after: list[Callable[[], None]] = []

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
        self._item_expiry.push(expire, ITEM, item.id)
        if expire < self._next_sweep:
            self._next_sweep = expire
        return item, state

    def depart(self, item: Item, reason: Reason, now: int, *, early: bool = True) -> None:
        """Remove ``item`` from every index and log its departure (issue 9)."""
        del self._by_id[item.id]
        del self._by_path[item.path]
        state = self.prefixes.get(item.prefix)
        if state is not None:
            state.remove(item)
            self.prefixes.release(state)
        if early:
            self._item_expiry.discard(self._live)
        departure = Departure.of(item, reason, now)
        self.log.record(departure)
        hook = self._on_departure
        if hook is not None:
            self.after.append(partial(hook, departure))

    def add_result(self, result: Result) -> None:
        self.results.add(result)
        self.prefixes.ensure(result.prefix).results += 1
        # due one ms after expire: results are readable while expire >= now (§2.7)
        due = result.expire + 1
        self._result_expiry.push(due, RESULT, result.id)
        if due < self._next_sweep:
            self._next_sweep = due

    def remove_result(self, result: Result, *, early: bool = True) -> None:
        self.results.remove(result)
        state = self.prefixes.get(result.prefix)
        if state is not None:
            state.results -= 1
            self.prefixes.release(state)
        if early:
            self._result_expiry.discard(self._live)

    def _live(self, kind: int, id_: int) -> bool:
        if kind == ITEM:
            return id_ in self._by_id
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
        dead = 0
        for _, id_ in self._item_expiry.pop_due(now):
            item = self._by_id.get(id_)
            if item is None:
                dead += 1
            else:
                self.depart(item, "expired", now, early=False)
        if dead:
            self._item_expiry.forget_dead(dead)
        dead = 0
        for _, id_ in self._result_expiry.pop_due(now):
            result = self.results.by_id(id_)
            if result is None:
                dead += 1
            else:
                self.remove_result(result, early=False)
        if dead:
            self._result_expiry.forget_dead(dead)

    def truncate(self, now: int) -> None:
        """QUEUE TRUNCATE (§3.13): every item and result; ids are not reset."""
        for item in list(self._by_id.values()):
            departure = Departure.of(item, "truncated", now)
            self.log.record(departure)
            hook = self._on_departure
            if hook is not None:
                self.after.append(partial(hook, departure))
        self._by_id.clear()
        self._by_path.clear()
        self.results.clear()
        self.prefixes.clear()
        self._item_expiry.clear()
        self._result_expiry.clear()
        self._next_sweep = _NEVER
