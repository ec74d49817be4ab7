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

Bulk work is bounded per step (``docs/dialect.md`` §8 rule 9 still holds for every key
lookup): TRUNCATE swaps every structure for an empty one in O(1) and leaves releasing the
old ones (and reporting their departures to the hook) to :attr:`QueueState.deferred`
(:mod:`.truncate`; a PURGE's, :mod:`.purge`); the
expiry sweep removes at most ``work_budget`` items a step, and while a backlog of due
items remains, lookups by key treat a due item as gone (counts and lists may show it until
the sweep reaches it, a few steps later).

Ids come from one monotonic sequence starting at 1, shared by all prefixes, never reused
and not reset by TRUNCATE (§2.5); a result takes its item's id (§2.3).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from cubequeue.storage.ack_results import Result, Results
from cubequeue.storage.deferred import DeferredWork
from cubequeue.storage.expiry import ExpiryHeap
from cubequeue.storage.list_snapshot import ListSnapshot
from cubequeue.storage.prefixes import Prefixes, PrefixState
from cubequeue.storage.purge import DetachedPrefix
from cubequeue.storage.queue_item import ID_MASK, Item, path_prefix, utf8_excess
from cubequeue.storage.queue_log import Departure, DepartureLog, Reason
from cubequeue.storage.record_kinds import (
    ITEM_DEL,
    ITEM_PUT,
    ITEM_SET,
    PREFIX,
    PURGE,
    RESULT_DEL,
    RESULT_FLAG,
    RESULT_PUT,
    TRUNCATE,
)
from cubequeue.storage.row_sizes import SizeTally, item_row_size, result_row_size
from cubequeue.storage.stats import DepartureCounts
from cubequeue.storage.truncate import DetachedQueue
from cubequeue.storage.waiters import Waiters


def item_record(item: Item) -> tuple[object, ...]:
    """An item as its ITEM_PUT state record (what it now is, whole)."""
    return (ITEM_PUT, item.id, item.path, item.payload, item.priority, item.created,
            item.orphaned, item.expire, item.process_id, item.exclusive, item.external_id,
            item.extra, item.heartbeat, item.activated)


def prefix_record(state: PrefixState) -> tuple[object, ...]:
    """What a prefix remembers as its PREFIX state record (all null: nothing, or gone)."""
    heartbeat_timeout, orphaned_timeout = state.last_to_cancel or (None, None)
    return (PREFIX, state.prefix, state.last_concurrency, heartbeat_timeout, orphaned_timeout)


__all__ = ["QueueState", "item_record", "prefix_record"]

_log = logging.getLogger("cubequeue.queue")

#: a sweep instant no clock reaches (ms since the epoch, far beyond any i64 expiry)
_NEVER = 1 << 64


class QueueState:
    __slots__ = (
        "_backlog",
        "_by_id",
        "_by_path",
        "_hidden",
        "_hiding",
        "_item_expiry",
        "_next_id",
        "_next_sweep",
        "_now",
        "_on_departure",
        "_purges",
        "_result_expiry",
        "deferred",
        "departed",
        "item_sizes",
        "journal",
        "log",
        "post_commit",
        "prefixes",
        "result_sizes",
        "results",
        "snapshots",
        "waiters",
        "work_budget",
    )

    def __init__(
        self,
        *,
        queue_log_size: int,
        on_departure: Callable[[Departure], None] | None = None,
        work_budget: int = 1024,
    ) -> None:
        self._by_id: dict[int, Item] = {}
        self._by_path: dict[str, Item] = {}
        self.prefixes = Prefixes()
        self.results = Results()
        self.waiters = Waiters()
        self.log = DepartureLog(queue_log_size)
        #: every departure counted by reason (``cubequeue_queue_departures``)
        self.departed = DepartureCounts()
        #: the items' and results' sizes as they change, for INFO (:mod:`.row_sizes`)
        self.item_sizes, self.result_sizes = SizeTally(), SizeTally()
        # two heaps: results expire minutes after their ACK, items hours after their ADD,
        # so in one heap every result would sift up past the items (O(log n) cache misses)
        self._item_expiry = ExpiryHeap(self._item_live)
        self._result_expiry = ExpiryHeap(self._result_live)
        #: no heap entry is due before this instant, so :meth:`sweep` returns at once
        #: until then (never later than the true earliest due; earlier only costs a look)
        self._next_sweep = _NEVER
        #: the instant of the latest sweep, and whether due items were left for later
        self._now = 0
        self._backlog = False
        #: prefixes purged but not released yet, and how many items they still hold
        self._purges: list[DetachedPrefix] = []
        self._hidden = 0
        #: key lookups must check each item (a sweep backlog or a purge being released)
        self._hiding = False
        #: bulk work left by TRUNCATE and PURGE (run in slices by the store)
        self.deferred = DeferredWork()
        self.work_budget = max(1, work_budget)
        self._next_id = 1
        self._on_departure = on_departure
        #: post-commit effects of the current step, run by the store
        self.post_commit: list[Callable[[], None]] = []
        #: durable mode: each change appends its state record here (None: in memory only;
        #: expiry is never journaled, it follows from the absolute timestamps)
        self.journal: list[tuple[object, ...]] | None = None
        #: the listings being streamed (:mod:`.list_snapshot`): each change that alters
        #: what a listing shows calls :meth:`note_change` first while any is open
        self.snapshots: list[ListSnapshot] = []

    # -- lookups ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_id) - self._hidden

    def _due(self, item: Item | None) -> Item | None:
        """``item``, or None when it is due but the bounded sweep has not reached it, or
        purged but not released yet."""
        if item is None or item.expire <= self._now:
            return None
        for purge in self._purges:
            if purge.holds(item):
                return None
        return item

    def _purged(self, item: Item) -> bool:
        return any(purge.holds(item) for purge in self._purges)

    def by_id(self, id_: int) -> Item | None:
        item = self._by_id.get(id_)
        return self._due(item) if self._hiding else item

    def live(self, id_: int) -> Item:
        """The item with id ``id_``, which an index says exists (a miss is our bug)."""
        return self._by_id[id_]

    def by_path(self, path: str) -> Item | None:
        item = self._by_path.get(path)
        return self._due(item) if self._hiding else item

    def find(self, key: int | str) -> Item | None:
        """A QKEY lookup: an int is an id, a str a path (§1.3). Expired items were swept
        already (or are due and hidden), so they are unreachable by id too (§8 rule 9)."""
        item = self._by_id.get(key) if isinstance(key, int) else self._by_path.get(key)
        return self._due(item) if self._hiding else item

    def items(self) -> Iterator[Item]:
        """Every item in ascending id order (dict order is insertion order = id order),
        without those a purge is still releasing."""
        if not self._purges:
            return iter(self._by_id.values())
        purged = self._purged
        return (item for item in self._by_id.values() if not purged(item))

    def item_ids(self) -> list[int]:
        """The ids of every item, ascending (a list of ints: cheap next to the items)."""
        return list(self._by_id)

    def due_items(self, now: int) -> list[Item]:
        """The items expired at ``now`` that the bounded sweep has not reached yet."""
        by_id = self._by_id
        return [by_id[id_] for id_ in self._item_expiry.due_ids(now)]

    def due_results(self, now: int) -> list[Result]:
        """The results expired at ``now`` (``expire < now``, §2.7) not swept yet."""
        by_id = self.results.by_id
        return [r for r in map(by_id, self._result_expiry.due_ids(now)) if r is not None]

    def purged_items(self) -> Iterator[Item]:
        """The items purges detached but have not released yet (in :attr:`item_sizes`
        until released, shown nowhere)."""
        for purge in self._purges:
            yield from purge.held()

    def peek_next_id(self) -> int:
        return self._next_id

    def id_map(self) -> dict[int, Item]:
        """The id map itself, for a listing's snapshot (:mod:`.list_snapshot`): read
        only; a TRUNCATE swaps it for a new one and releases this one item by item."""
        return self._by_id

    def note_change(self, item: Item) -> None:
        """``item`` is about to be claimed, merged into or removed: each open listing
        keeps its pre-image (callers test :attr:`snapshots` first, so this costs nothing
        while none is open)."""
        for snapshot in self.snapshots:
            snapshot.note(item)

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
        self.item_sizes.add(item_row_size(item))
        self._item_expiry.push(expire, item.id)
        if expire < self._next_sweep:
            self._next_sweep = expire
        if self.journal is not None:
            self.journal.append(item_record(item))
        return item, state

    def set_extra(self, item: Item, extra: str | None) -> None:
        """MERGE_EXTRA's new text for ``item`` (its size changes with it)."""
        old = item_row_size(item)
        item.wide += utf8_excess(extra) - utf8_excess(item.extra)
        item.extra = extra
        self.item_sizes.resize(old, item_row_size(item))

    def note_item(self, item: Item) -> None:
        """Journal an item's mutable fields after a claim, heartbeat or MERGE_EXTRA."""
        if self.journal is not None:
            self.journal.append((ITEM_SET, item.id, item.activated, item.heartbeat, item.extra))

    def note_prefix(self, state: PrefixState) -> None:
        """Journal what ``state`` remembers (its last CONCURRENCY or TO_CANCEL timeouts
        changed: callers journal only a value that differs from the stored one)."""
        if self.journal is not None:
            self.journal.append(prefix_record(state))

    def _release_prefix(self, state: PrefixState) -> None:
        """Forget ``state`` if it holds nothing any more; in durable mode, a forgotten
        prefix that remembered something journals that it is gone (a later ADD there
        starts afresh, and a replay must not bring the old values back)."""
        if (self.prefixes.release(state) and self.journal is not None
                and (state.last_concurrency is not None or state.last_to_cancel is not None)):
            self.journal.append((PREFIX, state.prefix, None, None, None))

    def note_result_consumed(self, result: Result) -> None:
        if self.journal is not None:
            self.journal.append((RESULT_FLAG, result.id))

    def restore_rows(self, rows: Iterable[Sequence[object]]) -> None:
        """Recovery in bulk from ITEM_PUT records (validated on load; ascending ids, as
        the image keeps them): each item is built straight from its row, pending ones
        enter their prefix's sorted indexes in one sorted load per prefix, and the expiry
        heap is heapified once. At 10^6 items this is allocation-bound, so the loop does
        only what each item needs (no keyword construction, no per-item push or sift)."""
        new = Item.__new__
        by_id, by_path, ensure = self._by_id, self._by_path, self.prefixes.ensure
        #: prefix -> (its state's shared prefix string, its pending items)
        groups: dict[str, tuple[str, list[Item]]] = {}
        claimed: list[Item] = []
        dues: list[int] = []
        ids: list[int] = []
        sizes: list[int] = []
        ascending, last = not by_id, 0
        loaded: Iterable[Any] = rows  # validated record fields: typed by validate()
        for row in loaded:
            (_, id_, path, payload, priority, created, orphaned, expire, process_id,
             exclusive, external_id, extra, heartbeat, activated) = row
            prefix, colon, _ = path.rpartition(":")
            if not colon:
                prefix = ""
            group = groups.get(prefix)
            if group is None:
                group = groups[prefix] = (ensure(prefix).prefix, [])
            item = new(Item)
            item.id = id_
            item.path = path
            item.prefix = group[0]
            item.payload = payload
            item.priority = priority
            item.created = created
            item.orphaned = orphaned
            item.expire = expire
            item.process_id = process_id
            item.exclusive = exclusive
            item.external_id = external_id
            item.extra = extra
            item.heartbeat = heartbeat
            item.activated = activated
            item.wide = utf8_excess(path) + utf8_excess(payload) + utf8_excess(extra)
            if activated is None and heartbeat is None:
                group[1].append(item)
            else:
                claimed.append(item)
            by_id[id_] = item
            by_path[path] = item
            dues.append(expire)
            ids.append(id_)
            sizes.append(item_row_size(item))
            if id_ < last:
                ascending = False
            last = id_
        if not ids:
            return
        if not ascending:  # items() promises id order: dict order must be that order
            self._by_id = dict(sorted(by_id.items()))
        self._item_expiry.load(dues, ids)
        self.item_sizes.extend(sizes)
        self._next_sweep = min(self._next_sweep, min(dues))
        self._next_id = max(self._next_id, max(ids) + 1)
        states = self.prefixes
        for prefix, (_, pending) in groups.items():
            if pending:
                states.ensure(prefix).restore_pending(pending)
        for item in claimed:
            state = states.ensure(item.prefix)
            activated, heartbeat = item.activated, item.heartbeat
            item.activated = item.heartbeat = None
            state.add_pending(item)
            if activated is not None:
                state.activate(item, activated)
            if heartbeat is not None:
                state.beat(item, heartbeat)

    def reserve_ids(self, next_id: int) -> None:
        """Recovery: hand out ids from ``next_id`` on (past every id possibly seen)."""
        self._next_id = max(self._next_id, next_id)

    def depart(self, item: Item, reason: Reason, now: int, *, in_sweep: bool = False,
               bulk: int = 0) -> None:
        """Remove ``item`` from every index and log its departure; ``in_sweep``: the sweep
        popped its expiry entry already (otherwise that entry is now dead); ``bulk``: the
        size of the bulk removal it is part of (see :class:`Departure`)."""
        if self.snapshots:
            self.note_change(item)
        del self._by_id[item.id]
        if self._by_path.get(item.path) is item:  # a due item's path may be taken anew
            del self._by_path[item.path]
        if self.journal is not None and not in_sweep:
            self.journal.append((ITEM_DEL, item.id))
        state = self.prefixes.get(item.prefix)
        if state is not None:
            state.remove(item)
            self._release_prefix(state)
        if not in_sweep:
            self._item_expiry.note_dead()
        self.item_sizes.remove(item_row_size(item))
        departure = Departure.of(item, reason, now, bulk)
        self.log.record(departure)
        self.departed[reason] += 1
        hook = self._on_departure
        if hook is not None:
            self.post_commit.append(partial(hook, departure))

    def add_result(self, result: Result) -> None:
        self.results.add(result)
        self.result_sizes.add(result_row_size(result))
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
        self.result_sizes.remove(result_row_size(result))
        if self.journal is not None and not in_sweep:
            self.journal.append((RESULT_DEL, result.id))
        state = self.prefixes.get(result.prefix)
        if state is not None:
            state.results -= 1
            self._release_prefix(state)
        if not in_sweep:
            self._result_expiry.note_dead()

    def _item_live(self, due: int, id_: int) -> bool:
        # an item's expiry never changes: its id decides (a purged one is released by
        # its purge, which leaves its entry to be dropped here, dead)
        if not self._purges:
            return id_ in self._by_id
        item = self._by_id.get(id_)
        return item is not None and not self._purged(item)

    def _result_live(self, due: int, id_: int) -> bool:
        return self.results.by_id(id_) is not None

    def sweep(self, now: int) -> None:
        """Drop the items and results due at ``now`` (§8 rule 9), at most
        :attr:`work_budget` of each per call (a backlog waits for the next steps, hidden
        from key lookups meanwhile); O(1) when none is due."""
        self._now = now
        if now < self._next_sweep:
            return
        expired = self._sweep(now, self.work_budget)
        item_due = self._item_expiry.next_due()
        result_due = self._result_expiry.next_due()
        self._next_sweep = min(
            _NEVER if item_due is None else item_due,
            _NEVER if result_due is None else result_due,
        )
        self._backlog = self._next_sweep <= now
        self._hiding = self._backlog or bool(self._purges)
        if expired > 1 or (expired and self._backlog):
            _log.info("expiry sweep: %d items expired%s", expired,
                      ", more are due" if self._backlog else "",
                      extra={"reason": "expired", "count": expired})

    def _sweep(self, now: int, budget: int) -> int:
        by_id = self._by_id
        expired = self._item_expiry.pop_due(now, budget)
        for id_ in expired:
            self.depart(by_id[id_], "expired", now, in_sweep=True, bulk=len(expired))
        results = self.results
        for id_ in self._result_expiry.pop_due(now, budget):
            result = results.by_id(id_)
            assert result is not None  # pop_due returns live entries only
            self.remove_result(result, in_sweep=True)
        return len(expired)

    @property
    def has_deferred(self) -> bool:
        """Due items left for later sweeps, or deferred bulk work queued."""
        return self._backlog or bool(self.deferred)

    def run_deferred(self, budget: int) -> None:
        """One slice of what bulk statements and the sweep left: the sweep's backlog
        first (it decides what clients see), then the deferred releases."""
        if self._backlog:
            self.sweep(self._now)
        if self.deferred:
            self.deferred.run(budget)

    def truncate(self, now: int) -> None:
        """QUEUE TRUNCATE (§3.13): every item and result; ids are not reset.

        Every structure is swapped for an empty one at once (so the statement is atomic),
        the log gets the rows it keeps, and the old structures are released in slices
        by :attr:`deferred`, which also reports each departure to the hook."""
        by_id, by_path = self._by_id, self._by_path
        count, results = len(by_id), len(self.results)
        keep = self.log.size
        if keep and by_id:
            newest: Iterable[Item] = reversed(by_id.values())
            if self._purges:
                purged = self._purged
                newest = (item for item in newest if not purged(item))
            last = list(itertools.islice(newest, keep))
            last.reverse()
            self.log.record_bulk(last, "truncated", now)
        if self.journal is not None:
            self.journal.append((TRUNCATE, "queue"))
        old = DetachedQueue(
            by_id, by_path, self.results, self.prefixes, self._item_expiry, self._result_expiry
        )
        self._by_id, self._by_path = {}, {}
        self.results, self.prefixes = Results(), Prefixes()
        self.item_sizes, self.result_sizes = SizeTally(), SizeTally()
        self._item_expiry = ExpiryHeap(self._item_live)
        self._result_expiry = ExpiryHeap(self._result_live)
        self._next_sweep = _NEVER
        self._backlog = False
        count -= self._hidden  # purged items not released yet left clients already
        self._purges, self._hidden, self._hiding = [], 0, False
        self.departed["truncated"] += count
        if count or results:
            self.deferred.push(partial(self._release, old, now))
            _log.info("QUEUE TRUNCATE: %d items and %d results removed", count, results,
                      extra={"reason": "truncated", "count": count})

    def purge(self, prefix: str, status: str | None, now: int) -> int:
        """QUEUE PURGE (§3.14): the prefix's items (``status``: only pending or active
        ones), no waiter woken, no result; the number removed.

        The prefix's structures are swapped for empty ones at once (the statement is
        atomic: counts, lists and claims see it), the log gets the rows it keeps, the
        journal one PURGE record (prefix, status and the first id it did not see, so a
        replay removes exactly these items), and the items are released from the id and
        path maps in slices by :attr:`deferred` (hidden from key lookups until then, see
        :mod:`.purge`), which also reports each departure to the hook."""
        state = self.prefixes.get(prefix)
        if state is None:
            return 0
        take_pending = status != "active" and bool(state.pending)
        take_active = status != "pending" and bool(state.active)
        if not (take_pending or take_active):
            return 0
        keep = self.log.size
        if keep:
            ids: list[int] = []
            if take_pending:
                ids.extend(k & ID_MASK for k in state.by_created[-keep:])
            if take_active:
                ids.extend(state.active.keys()[-keep:])
            ids.sort()
            self.log.record_bulk([self._by_id[i] for i in ids[-keep:]], "purged", now)
        pending = active = None
        keys: dict[int, str] = {}
        lists: list[list[int]] = []
        if take_pending:
            pending, pending_lists = state.detach_pending()
            lists.extend(pending_lists)
        if take_active:
            active, keys, active_lists = state.detach_active()
            lists.extend(active_lists)
        detached = DetachedPrefix(prefix, pending, active, keys, lists, self._by_id,
                                  self._by_path)
        if self.journal is not None:  # durable mode: one record, whatever it removed
            self.journal.append((PURGE, "queue", prefix, status, self._next_id))
        self._release_prefix(state)
        self._purges.append(detached)
        self.departed["purged"] += detached.count
        self._hidden += detached.count
        self._hiding = True
        self.deferred.push(partial(self._release_purge, detached, now))
        _log.info("QUEUE PURGE %s: %d items removed", prefix, detached.count,
                  extra={"reason": "purged", "count": detached.count})
        return detached.count

    def _release_purge(self, old: DetachedPrefix, now: int, budget: int) -> tuple[int, bool]:
        """One slice of releasing a purge (:meth:`DetachedPrefix.release`); once done,
        key lookups stop asking it."""
        counted = old.by_id is self._by_id  # a TRUNCATE since has reset the hidden count
        used, released = old.release(budget, now, self._on_departure, self.post_commit,
                                     self.snapshots, self.item_sizes if counted else None)
        if counted:
            self._hidden -= released
        if not old.done:
            return used, False
        if old in self._purges:
            self._purges.remove(old)
            self._hiding = self._backlog or bool(self._purges)
        return used, True

    def _release(self, old: DetachedQueue, now: int, budget: int) -> tuple[int, bool]:
        """One slice of releasing a truncated queue (:meth:`DetachedQueue.release`); the
        post-commit list is read now, not when the job was queued (each step has its own)."""
        return old.release(budget, now, self._on_departure, self.post_commit, self.snapshots)
