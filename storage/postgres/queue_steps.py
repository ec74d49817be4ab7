"""The QUEUE statements on PostgreSQL: checks in the front end, the step in one cq_* call.

What needs no database (argument checks, the payload caps, the exact error texts) runs
here first and in the in-memory store's order, so a refused statement never reaches the
database; the step itself is one function call of ``migrations/0002_functions.sql`` and
so one transaction. Rows come back in the in-memory store's shapes and types (ids as
text in QUEUE frames, Cube Store's convention).
"""

from __future__ import annotations

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
    QueueRetrieve,
    QueueToCancel,
    QueueTruncate,
)
from cubequeue.grammar.errors import (
    InternalError,
    InvalidParameterValue,
    LimitExceeded,
    QueueError,
)
from cubequeue.grammar.results import EMPTY, ResultSet, Row
from cubequeue.storage import bound_fields as bound
from cubequeue.storage.checks import (
    RETRIEVE_NEEDS_PID,
    check_add,
    check_extra,
    check_payload,
    rust_option,
)
from cubequeue.storage.extra_json import merge_extra
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.database import Database
from cubequeue.storage.queue_item import path_key, path_prefix

__all__ = ["KeyArgs", "QueueSteps", "key_args", "text_arg"]

_I64_MAX = 2**63 - 1
#: an id no item has (ids start at 1): what an id outside bigint is looked up as
_NO_ID = -1
#: MERGE_EXTRA's compare-and-swap rounds before giving up on a hot item
_SWAP_ROUNDS = 32
_STATUS = {None: None, "pending": 0, "active": 1}

_RESULT_COLUMNS = QueueResult.RESULT_COLUMNS

_ADD = "select * from cq_add($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
_RETRIEVE = "select * from cq_retrieve($1, $2, $3, $4)"
_ACK = "select cq_ack($1, $2, $3, $4, $5)"
_CANCEL = "select * from cq_cancel($1, $2, $3)"
_GET = "select * from cq_get($1, $2)"
_HEARTBEAT = "select cq_heartbeat($1, $2)"
_EXTRA_MERGE = "select * from cq_extra_merge($1, $2, $3)"
_EXTRA_SWAP = "select cq_extra_swap($1, $2, $3)"
_LIST = "select * from cq_list($1, $2, $3, $4)"
_TO_CANCEL = "select * from cq_to_cancel($1, $2, $3)"
_RESULT = "select * from cq_result($1, $2, $3, $4, $5)"
_TRUNCATE = "select cq_truncate()"
_PURGE = "select cq_purge($1, $2)"

KeyArgs = tuple[int | None, str | None, str | None]


def text_arg(value: str, what: str) -> str:
    """PostgreSQL text cannot hold U+0000; say so instead of failing in the driver."""
    if "\x00" in value:
        raise InvalidParameterValue(
            f"{what} contains a NUL character (U+0000), which the postgresql store cannot keep"
        )
    return value


def key_args(key: int | str) -> KeyArgs:
    """(id, path, prefix) arguments for a QKEY: an int is an id, a str a path."""
    if isinstance(key, int):
        return (key if 0 < key <= _I64_MAX else _NO_ID), None, None
    text_arg(key, "the path")
    return None, key, path_prefix(key)


