"""State records: what an object now is, or that it is gone.

Every record is a plain tuple whose first element is its kind, so a store step builds one
with no allocation beyond the tuple and a frame encodes a list of them in one C call.
Records hold states with absolute values (timestamps in ms, the merged extra text, the
incremented value), never operations, so replaying one twice, or over a snapshot taken
while steps ran, converges on the same state (ZooKeeper's fuzzy snapshots, Redis logging
``INCRBYFLOAT`` as a ``SET`` of the result).

:func:`validate` is the load-time gate: a record read back from disk is checked field by
field with the limits the live commands enforce, and one that fails is quarantined with
its reason instead of being applied.
"""

from __future__ import annotations

from typing import Final

from cubequeue.storage.limits import MAX_EXTERNAL_ID_BYTES, MAX_PROCESS_ID_BYTES, Limits
from cubequeue.storage.record_kinds import (
    CACHE_DEL,
    CACHE_PUT,
    CLOCK,
    ID_RESERVE,
    ITEM_DEL,
    ITEM_PUT,
    ITEM_SET,
    PREFIX,
    PURGE,
    RESULT_DEL,
    RESULT_FLAG,
    RESULT_PUT,
    TRAILER,
    TRUNCATE,
)
from cubequeue.storage.sizes import utf8_len

__all__ = [
    "CACHE_DEL",
    "CACHE_PUT",
    "CLOCK",
    "ID_RESERVE",
    "ITEM_DEL",
    "ITEM_PUT",
    "ITEM_SET",
    "KIND_NAMES",
    "PREFIX",
    "PURGE",
    "PURGE_STATUSES",
    "RESULT_DEL",
    "RESULT_FLAG",
    "RESULT_PUT",
    "TRAILER",
    "TRUNCATE",
    "InvalidRecord",
    "Record",
    "plain_item_puts",
    "validate",
]

# Field layouts (the kinds live in cubequeue.storage.record_kinds):
#: (ITEM_PUT, id, path, payload, priority, created, orphaned, expire, process_id,
#:  exclusive, external_id, extra, heartbeat, activated): a queue item, whole
#: (ITEM_SET, id, activated, heartbeat, extra): an item's mutable fields (RETRIEVE,
#: HEARTBEAT, MERGE_EXTRA); ignored when the item is absent
#: (ITEM_DEL, id): the item left (ACK, CANCEL)
#: (RESULT_PUT, id, path, value, expire, external_id, deleted): an acknowledged result
#: (RESULT_FLAG, id): RESULT by path consumed it (Cube Store's "ready to delete")
#: (RESULT_DEL, id): the result left (replaced by a newer one, delivered to a waiter)
#: (CACHE_PUT, row id, path, value, expire): a cache entry (SET, INCR's resulting value)
#: (CACHE_DEL, path)
#: (TRUNCATE, table): "queue" (items and results) or "cache"
#: (ID_RESERVE, high): queue ids below ``high`` may have been handed out
#: (CLOCK, now, offset): the store's clock when a frame began, and the test-clock offset
#: (TRAILER, last lsn, objects, next id, next cache id, max timestamp): a snapshot's end
#: (PURGE, table, prefix, status, bound): QUEUE PURGE ("queue": the prefix's items with
#:  an id below ``bound``, only pending or active ones when ``status`` says so) or CACHE
#:  PURGE ("cache": the entries under the prefix with a row id below ``bound``), as one
#:  record whatever their number; ``bound`` spares what was added after it
#: (PREFIX, prefix, concurrency, heartbeat timeout, orphaned timeout): what a live queue
#:  prefix remembers (the last RETRIEVE CONCURRENCY, the last TO_CANCEL / STALLED
#:  timeouts, a null heartbeat timeout meaning none was given), logged when a value
#:  changes; all null: the prefix was forgotten (its last row left)
#: what a PURGE's status may say (None: every item of the prefix)
PURGE_STATUSES: Final = frozenset({None, "pending", "active"})

KIND_NAMES: Final = {
    ITEM_PUT: "item_put", ITEM_SET: "item_set", ITEM_DEL: "item_del",
    RESULT_PUT: "result_put", RESULT_FLAG: "result_flag", RESULT_DEL: "result_del",
    CACHE_PUT: "cache_put", CACHE_DEL: "cache_del", TRUNCATE: "truncate",
    ID_RESERVE: "id_reserve", CLOCK: "clock", TRAILER: "trailer", PURGE: "purge",
    PREFIX: "prefix",
}

#: a record as it travels: its kind, then its fields
Record = tuple[object, ...]
#: a record as decoded (a tuple from marshal, a list from JSON)
Fields = list[object] | tuple[object, ...]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_TABLES = frozenset({"queue", "cache"})


class InvalidRecord(ValueError):
    """A record read back that the live commands would never have produced."""


def _int(value: object, what: str, lo: int = _I64_MIN) -> int:
    if type(value) is not int or not lo <= value <= _I64_MAX:
        raise InvalidRecord(f"{what} must be an integer in [{lo}, 2^63), not {value!r:.40}")
    return value


