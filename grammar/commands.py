"""Typed, immutable command objects: what the parser builds and the store executes.

Each class is one statement form of ``docs/dialect.md`` §3-§5 (plus cubequeue's own
statements of §8 and the operator features). Fields hold final values, or a
:class:`Param` where the statement text had a placeholder (``$n`` or ``?``); binding the
parameters (:func:`cubequeue.grammar.bind`) yields the same command the literal text
would have produced.

A queue key (``QKEY`` of §1.3) is ``int`` for a numeric id and ``str`` for a path.

Every command declares its result schema up front (:meth:`Command.result_columns`), so
the PostgreSQL Describe message can answer without running anything. ``tag`` is the
CommandComplete tag stem (``QUEUE ADD`` → ``QUEUE ADD 1``).

Each class also carries what every store would otherwise list again: ``step``, the name
of the method that runs it in each store (each store builds its table from these names
once, at construction: ``storage/steps.py``), and whether it is a client's write
(``mutating``) that may grow the stored state (``grows``), which the durable store reads
to refuse writes while its log is stopped or its disk is over the cap. :data:`COMMANDS`
is the one list of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Literal

from cubequeue.grammar.results import Column, ColumnType, columns, id_column

__all__ = [
    "COMMANDS",
    "CacheGet",
    "CacheIncr",
    "CacheKeys",
    "CachePurge",
    "CacheRemove",
    "CacheSet",
    "CacheTruncate",
    "Command",
    "Key",
    "Param",
    "QueueAck",
    "QueueAdd",
    "QueueAddAndRetrieve",
    "QueueCancel",
    "QueueGet",
    "QueueHeartbeat",
    "QueueList",
    "QueueMergeExtra",
    "QueuePurge",
    "QueueResult",
    "QueueResultBlocking",
    "QueueRetrieve",
    "QueueToCancel",
    "QueueTruncate",
    "Slot",
    "SysCachestore",
    "SysClock",
]

S, I, B, T = ColumnType.STRING, ColumnType.INT, ColumnType.BOOLEAN, ColumnType.TIMESTAMP  # noqa: E741 - short column-type aliases

Key = int | str
StatusFilter = Literal["pending", "active"] | None


class Slot(enum.Enum):
    """The type a placeholder takes from its grammar slot (dialect doc §8 rule 5)."""

    INT8 = "int8"  # priority, orphaned, ttl, concurrency, timeouts, clock ms
    TEXT = "text"  # paths, prefixes, payloads, keys, external ids, JSON
    KEY = "key"  # a queue key: a path, or an id when typed/cast as an integer
    RESULT = "result"  # ACK's result: text, where NULL means "no result"


@dataclass(frozen=True, slots=True)
class Param:
    """A placeholder: ``index`` is 1-based (``$1``, or the n-th ``?``)."""

    index: int
    slot: Slot
    #: an explicit cast in the statement text (``$1::int8`` → ``"int8"``), lower-cased
    cast: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    tag: ClassVar[str] = ""
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = ()
    #: the method that runs it, by name, in every store (``queue_add``)
    step: ClassVar[str] = ""
    #: a client's write: refused while a durable log is stopped (QUEUE RESULT, which may
    #: consume a result, counts as a read; SYS CACHESTORE's actions are maintenance)
    mutating: ClassVar[bool] = False
    #: may make the stored state larger: refused above ``--max-disk-bytes`` (ACK, CANCEL,
    #: RESULT and REMOVE keep working); always ``mutating`` too
    grows: ClassVar[bool] = False

    def result_columns(self) -> tuple[Column, ...]:
        return self.RESULT_COLUMNS


#: the columns holding a numeric queue id are ``int8`` on the PostgreSQL wire (§8 rule 6)
_ID = id_column("id")
_QUEUE_ID = id_column("queue_id")
_ADD_COLUMNS = columns(_ID, ("added", B), ("pending", I))
_PAYLOAD_EXTRA = columns(("payload", S), ("extra", S))
_RESULT_COLUMNS = columns(("payload", S), ("type", S), _ID, ("external_id", S))
_LIST_COLUMNS = columns(("id", S), _QUEUE_ID, ("status", S), ("extra", S))
_NAME_VALUE = columns(("name", S), ("value", S), ("description", S))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueAdd(Command):
    tag: ClassVar[str] = "QUEUE ADD"
    step: ClassVar[str] = "queue_add"
    mutating: ClassVar[bool] = True
    grows: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _ADD_COLUMNS
    path: str | Param
    payload: str | Param
    priority: int | Param = 0
    orphaned: int | Param | None = None  # seconds
    external_id: str | Param | None = None
    exclusive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueAddAndRetrieve(Command):
    tag: ClassVar[str] = "QUEUE ADD_AND_RETRIEVE"
    step: ClassVar[str] = "queue_add_and_retrieve"
    mutating: ClassVar[bool] = True
    grows: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _ADD_COLUMNS + columns(
        ("active", S), ("payload", S), ("extra", S)
    )
    path: str | Param
    payload: str | Param
    concurrency: int | Param
    priority: int | Param = 0
    orphaned: int | Param | None = None
    external_id: str | Param | None = None
    exclusive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRetrieve(Command):
    tag: ClassVar[str] = "QUEUE RETRIEVE"
    step: ClassVar[str] = "queue_retrieve"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(
        ("payload", S), ("extra", S), ("pending", I), ("active", S), _ID
    )
    path: str | Param
    concurrency: int | Param = 1
    extended: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueAck(Command):
    tag: ClassVar[str] = "QUEUE ACK"
    step: ClassVar[str] = "queue_ack"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("success", B))
    key: Key | Param
    result: str | Param | None  # None: the keyword NULL, no result stored


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueCancel(Command):
    tag: ClassVar[str] = "QUEUE CANCEL"
    step: ClassVar[str] = "queue_cancel"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _PAYLOAD_EXTRA
    key: Key | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueGet(Command):
    tag: ClassVar[str] = "QUEUE GET"
    step: ClassVar[str] = "queue_get"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _PAYLOAD_EXTRA
    key: Key | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueHeartbeat(Command):
    tag: ClassVar[str] = "QUEUE HEARTBEAT"
    step: ClassVar[str] = "queue_heartbeat"
    mutating: ClassVar[bool] = True
    key: Key | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueMergeExtra(Command):
    tag: ClassVar[str] = "QUEUE MERGE_EXTRA"
    step: ClassVar[str] = "queue_merge_extra"
    mutating: ClassVar[bool] = True
    grows: ClassVar[bool] = True
    key: Key | Param
    json: str | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueList(Command):
    """LIST (status None), PENDING or ACTIVE."""

    tag: ClassVar[str] = "QUEUE LIST"
    step: ClassVar[str] = "queue_list"
    prefix: str | Param
    status: StatusFilter = None
    with_payload: bool = False

    def result_columns(self) -> tuple[Column, ...]:
        if self.with_payload:
            return _LIST_COLUMNS + columns(("payload", S))
        return _LIST_COLUMNS


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueToCancel(Command):
    """TO_CANCEL (both timeouts), STALLED (heartbeat only) or ORPHANED (orphaned only)."""

    tag: ClassVar[str] = "QUEUE TO_CANCEL"
    step: ClassVar[str] = "queue_to_cancel"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("id", S), _QUEUE_ID)
    prefix: str | Param
    heartbeat_timeout: int | Param | None = None  # ms
    orphaned_timeout: int | Param | None = None  # ms


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueResult(Command):
    tag: ClassVar[str] = "QUEUE RESULT"
    step: ClassVar[str] = "queue_result"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _RESULT_COLUMNS
    key: Key | Param
    external_id: str | Param | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueResultBlocking(Command):
    tag: ClassVar[str] = "QUEUE RESULT_BLOCKING"
    step: ClassVar[str] = "queue_result_blocking"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = _RESULT_COLUMNS
    key: Key | Param
    timeout: int | Param  # ms


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueTruncate(Command):
    tag: ClassVar[str] = "QUEUE TRUNCATE"
    step: ClassVar[str] = "queue_truncate"
    mutating: ClassVar[bool] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuePurge(Command):
    """cubequeue: ``QUEUE PURGE [PENDING | ACTIVE] <prefix>``."""

    tag: ClassVar[str] = "QUEUE PURGE"
    step: ClassVar[str] = "queue_purge"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("removed", I))
    prefix: str | Param
    status: StatusFilter = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSet(Command):
    tag: ClassVar[str] = "CACHE SET"
    step: ClassVar[str] = "cache_set"
    mutating: ClassVar[bool] = True
    grows: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("success", B))
    key: str | Param
    value: str | Param
    nx: bool = False
    ttl: int | Param | None = None  # seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheGet(Command):
    tag: ClassVar[str] = "CACHE GET"
    step: ClassVar[str] = "cache_get"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("value", S))
    key: str | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheKeys(Command):
    tag: ClassVar[str] = "CACHE KEYS"
    step: ClassVar[str] = "cache_keys"
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("key", S))
    pattern: str | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRemove(Command):
    tag: ClassVar[str] = "CACHE REMOVE"
    step: ClassVar[str] = "cache_remove"
    mutating: ClassVar[bool] = True
    key: str | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTruncate(Command):
    tag: ClassVar[str] = "CACHE TRUNCATE"
    step: ClassVar[str] = "cache_truncate"
    mutating: ClassVar[bool] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheIncr(Command):
    tag: ClassVar[str] = "CACHE INCR"
    step: ClassVar[str] = "cache_incr"
    mutating: ClassVar[bool] = True
    grows: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("value", S))
    key: str | Param


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePurge(Command):
    """cubequeue: ``CACHE PURGE <prefix>``, same prefix rule as CACHE KEYS."""

    tag: ClassVar[str] = "CACHE PURGE"
    step: ClassVar[str] = "cache_purge"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(("removed", I))
    prefix: str | Param


#: ``wipe`` is cubequeue's: empty everything (durable mode also writes an empty snapshot
#: and prunes the older files, so the data directory shrinks at once).
CachestoreAction = Literal["healthcheck", "info", "compaction", "eviction", "persist", "wipe"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SysCachestore(Command):
    tag: ClassVar[str] = "SYS CACHESTORE"
    step: ClassVar[str] = "sys_cachestore"
    action: CachestoreAction

    def result_columns(self) -> tuple[Column, ...]:
        return _NAME_VALUE if self.action in ("info", "eviction") else ()


ClockAction = Literal["show", "advance", "freeze", "resume"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SysClock(Command):
    """cubequeue: ``SYS CLOCK [ADVANCE <ms> | FREEZE | RESUME]`` (``--test-clock`` only)."""

    tag: ClassVar[str] = "SYS CLOCK"
    step: ClassVar[str] = "sys_clock"
    mutating: ClassVar[bool] = True
    RESULT_COLUMNS: ClassVar[tuple[Column, ...]] = columns(
        ("now", T), ("offset_ms", I), ("frozen", B)
    )
    action: ClockAction = "show"
    ms: int | Param | None = None


#: every statement form, once (the stores build their step tables from it)
COMMANDS: tuple[type[Command], ...] = (
    QueueAdd,
    QueueAddAndRetrieve,
    QueueRetrieve,
    QueueAck,
    QueueCancel,
    QueueGet,
    QueueHeartbeat,
    QueueMergeExtra,
    QueueList,
    QueueToCancel,
    QueueResult,
    QueueResultBlocking,
    QueueTruncate,
    QueuePurge,
    CacheSet,
    CacheGet,
    CacheKeys,
    CacheRemove,
    CacheTruncate,
    CacheIncr,
    CachePurge,
    SysCachestore,
    SysClock,
)
