"""The QUEUE commands' semantics (``docs/dialect.md`` §3, §8 rules 1, 2, 7, 8, 13).

Each method is one atomic step at the instant ``now`` (taken once by the store, after its
expiry sweep). Every method validates all of its input first and only then mutates
:class:`~cubequeue.storage.queue.QueueState` through primitives that cannot fail, so a
statement that raises has changed nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from functools import partial

from cubequeue.grammar.commands import (
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueGet,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueuePurge,
    QueueResult,
    QueueResultBlocking,
    QueueRetrieve,
    QueueToCancel,
    QueueTruncate,
)
from cubequeue.grammar.errors import InvalidParameterValue, LimitExceeded
from cubequeue.grammar.results import EMPTY, ResultSet, Row
from cubequeue.storage import bound_fields
from cubequeue.storage.ack_results import Result
from cubequeue.storage.checks import (
    RETRIEVE_NEEDS_PID,
    check_add,
    check_extra,
    check_payload,
    rust_option,
)
from cubequeue.storage.extra_json import merge_extra
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.list_snapshot import ListStream
from cubequeue.storage.queue import QueueState
from cubequeue.storage.queue_item import Item, path_prefix
from cubequeue.storage.queue_log import Reason
from cubequeue.storage.waiters import Callback, Waiter

__all__ = ["QueueCommands"]

_RESULT_COLUMNS = QueueResult.RESULT_COLUMNS


class QueueCommands:
    __slots__ = ("_limits", "_q")

    def __init__(self, state: QueueState, limits: Limits) -> None:
        self._q = state
        self._limits = limits

    # -- checks -------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        limit = self._limits.max_items
        if len(self._q) >= limit:
            raise LimitExceeded(
                f"queue is full: {len(self._q)} items queued, the limit is {limit} "
                f"(--max-items={limit})"
            )

    def _add(self, cmd: QueueAdd | QueueAddAndRetrieve, process_id: str | None,
             now: int) -> tuple[Item, bool]:
        """ADD's checks, duplicate detection and insert (§3.1); the item and ``added``."""
        path = bound_fields.text(cmd.path)
        payload = bound_fields.text(cmd.payload)
        priority = bound_fields.num(cmd.priority)
        orphaned = bound_fields.opt_num(cmd.orphaned)
        external_id = bound_fields.opt_text(cmd.external_id)
        check_add(self._limits, cmd.exclusive, external_id, process_id, payload)
        existing = self._q.by_path(path)
        if existing is not None:
            return existing, False
        self._check_capacity()
        item, _ = self._q.insert(
            path=path,
            payload=payload,
            priority=priority,
            orphaned_s=orphaned,
            process_id=process_id,
            exclusive=cmd.exclusive,
            external_id=external_id,
            now=now,
        )
        return item, True

    def _pending_count(self, prefix: str) -> int:
        state = self._q.prefixes.get(prefix)
        return 0 if state is None else state.pending_count

    # -- commands -----------------------------------------------------------------------

    def queue_add(self, cmd: QueueAdd, process_id: str | None, now: int) -> ResultSet:
        """§3.1: ``pending`` counts the prefix's pending items after the step."""
        item, added = self._add(cmd, process_id, now)
        return ResultSet(cmd.RESULT_COLUMNS, [(str(item.id), added, self._pending_count(item.prefix))])

    def queue_add_and_retrieve(
        self, cmd: QueueAddAndRetrieve, process_id: str | None, now: int
    ) -> ResultSet:
        """§8 rule 1: ADD, then claim when ``active + other pending < concurrency``."""
        concurrency = bound_fields.num(cmd.concurrency)
        item, added = self._add(cmd, process_id, now)
        state = self._q.prefixes.ensure(item.prefix)
        if state.last_concurrency != concurrency:
            state.last_concurrency = concurrency
            self._q.note_prefix(state)
        claim = (
            not item.active
            and (not item.exclusive or item.process_id == process_id)
            and state.active_count + state.pending_count - 1 < concurrency
        )
        if not claim:
            row: Row = (str(item.id), added, state.pending_count, state.active_text(), None, None)
            return ResultSet(cmd.RESULT_COLUMNS, [row])
        if self._q.snapshots:
            self._q.note_change(item)
        active = state.activate(item, now)
        self._q.note_item(item)
        row = (str(item.id), added, state.pending_count, active, item.payload, item.extra)
        return ResultSet(cmd.RESULT_COLUMNS, [row])

    def queue_retrieve(self, cmd: QueueRetrieve, process_id: str | None, now: int) -> ResultSet:
        """§3.3: concurrency first, then lookup, LOCK_FAILED, the exclusive rules."""
        path = bound_fields.text(cmd.path)
        concurrency = bound_fields.num(cmd.concurrency)
        state = self._q.prefixes.get(path_prefix(path))
        pending = 0 if state is None else state.pending_count
        claimed: Item | None = None
        if (0 if state is None else state.active_count) < concurrency:
            item = self._q.by_path(path)
            if item is not None and not item.active:
                if not item.exclusive:
                    claimed = item
                elif item.process_id is not None and process_id is None:
                    raise InvalidParameterValue(RETRIEVE_NEEDS_PID)
                elif item.process_id == process_id:
                    claimed = item
        if state is not None and state.last_concurrency != concurrency:
            state.last_concurrency = concurrency
            self._q.note_prefix(state)
        if claimed is None or state is None:
            if not cmd.extended:
                return ResultSet(cmd.RESULT_COLUMNS, [])
            active = None if state is None else state.active_text()
            return ResultSet(cmd.RESULT_COLUMNS, [(None, None, pending, active, None)])
        if self._q.snapshots:
            self._q.note_change(claimed)
        active = state.activate(claimed, now)
        self._q.note_item(claimed)
        row = (claimed.payload, claimed.extra, pending - 1, active, str(claimed.id))
        return ResultSet(cmd.RESULT_COLUMNS, [row])

    def queue_ack(self, cmd: QueueAck, process_id: str | None, now: int) -> ResultSet:
        """§3.4 with §8 rule 8 (replace an older same path + external_id result) and the
        waiter delivery of §3.12 step 3 / §8 rule 13."""
        key = bound_fields.key(cmd.key)
        value = bound_fields.opt_text(cmd.result)
        if value is not None:
            check_payload(self._limits, value, "result")
        item = self._q.find(key)
        if item is None:
            return ResultSet(cmd.RESULT_COLUMNS, [(False,)])
        q = self._q
        by_id, by_path = q.waiters.has(item.id, item.path)
        if value is not None:  # before the departure, so the prefix state lives on
            if item.external_id is not None:
                older = q.results.by_path_ext(item.path, item.external_id)
                if older is not None:
                    q.remove_result(older)
            result = Result(
                id=item.id,
                path=item.path,
                prefix=item.prefix,
                value=value,
                expire=now + self._limits.results_expire_ms,
                external_id=item.external_id,
            )
            q.add_result(result)
            if by_path:
                q.remove_result(result)  # delivered to a path waiter: consumed (v1)
            elif by_id:
                result.deleted = True  # delivered to an id waiter: flagged (v2)
                q.note_result_consumed(result)
        q.depart(item, "acked", now)
        if by_id or by_path:
            delivered = ResultSet(_RESULT_COLUMNS, [(value, "success", str(item.id), None)])
            for waiter in q.waiters.take(item.id, item.path):
                q.post_commit.append(partial(waiter.callback, delivered))
        return ResultSet(cmd.RESULT_COLUMNS, [(True,)])

    def _cancel_reason(self, item: Item, now: int) -> Reason:
        """``cancelled_stalled`` / ``cancelled_orphaned`` when the prefix's latest TO_CANCEL
        timeouts select the item now, else ``cancelled``."""
        state = self._q.prefixes.get(item.prefix)
        if state is not None and state.last_to_cancel is not None:
            heartbeat_timeout, orphaned_timeout = state.last_to_cancel
            if item.stalled(now, heartbeat_timeout):
                return "cancelled_stalled"
            if item.orphaned_at(now, orphaned_timeout):
                return "cancelled_orphaned"
        return "cancelled"

    def queue_cancel(self, cmd: QueueCancel, process_id: str | None, now: int) -> ResultSet:
        """§3.5: delete in any status; no result, no waiter woken."""
        item = self._q.find(bound_fields.key(cmd.key))
        if item is None:
            return ResultSet(cmd.RESULT_COLUMNS, [])
        self._q.depart(item, self._cancel_reason(item, now), now)
        return ResultSet(cmd.RESULT_COLUMNS, [(item.payload, item.extra)])

    def queue_get(self, cmd: QueueGet, process_id: str | None, now: int) -> ResultSet:
        item = self._q.find(bound_fields.key(cmd.key))
        rows: list[Row] = [] if item is None else [(item.payload, item.extra)]
        return ResultSet(cmd.RESULT_COLUMNS, rows)

    def queue_heartbeat(self, cmd: QueueHeartbeat, process_id: str | None, now: int) -> ResultSet:
        """§3.7: any status; an unknown key is ignored; ``expire`` is unchanged."""
        item = self._q.find(bound_fields.key(cmd.key))
        if item is not None:
            state = self._q.prefixes.ensure(item.prefix)
            state.beat(item, now)
            self._q.note_item(item)
        return EMPTY

    def queue_merge_extra(
        self, cmd: QueueMergeExtra, process_id: str | None, now: int
    ) -> ResultSet:
        """§3.8: a validated verbatim first write, then a shallow merge (see
        :mod:`.extra_json`); the argument and the merged text are capped at
        ``max_extra_bytes``, checked before the item changes."""
        item = self._q.find(bound_fields.key(cmd.key))
        json_text = bound_fields.text(cmd.json)
        if item is not None:
            check_extra(self._limits, json_text, "MERGE_EXTRA argument")
            merged = merge_extra(item.extra, json_text)
            if merged is not None and merged is not json_text:
                check_extra(self._limits, merged, "merged extra")
            if self._q.snapshots:
                self._q.note_change(item)
            self._q.set_extra(item, merged)
            self._q.note_item(item)
        return EMPTY

    def listed(self, prefix: str, status: str | None, process_id: str | None) -> Iterator[Item]:
        """LIST/PENDING/ACTIVE items in order (§3.9), exclusive filter applied, lazily."""
        q = self._q
        state = q.prefixes.get(prefix)
        if state is None:
            return iter(())
        items: Iterator[Item]
        if status == "active":
            items = iter(state.active.values())
        else:
            live = q.live
            items = (live(id_) for id_ in state.pending_ids())
            if status is None and state.active:
                ranked = sorted(state.active.values(), key=_rank)
                items = heapq.merge(items, ranked, key=_rank)
        return (item for item in items if item.visible_to(process_id))

    def list_rows(
        self, prefix: str, status: str | None, with_payload: bool, process_id: str | None,
        limit: int | None = None,
    ) -> list[Row]:
        rows: list[Row] = []
        for item in self.listed(prefix, status, process_id):
            if limit is not None and len(rows) >= limit:
                break
            row: Row = (item.key, str(item.id), item.status, item.extra)
            rows.append((*row, item.payload) if with_payload else row)
        return rows

    def queue_list(
        self, cmd: QueueList, process_id: str | None, now: int
    ) -> ResultSet | RowStream:
        """§3.9: a frame, or above one work budget a stream of the rows at this step
        (:mod:`.list_snapshot`), so no listing holds the event loop for long."""
        prefix = bound_fields.text(cmd.prefix)
        state = self._q.prefixes.get(prefix)
        status = cmd.status
        if state is not None:
            count = ((0 if status == "active" else state.pending_count)
                     + (0 if status == "pending" else state.active_count))
            budget = self._limits.work_budget
            if count > budget:
                q = self._q
                slices = ListStream(state, status, cmd.with_payload, process_id,
                                    by_id=q.id_map(), next_id=q.peek_next_id(),
                                    snapshots=q.snapshots, budget=budget)
                return RowStream(cmd.result_columns(), slices)
        rows = self.list_rows(prefix, status, cmd.with_payload, process_id)
        return ResultSet(cmd.result_columns(), rows)

    def queue_to_cancel(self, cmd: QueueToCancel, process_id: str | None, now: int) -> ResultSet:
        """§3.10 with §8 rule 2: elapsed ms compared strictly; ascending id; no filter."""
        prefix = bound_fields.text(cmd.prefix)
        heartbeat_timeout = bound_fields.opt_num(cmd.heartbeat_timeout)
        orphaned_timeout = bound_fields.opt_num(cmd.orphaned_timeout)
        q = self._q
        state = q.prefixes.get(prefix)
        if state is None:
            return ResultSet(cmd.RESULT_COLUMNS, [])
        if heartbeat_timeout is not None:
            # TO_CANCEL and STALLED select items to cancel; ORPHANED only lists, so a
            # manual CANCEL after it stays ``cancelled`` (the remover names the reason)
            timeouts = (heartbeat_timeout, orphaned_timeout)
            if state.last_to_cancel != timeouts:
                state.last_to_cancel = timeouts
                q.note_prefix(state)
        ids: set[int] = set()
        if heartbeat_timeout is not None:
            ids.update(state.stalled_ids(now, heartbeat_timeout))
        if orphaned_timeout is not None:
            for id_ in state.old_pending_ids(now, orphaned_timeout):
                item = q.by_id(id_)
                if item is not None and item.orphaned is None:
                    ids.add(id_)
            ids.update(state.own_orphaned_ids(now))
        rows: list[Row] = []
        for id_ in sorted(ids):
            item = q.by_id(id_)
            if item is not None:
                rows.append((item.key, str(id_)))
        return ResultSet(cmd.RESULT_COLUMNS, rows)

    def _lookup_result(self, key: int | str, external_id: str | None) -> Result | None:
        """RESULT's lookup (§3.11); consuming by path sets the deleted flag."""
        results = self._q.results
        if isinstance(key, int):
            result = results.by_id(key)
            if result is not None and external_id is not None and result.external_id != external_id:
                raise InvalidParameterValue(
                    f"Queue result (id = {key}) external_id mismatch: expected {external_id}, "
                    f"got {rust_option(result.external_id)}"
                )
            return result
        if external_id is not None:
            result = results.by_path_ext(key, external_id)
            if result is not None:
                return result
        result = results.latest(key)
        if result is None or result.deleted:
            return None
        result.deleted = True
        self._q.note_result_consumed(result)
        return result

    def queue_result(self, cmd: QueueResult, process_id: str | None, now: int) -> ResultSet:
        result = self._lookup_result(bound_fields.key(cmd.key), bound_fields.opt_text(cmd.external_id))
        return ResultSet(cmd.RESULT_COLUMNS, [] if result is None else [result.row()])

    def queue_result_blocking(
        self, cmd: QueueResultBlocking, callback: Callback, now: int
    ) -> ResultSet | Waiter:
        """§3.12 steps 1 and 2: the RESULT lookup at once, else a registered waiter."""
        key = bound_fields.key(cmd.key)
        bound_fields.num(cmd.timeout)
        result = self._lookup_result(key, None)
        if result is not None:
            return ResultSet(cmd.RESULT_COLUMNS, [result.row()])
        return self._q.waiters.register(key, callback)

    def queue_truncate(self, cmd: QueueTruncate, process_id: str | None, now: int) -> ResultSet:
        self._q.truncate(now)
        return EMPTY

    def queue_purge(self, cmd: QueuePurge, process_id: str | None, now: int) -> ResultSet:
        """QUEUE PURGE (§3.14): the prefix's items (or only pending / active ones); no
        waiter, no result; detached at once and released in slices (see
        :meth:`~cubequeue.storage.queue.QueueState.purge`)."""
        removed = self._q.purge(bound_fields.text(cmd.prefix), cmd.status, now)
        return ResultSet(cmd.RESULT_COLUMNS, [(removed,)])


def _rank(item: Item) -> int:
    return item.rank