def _opt_int(value: object, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _str(value: object, what: str, max_bytes: int | None = None) -> str:
    if type(value) is not str:
        raise InvalidRecord(f"{what} must be text, not {type(value).__name__}")
    if max_bytes is not None and len(value) > max_bytes // 4 and utf8_len(value) > max_bytes:
        raise InvalidRecord(f"{what} of {utf8_len(value)} bytes exceeds {max_bytes}")
    return value


def _opt_str(value: object, what: str, max_bytes: int | None = None) -> str | None:
    return None if value is None else _str(value, what, max_bytes)


def _arity(record: Fields, n: int) -> None:
    if len(record) != n:
        raise InvalidRecord(f"{KIND_NAMES[record[0]]} has {len(record) - 1} fields, not {n - 1}")  # type: ignore[index]  # kind checked by the caller


def validate(raw: object, limits: Limits) -> Record:
    """``raw`` (a decoded value: a tuple from marshal, a list from JSON) as a record, or
    :class:`InvalidRecord` saying why."""
    if (type(raw) is not tuple and type(raw) is not list) or not raw:
        raise InvalidRecord("a record must be a non-empty array")
    kind = raw[0]
    if type(kind) is not int or kind not in KIND_NAMES:
        raise InvalidRecord(f"unknown record kind {kind!r:.20}")
    check = _CHECKS[kind]
    check(raw, limits)
    return raw if type(raw) is tuple else tuple(raw)


def _item_put(r: Fields, limits: Limits) -> None:
    """ITEM_PUT dominates a recovery (one per queued item), so the common shape is
    accepted by one expression; anything it does not accept takes the field-by-field
    path, which gives the reason (the two accept exactly the same records)."""
    if len(r) == 14:
        (_, id_, path, payload, priority, created, orphaned, expire, process_id, exclusive,
         external_id, extra, heartbeat, activated) = r
        short = limits.max_payload_bytes // 4
        if (type(id_) is int and 1 <= id_ <= _I64_MAX and type(path) is str
                and type(payload) is str and len(payload) <= short
                and type(priority) is int and _I64_MIN <= priority <= _I64_MAX
                and type(created) is int and _I64_MIN <= created <= _I64_MAX
                and type(expire) is int and _I64_MIN <= expire <= _I64_MAX
                and (orphaned is None
                     or (type(orphaned) is int and _I64_MIN <= orphaned <= _I64_MAX))
                and (process_id is None or (type(process_id) is str
                                            and len(process_id) <= MAX_PROCESS_ID_BYTES // 4))
                and type(exclusive) is bool
                and (external_id is None or (type(external_id) is str
                                             and len(external_id) <= MAX_EXTERNAL_ID_BYTES // 4))
                and (extra is None or (type(extra) is str and len(extra) <= short))
                and heartbeat is None and activated is None):
            return
    _item_put_checked(r, limits)


_NONE = type(None)
_INT = frozenset({int})
_STR = frozenset({str})
_OPT_INT = frozenset({int, _NONE})
_OPT_STR = frozenset({str, _NONE})


def _ints_in(column: tuple[object, ...], lo: int) -> bool:
    return (set(map(type, column)) == _INT
            and min(column) >= lo and max(column) <= _I64_MAX)  # type: ignore[type-var, operator]  # ints, checked above


def _opt_ints_in(column: tuple[object, ...]) -> bool:
    kinds = set(map(type, column))
    if not kinds <= _OPT_INT:
        return False
    if int not in kinds:
        return True
    values = [v for v in column if v is not None]
    return min(values) >= _I64_MIN and max(values) <= _I64_MAX  # type: ignore[type-var, operator]  # ints, checked above


def _opt_texts_within(column: tuple[object, ...], chars: int) -> bool:
    kinds = set(map(type, column))
    if not kinds <= _OPT_STR:
        return False
    return str not in kinds or max(len(v) for v in column if v is not None) <= chars  # type: ignore[arg-type]  # str, checked above


def plain_item_puts(values: list[object], limits: Limits) -> bool:
    """Every value is an ITEM_PUT of the common shape :func:`_item_put` accepts in one
    expression (a pending item within the short limits), checked a column at a time by
    C loops (``zip``, ``map``, ``min``/``max``) instead of an expression per record: the
    frames of a snapshot and of a burst of ADDs are all of this shape, and this check is
    a third of their replay. False means "check record by record", never "invalid"."""
    if set(map(type, values)) != {tuple} or set(map(len, values)) != {14}:  # type: ignore[arg-type]  # tuples, checked first
        return False
    (kinds, ids, paths, payloads, priorities, created, orphaned, expire, process_ids,
     exclusive, external_ids, extras, heartbeats, activated) = zip(*values, strict=True)
    short = limits.max_payload_bytes // 4
    return (set(map(type, kinds)) == _INT and set(kinds) == {ITEM_PUT}
            and _ints_in(ids, 1) and set(map(type, paths)) == _STR
            and set(map(type, payloads)) == _STR and max(map(len, payloads)) <= short
            and _ints_in(priorities, _I64_MIN) and _ints_in(created, _I64_MIN)
            and _ints_in(expire, _I64_MIN) and _opt_ints_in(orphaned)
            and _opt_texts_within(process_ids, MAX_PROCESS_ID_BYTES // 4)
            and set(map(type, exclusive)) == {bool}
            and _opt_texts_within(external_ids, MAX_EXTERNAL_ID_BYTES // 4)
            and _opt_texts_within(extras, short)
            and set(map(type, heartbeats)) == {_NONE} and set(map(type, activated)) == {_NONE})


def _item_put_checked(r: Fields, limits: Limits) -> None:
    _arity(r, 14)
    _int(r[1], "item id", 1)
    _str(r[2], "path")
    _str(r[3], "payload", limits.max_payload_bytes)
    _int(r[4], "priority")
    _int(r[5], "created")
    _opt_int(r[6], "orphaned")
    _int(r[7], "expire")
    _opt_str(r[8], "process_id", MAX_PROCESS_ID_BYTES)
    if type(r[9]) is not bool:
        raise InvalidRecord("exclusive must be a boolean")
    _opt_str(r[10], "external_id", MAX_EXTERNAL_ID_BYTES)
    _opt_str(r[11], "extra", limits.max_payload_bytes)
    _check_claim(r[12], r[13])


def _check_claim(heartbeat: object, activated: object) -> None:
    _opt_int(heartbeat, "heartbeat")
    _opt_int(activated, "activated")
    if activated is not None and heartbeat is None:
        raise InvalidRecord("an active item must have a heartbeat")


def _item_set(r: Fields, limits: Limits) -> None:
    _arity(r, 5)
    _int(r[1], "item id", 1)
    _check_claim(r[3], r[2])
    _opt_str(r[4], "extra", limits.max_payload_bytes)


def _by_id(r: Fields, limits: Limits) -> None:
    _arity(r, 2)
    _int(r[1], "id", 1)


def _result_put(r: Fields, limits: Limits) -> None:
    _arity(r, 7)
    _int(r[1], "result id", 1)
    _str(r[2], "path")
    _str(r[3], "result", limits.max_payload_bytes)
    _int(r[4], "expire")
    _opt_str(r[5], "external_id", MAX_EXTERNAL_ID_BYTES)
    if type(r[6]) is not bool:
        raise InvalidRecord("deleted must be a boolean")


def _cache_put(r: Fields, limits: Limits) -> None:
    _arity(r, 5)
    _int(r[1], "cache row id", 1)
    _str(r[2], "cache key")
    value = _str(r[3], "cache value")
    if utf8_len(value) >= limits.cache_max_entry_bytes:
        raise InvalidRecord(
            f"cache value of {utf8_len(value)} bytes reaches --cache-max-entry-bytes"
        )
    _opt_int(r[4], "expire")


def _cache_del(r: Fields, limits: Limits) -> None:
    _arity(r, 2)
    _str(r[1], "cache key")


def _truncate(r: Fields, limits: Limits) -> None:
    _arity(r, 2)
    if r[1] not in _TABLES:
        raise InvalidRecord(f"truncate of unknown table {r[1]!r:.20}")


def _id_reserve(r: Fields, limits: Limits) -> None:
    _arity(r, 2)
    _int(r[1], "reserved id", 1)


def _clock(r: Fields, limits: Limits) -> None:
    _arity(r, 3)
    _int(r[1], "clock")
    _int(r[2], "clock offset", 0)


def _trailer(r: Fields, limits: Limits) -> None:
    _arity(r, 6)
    for i, what in enumerate(("lsn", "objects", "next id", "next cache id", "max timestamp")):
        _int(r[i + 1], what, 0 if i < 2 else _I64_MIN)


def _purge(r: Fields, limits: Limits) -> None:
    _arity(r, 5)
    if r[1] not in _TABLES:
        raise InvalidRecord(f"purge of unknown table {r[1]!r:.20}")
    _str(r[2], "purge prefix")
    if r[3] not in PURGE_STATUSES or (r[1] == "cache" and r[3] is not None):
        raise InvalidRecord(f"purge status {r[3]!r:.20} is not pending, active or null")
    _int(r[4], "purge bound", 1)


def _prefix(r: Fields, limits: Limits) -> None:
    _arity(r, 5)
    _str(r[1], "prefix")
    _opt_int(r[2], "last concurrency")
    _opt_int(r[3], "last heartbeat timeout")
    _opt_int(r[4], "last orphaned timeout")
    if r[3] is None and r[4] is not None:
        raise InvalidRecord("an orphaned timeout without a heartbeat timeout")


_CHECKS = {
    ITEM_PUT: _item_put, ITEM_SET: _item_set, ITEM_DEL: _by_id,
    RESULT_PUT: _result_put, RESULT_FLAG: _by_id, RESULT_DEL: _by_id,
    CACHE_PUT: _cache_put, CACHE_DEL: _cache_del, TRUNCATE: _truncate,
    ID_RESERVE: _id_reserve, CLOCK: _clock, TRAILER: _trailer, PURGE: _purge,
    PREFIX: _prefix,
}
