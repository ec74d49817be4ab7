"""Per-prefix queue state: the pending and active sets, and the incremental summary.

Prefix matching in Cube Store is exact equality (``docs/dialect.md`` §2.1), so every queue view
(LIST, RETRIEVE's counts, TO_CANCEL) reads one prefix. Each :class:`PrefixState` keeps:

* ``pending``: a SortedList of ranks (-priority, created, id), LIST/PENDING order (§3.9);
* ``active``: a SortedDict id → item (ACTIVE order and RETRIEVE's key list, §3.3), with
  the active keys by id and their comma-joined text (:meth:`PrefixState.active_text`),
  kept as the set changes: appending a claim with the highest id, or dropping the lowest
  or highest id, edits the text; anything else marks it stale, and the next RETRIEVE
  joins it again in C (no per-item Python work), instead of on every call;
* ``heartbeats``: a SortedList of (heartbeat, id) over active items, for STALLED and
  ``max_heartbeat_age_ms``;
* ``by_created``: a SortedList of (created, id) over pending items, for ORPHANED and
  ``oldest_pending_ms``; ``by_orphaned``: (orphaned, id) for pending items that carry their
  own ORPHANED time (which wins over the command's timeout, §3.10).

Every sorted entry is one packed int ordered like its tuple (:func:`.queue_item.pack`).

So every count is O(1), every change O(log n), and ``system.queue_prefixes`` (§5.2) is
read without scanning items. A prefix's state lives while it holds items or results.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedDict, SortedList

from cubequeue.grammar.results import Row
from cubequeue.storage.queue_item import ID_MASK, Item, pack, unpack_time
from cubequeue.storage.stats import PrefixSample

__all__ = ["PrefixState", "Prefixes"]

#: :func:`.queue_item.pack`'s bias (i64 values shifted so packed keys order like them)
_BIAS = 1 << 63


class PrefixState:
    __slots__ = (
        "_active_text",
        "_keys",
        "_slot",
        "active",
        "by_created",
        "by_orphaned",
        "heartbeats",
        "last_concurrency",
        "last_to_cancel",
        "pending",
        "prefix",
        "results",
    )

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pending = SortedList()
        self.active = SortedDict()
        #: id → key of every active item; ``_active_text`` is their comma-joined text in
        #: id order, or None when stale (it is meaningless while nothing is active)
        self._keys: dict[int, str] = {}
        self._active_text: str | None = None
        #: this state's index in :meth:`Prefixes.in_order` (kept by :class:`Prefixes`)
        self._slot = -1
        self.heartbeats = SortedList()
        self.by_created = SortedList()
        self.by_orphaned = SortedList()
        #: unexpired results whose path has this prefix
        self.results = 0
        #: CONCURRENCY of the latest RETRIEVE / ADD_AND_RETRIEVE here (system.queue_prefixes)
        self.last_concurrency: int | None = None
        #: (heartbeat timeout, orphaned timeout) of the latest TO_CANCEL here; CANCEL uses
        #: it to log ``cancelled_stalled`` / ``cancelled_orphaned`` (system.queue_log)
        self.last_to_cancel: tuple[int | None, int | None] | None = None

    @property
    def pending_count(self) -> int:
        return len(self.pending)

    @property
    def active_count(self) -> int:
        return len(self.active)

    @property
    def empty(self) -> bool:
        return not self.pending and not self.active and self.results == 0

    # -- membership -------------------------------------------------------------------

    def add_pending(self, item: Item) -> None:
        self.pending.add(item.rank)
        self.by_created.add(pack(item.created, item.id))
        if item.orphaned is not None:
            self.by_orphaned.add(pack(item.orphaned, item.id))

    def restore_pending(self, items: list[Item]) -> None:
        """Recovery: many pending items at once (SortedList.update sorts them in one go;
        the keys are :attr:`Item.rank` and :func:`pack`, inlined: a call per item is a
        tenth of a recovery at 10^6)."""
        bias, top = _BIAS, _BIAS - 1
        self.pending.update([((top - item.priority) << 128) | ((item.created + bias) << 64)
                             | item.id for item in items])
        self.by_created.update([((item.created + bias) << 64) | item.id for item in items])
        orphaned = [((item.orphaned + bias) << 64) | item.id for item in items
                    if item.orphaned is not None]
        if orphaned:
            self.by_orphaned.update(orphaned)

    def _drop_pending(self, item: Item) -> None:
        self.pending.remove(item.rank)
        self.by_created.remove(pack(item.created, item.id))
        if item.orphaned is not None:
            self.by_orphaned.remove(pack(item.orphaned, item.id))

    def activate(self, item: Item, now: int) -> str:
        """pending → active; the claim sets the heartbeat (§3.3 step 8).

        Returns the claim's ``active`` column: the keys active before, in id order, with
        the claimed key appended **last** (§3.3 step 8, §8 rule 1).
        """
        before = self.active_text()
        key = item.key
        claimed = key if before is None else f"{before},{key}"
        active = self.active
        if before is None or item.id > active.peekitem(-1)[0]:
            self._active_text = claimed  # the claim sorts last: the answer is the new text
        else:
            self._active_text = None
        self._drop_pending(item)
        item.activated = now
        item.heartbeat = now
        active[item.id] = item
        self._keys[item.id] = key
        self.heartbeats.add(pack(now, item.id))
        return claimed

    def beat(self, item: Item, now: int) -> None:
        if item.activated is not None and item.heartbeat is not None:
            self.heartbeats.remove(pack(item.heartbeat, item.id))
            self.heartbeats.add(pack(now, item.id))
        item.heartbeat = now

    def remove(self, item: Item) -> None:
        if item.activated is None:
            self._drop_pending(item)
        else:
            self._drop_active_key(item.id)
            del self.active[item.id]
            if item.heartbeat is not None:
                self.heartbeats.remove(pack(item.heartbeat, item.id))

    def _drop_active_key(self, id_: int) -> None:
        """Keep the active text current when the lowest or highest id leaves (an item's
        key is unique in its prefix, so its length says exactly where it ends)."""
        key = self._keys.pop(id_)
        text = self._active_text
        if text is None or len(self._keys) == 0:
            return
        active = self.active
        if id_ == active.peekitem(-1)[0]:
            self._active_text = text[: len(text) - len(key) - 1]
        elif id_ == active.peekitem(0)[0]:
            self._active_text = text[len(key) + 1 :]
        else:
            self._active_text = None

    def detach_pending(self) -> tuple[SortedList, list[list[int]]]:
        """Swap the pending indexes for empty ones (QUEUE PURGE, O(1)): the old pending
        ranks, and the int lists of the old created/orphaned indexes to release."""
        pending = self.pending
        lists = [*self.by_created._lists, *self.by_orphaned._lists]  # detached: their own lists
        self.pending, self.by_created, self.by_orphaned = SortedList(), SortedList(), SortedList()
        return pending, lists

    def detach_active(self) -> tuple[SortedDict, dict[int, str], list[list[int]]]:
        """Swap the active indexes for empty ones (QUEUE PURGE, O(1)): the old active
        items, their keys, and the int lists of the old heartbeat index to release."""
        active, keys = self.active, self._keys
        lists = list(self.heartbeats._lists)  # detached: sortedcontainers' own lists
        self.active, self._keys, self._active_text = SortedDict(), {}, None
        self.heartbeats = SortedList()
        return active, keys, lists

    def index_lists(self) -> list[list[int]]:
        """The int lists inside this state's sorted indexes, for releasing a detached
        state in slices (:mod:`.deferred`): SortedList keeps its values in ``_lists``;
        only a state nobody reads any more may be emptied this way."""
        out: list[list[int]] = []
        for index in (self.pending, self.by_created, self.by_orphaned, self.heartbeats):
            out.extend(index._lists)  # detached: sortedcontainers' own lists
        return out

    # -- views ------------------------------------------------------------------------

    def active_text(self) -> str | None:
        """The keys of the active items in ascending id order joined by ``,``, or None
        when none is active (RETRIEVE's and ADD_AND_RETRIEVE's ``active``, §3.3 step 3)."""
        if not self._keys:
            return None
        text = self._active_text
        if text is None:
            text = self._active_text = ",".join(map(self._keys.__getitem__, self.active))
        return text

    def pending_ids(self) -> Iterator[int]:
        """Pending ids in LIST/PENDING order (priority desc, created asc, id asc)."""
        for rank in self.pending:
            yield rank & ID_MASK

    def stalled_ids(self, now: int, heartbeat_timeout: int) -> Iterator[int]:
        """Active items whose heartbeat is more than ``heartbeat_timeout`` ms old."""
        bound = pack(now - heartbeat_timeout, 0)
        for key in self.heartbeats.irange(None, bound, (True, False)):
            yield key & ID_MASK

    def old_pending_ids(self, now: int, orphaned_timeout: int) -> Iterator[int]:
        """Pending items created more than ``orphaned_timeout`` ms ago (may include items
        with their own ORPHANED time; the caller filters those)."""
        bound = pack(now - orphaned_timeout, 0)
        for key in self.by_created.irange(None, bound, (True, False)):
            yield key & ID_MASK

    def own_orphaned_ids(self, now: int) -> Iterator[int]:
        """Pending items whose own ORPHANED instant is before ``now``."""
        for key in self.by_orphaned.irange(None, pack(now, 0), (True, False)):
            yield key & ID_MASK

    def sample(self, now: int, stalled_after_ms: int) -> PrefixSample:
        """This prefix for ``/metrics`` (:meth:`.stats.PrefixCensus.walk`): O(log n)."""
        pending, active = len(self.by_created), len(self.active)
        oldest = now + _BIAS - (self.by_created[0] >> 64) if pending else None
        stalled = 0
        if active:
            timeouts = self.last_to_cancel
            after = stalled_after_ms if timeouts is None or timeouts[0] is None else timeouts[0]
            stalled = self.heartbeats.bisect_left(pack(now - after, 0))
        return (-(pending + active), self.prefix, pending, active, oldest, stalled)

    def summary_row(self, now: int) -> Row:
        """One ``system.queue_prefixes`` row (§8 rule 11)."""
        oldest = now - unpack_time(self.by_created[0]) if self.by_created else None
        max_age = now - unpack_time(self.heartbeats[0]) if self.heartbeats else None
        heartbeat_timeout, orphaned_timeout = self.last_to_cancel or (None, None)
        return (
            self.prefix,
            len(self.pending),
            len(self.active),
            self.results,
            oldest,
            max_age,
            self.last_concurrency,
            heartbeat_timeout,
            orphaned_timeout,
        )


class _Cursor:
    """A walk's place in :attr:`Prefixes._order`: the next index to read, and the states
    a drop moved from the unread part into the read part (still to be read)."""

    __slots__ = ("moved", "next")

    def __init__(self) -> None:
        self.next = 0
        self.moved: list[PrefixState] = []


class Prefixes:
    """The live prefix states, created on first use and dropped once empty.

    Besides the map by name, the states are kept in a list (a dropped state's place is
    taken by the last one, O(1)), which :meth:`walk` reads by index in slices across
    steps: /metrics reads 10^6 prefixes without copying them first."""

    __slots__ = ("_order", "_states", "_walks")

    def __init__(self) -> None:
        self._states: dict[str, PrefixState] = {}
        self._order: list[PrefixState] = []
        #: the walks under way (a drop tells each one what it moved past it)
        self._walks: list[_Cursor] = []

    def get(self, prefix: str) -> PrefixState | None:
        return self._states.get(prefix)

    def ensure(self, prefix: str) -> PrefixState:
        state = self._states.get(prefix)
        if state is None:
            state = self._states[prefix] = PrefixState(prefix)
            state._slot = len(self._order)
            self._order.append(state)
        return state

    def release(self, state: PrefixState) -> bool:
        """Forget ``state`` if it holds nothing any more; whether it was forgotten."""
        if state.empty and self._states.get(state.prefix) is state:
            del self._states[state.prefix]
            order, slot = self._order, state._slot
            state._slot = -1
            last = order.pop()
            if last is not state:
                order[slot] = last
                last._slot = slot
                for walk in self._walks:  # usually none
                    if slot < walk.next <= len(order):  # from the unread part to the read
                        walk.moved.append(last)
            return True
        return False

    def clear(self) -> None:
        self._states.clear()
        for state in self._order:
            state._slot = -1
        self._order.clear()

    def __iter__(self) -> Iterator[PrefixState]:
        return iter(self._states.values())

    def __len__(self) -> int:
        return len(self._states)

    def walk(self, size: int) -> Iterator[list[PrefixState]]:
        """The live states, at most ``size`` per slice, each slice taken when asked for,
        so steps may run between slices: every state live throughout is read exactly
        once, a dropped one is not read after its drop, and one created meanwhile may be
        read or not. O(size) per slice; nothing is copied up front."""
        cursor = _Cursor()
        self._walks.append(cursor)
        try:
            order, size = self._order, max(1, size)
            while True:
                part = order[cursor.next:cursor.next + size]
                cursor.next += len(part)
                moved = cursor.moved
                while moved and len(part) < size:
                    state = moved.pop()
                    if state._slot >= 0:  # not dropped since
                        part.append(state)
                if not part:
                    return
                yield part
        finally:
            self._walks.remove(cursor)

    def sorted(self) -> list[PrefixState]:
        return [self._states[p] for p in sorted(self._states)]