class QueueSteps:
    """One method per QUEUE statement (RESULT_BLOCKING lives in the store: it waits)."""

    __slots__ = ("_db", "_limits")

    def __init__(self, db: Database, limits: Limits) -> None:
        self._db = db
        self._limits = limits

    async def _add(self, cmd: QueueAdd | QueueAddAndRetrieve, process_id: str | None,
                   concurrency: int | None) -> Row:
        path = text_arg(bound.text(cmd.path), "the path")
        payload = text_arg(bound.text(cmd.payload), "the payload")
        priority = bound.num(cmd.priority)
        orphaned = bound.opt_num(cmd.orphaned)
        external_id = bound.opt_text(cmd.external_id)
        check_add(self._limits, cmd.exclusive, external_id, process_id, payload)
        if external_id is not None:
            text_arg(external_id, "the external id")
        if process_id is not None:
            text_arg(process_id, "the process id")
        row = await self._db.fetchrow(
            cmd.tag, _ADD, path, path_prefix(path), path_key(path), payload, priority, orphaned,
            process_id, cmd.exclusive, external_id, self._limits.max_items, concurrency,
        )
        full = row[6]
        if full is not None:
            limit = self._limits.max_items
            raise LimitExceeded(
                f"queue is full: {full} items queued, the limit is {limit} (--max-items={limit})"
            )
        return tuple(row)

    # -- statements ---------------------------------------------------------------------

    async def queue_add(self, cmd: QueueAdd, process_id: str | None) -> ResultSet:
        id_, added, pending, *_ = await self._add(cmd, process_id, None)
        return ResultSet(cmd.RESULT_COLUMNS, [(str(id_), added, pending)])

    async def queue_add_and_retrieve(
        self, cmd: QueueAddAndRetrieve, process_id: str | None
    ) -> ResultSet:
        concurrency = bound.num(cmd.concurrency)
        id_, added, pending, active, payload, extra, _ = await self._add(
            cmd, process_id, concurrency
        )
        return ResultSet(cmd.RESULT_COLUMNS, [(str(id_), added, pending, active, payload, extra)])

    async def queue_retrieve(self, cmd: QueueRetrieve, process_id: str | None) -> ResultSet:
        path = text_arg(bound.text(cmd.path), "the path")
        concurrency = bound.num(cmd.concurrency)
        outcome, payload, extra, pending, active, id_ = await self._db.fetchrow(
            cmd.tag, _RETRIEVE, path, path_prefix(path), concurrency, process_id
        )
        if outcome == "needs_pid":
            raise InvalidParameterValue(RETRIEVE_NEEDS_PID)
        if outcome == "ok":
            return ResultSet(cmd.RESULT_COLUMNS, [(payload, extra, pending, active, str(id_))])
        if not cmd.extended:
            return ResultSet(cmd.RESULT_COLUMNS, [])
        return ResultSet(cmd.RESULT_COLUMNS, [(None, None, pending, active, None)])

    async def queue_ack(self, cmd: QueueAck, process_id: str | None) -> ResultSet:
        key = bound.key(cmd.key)
        value = bound.opt_text(cmd.result)
        if value is not None:
            check_payload(self._limits, value, "result")
            text_arg(value, "the result")
        id_, path, prefix = key_args(key)
        ok = await self._db.fetchval(
            cmd.tag, _ACK, id_, path, prefix, value, self._limits.results_expire_ms
        )
        return ResultSet(cmd.RESULT_COLUMNS, [(bool(ok),)])

    async def queue_cancel(self, cmd: QueueCancel, process_id: str | None) -> ResultSet:
        rows = await self._db.fetch(cmd.tag, _CANCEL, *key_args(bound.key(cmd.key)))
        return ResultSet(cmd.RESULT_COLUMNS, [tuple(r) for r in rows])

    async def queue_get(self, cmd: QueueGet, process_id: str | None) -> ResultSet:
        id_, path, _ = key_args(bound.key(cmd.key))
        rows = await self._db.fetch(cmd.tag, _GET, id_, path)
        return ResultSet(cmd.RESULT_COLUMNS, [tuple(r) for r in rows])

    async def queue_heartbeat(self, cmd: QueueHeartbeat, process_id: str | None) -> ResultSet:
        id_, path, _ = key_args(bound.key(cmd.key))
        await self._db.fetch(cmd.tag, _HEARTBEAT, id_, path)
        return EMPTY

    async def queue_merge_extra(self, cmd: QueueMergeExtra, process_id: str | None) -> ResultSet:
        """Read, merge here (serde_json's rules, :mod:`~cubequeue.storage.extra_json`), then
        compare-and-swap; a lost race re-reads. The argument is checked first and, when
        valid, sent with the read: an item without extra stores it (verbatim, the first
        write) in that one call. A missing item ignores the JSON, valid or not, as in memory."""
        id_, path, _ = key_args(bound.key(cmd.key))
        json_text = text_arg(bound.text(cmd.json), "the JSON")
        first: str | None = None
        refused: QueueError | None = None
        try:
            check_extra(self._limits, json_text, "MERGE_EXTRA argument")
            first = merge_extra(None, json_text)  # the argument itself, once validated
        except QueueError as exc:  # told only if the item is there
            refused = exc
        for _ in range(_SWAP_ROUNDS):
            rows = await self._db.fetch(cmd.tag, _EXTRA_MERGE, id_, path, first)
            if not rows:
                return EMPTY
            item_id, old, stored = rows[0]
            if stored:
                return EMPTY
            if refused is not None:
                raise refused
            merged = merge_extra(old, json_text)
            if merged is not None and merged is not json_text:
                check_extra(self._limits, merged, "merged extra")
            if await self._db.fetchval(cmd.tag, _EXTRA_SWAP, item_id, old, merged):
                return EMPTY
        raise InternalError(f"QUEUE MERGE_EXTRA lost {_SWAP_ROUNDS} races for one item")

    async def queue_list(self, cmd: QueueList, process_id: str | None) -> ResultSet:
        prefix = text_arg(bound.text(cmd.prefix), "the prefix")
        rows = await self._db.fetch(
            cmd.tag, _LIST, prefix, _STATUS[cmd.status], process_id, cmd.with_payload
        )
        out: list[Row] = []
        for key, id_, status, extra, payload in rows:
            row: Row = (key, str(id_), "active" if status else "pending", extra)
            out.append((*row, payload) if cmd.with_payload else row)
        return ResultSet(cmd.result_columns(), out)

    async def queue_to_cancel(self, cmd: QueueToCancel, process_id: str | None) -> ResultSet:
        prefix = text_arg(bound.text(cmd.prefix), "the prefix")
        rows = await self._db.fetch(
            cmd.tag, _TO_CANCEL, prefix, bound.opt_num(cmd.heartbeat_timeout),
            bound.opt_num(cmd.orphaned_timeout),
        )
        return ResultSet(cmd.RESULT_COLUMNS, [(key, str(id_)) for key, id_ in rows])

    async def lookup_result(self, command: str, key: int | str, external_id: str | None,
                            *, lock: bool) -> tuple[Row | None, int]:
        """RESULT's lookup: (the row or None, the ack-marker watermark)."""
        id_, path, prefix = key_args(key)
        found, value, rid, ext, mismatch, watermark, _ = await self._db.fetchrow(
            command, _RESULT, id_, path, prefix, external_id, lock
        )
        if mismatch:
            raise InvalidParameterValue(
                f"Queue result (id = {key}) external_id mismatch: expected {external_id}, "
                f"got {rust_option(ext)}"
            )
        return ((value, "success", str(rid), ext) if found else None), watermark

    async def queue_result(self, cmd: QueueResult, process_id: str | None) -> ResultSet:
        external_id = bound.opt_text(cmd.external_id)
        if external_id is not None:
            text_arg(external_id, "the external id")
        row, _ = await self.lookup_result(cmd.tag, bound.key(cmd.key), external_id, lock=False)
        return ResultSet(cmd.RESULT_COLUMNS, [] if row is None else [row])

    async def queue_truncate(self, cmd: QueueTruncate, process_id: str | None) -> ResultSet:
        await self._db.fetch(cmd.tag, _TRUNCATE)
        return EMPTY

    async def queue_purge(self, cmd: QueuePurge, process_id: str | None) -> ResultSet:
        prefix = text_arg(bound.text(cmd.prefix), "the prefix")
        removed = await self._db.fetchval(cmd.tag, _PURGE, prefix, _STATUS[cmd.status])
        return ResultSet(cmd.RESULT_COLUMNS, [(removed,)])

    @staticmethod
    def delivered(value: str | None, id_: int) -> ResultSet:
        """The row a waiter gets from an ACK's event (no external id, as Cube Store)."""
        return ResultSet(_RESULT_COLUMNS, [(value, "success", str(id_), None)])
