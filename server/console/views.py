"""What the console shows, as JSON-ready dicts built from the store's own tables.

Pure functions: each takes the rows the store returned (``system.queue_prefixes``,
``system.queue``, ``system.queue_log``) and the store's ``now``, and returns plain dicts
of ``str | int | bool | None``. Nothing here reads a clock or the store, so every view is
tested with hand-made rows, and a front end over the PostgreSQL store shows the same.

Rows are read by column name, so a column the store adds later (for example the timeouts
the client last used in ``QUEUE TO_CANCEL``) reaches the JSON without a change here; the
stalled / orphan-prone flags use those timeouts when the store reports them and Cube's
defaults otherwise (QueryQueue: a 120 s heartbeat timeout and a 120 s orphaned timeout),
saying which in ``timeouts_from``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from cubequeue.grammar.results import Column, Value

__all__ = [
    "CUBE_HEARTBEAT_TIMEOUT_MS",
    "CUBE_ORPHANED_TIMEOUT_MS",
    "Json",
    "departures_view",
    "item_preview",
    "items_view",
    "prefix_of",
    "prefixes_view",
    "truncate_text",
]

Json: TypeAlias = dict[str, object]

#: Cube's QueryQueue defaults (heartBeatInterval 30 s x 4, orphanedTimeout 120 s)
CUBE_HEARTBEAT_TIMEOUT_MS = 120_000
CUBE_ORPHANED_TIMEOUT_MS = 120_000
#: the queue_prefixes columns a store fills in once it remembers TO_CANCEL's timeouts
HEARTBEAT_TIMEOUT_COLUMN = "last_heartbeat_timeout_ms"
ORPHANED_TIMEOUT_COLUMN = "last_orphaned_timeout_ms"


def _records(columns: Sequence[Column], rows: Iterable[Sequence[Value]]) -> list[dict[str, Value]]:
    names = [c.name for c in columns]
    return [dict(zip(names, row, strict=True)) for row in rows]


def _int(value: Value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def prefix_of(path: str) -> str:
    """A path's prefix: everything before its last ``:`` (paths are ``prefix:key``)."""
    head, sep, _ = path.rpartition(":")
    return head if sep else ""


def utf8_size(text: str | None) -> int:
    return 0 if text is None else len(text.encode("utf-8", "surrogatepass"))


def truncate_text(text: str | None, limit: int) -> tuple[str | None, bool]:
    """At most ``limit`` characters, and whether anything was cut."""
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit], True


def _flags(record: dict[str, Value]) -> Json:
    """Stalled: an active item's heartbeat older than the heartbeat timeout. Orphan-prone:
    the oldest pending item older than the orphaned timeout (what TO_CANCEL would return)."""
    hb_timeout = _int(record.get(HEARTBEAT_TIMEOUT_COLUMN))
    orphan_timeout = _int(record.get(ORPHANED_TIMEOUT_COLUMN))
    told = hb_timeout is not None or orphan_timeout is not None
    if hb_timeout is None:
        hb_timeout = CUBE_HEARTBEAT_TIMEOUT_MS
    if orphan_timeout is None:
        orphan_timeout = CUBE_ORPHANED_TIMEOUT_MS
    hb_age = _int(record.get("max_heartbeat_age_ms"))
    oldest = _int(record.get("oldest_pending_ms"))
    return {
        "heartbeat_timeout_ms": hb_timeout,
        "orphaned_timeout_ms": orphan_timeout,
        "timeouts_from": "client" if told else "cube-defaults",
        "stalled": hb_age is not None and hb_age > hb_timeout,
        "orphan_prone": oldest is not None and oldest > orphan_timeout,
    }


def prefixes_view(columns: Sequence[Column], rows: Iterable[Sequence[Value]], *,
                  filter_text: str = "", limit: int) -> Json:
    """The deepest ``limit`` prefixes (pending + active, then name) matching the filter
    (a case-insensitive substring), with the stalled / orphan-prone flags."""
    needle = filter_text.casefold()
    records = [r for r in _records(columns, rows)
               if not needle or needle in str(r.get("prefix", "")).casefold()]
    records.sort(key=lambda r: (-((_int(r.get("pending")) or 0) + (_int(r.get("active")) or 0)),
                                str(r.get("prefix", ""))))
    shown: list[Json] = []
    for record in records[:limit]:
        row: Json = dict(record)
        row.update(_flags(record))
        shown.append(row)
    return {"matched": len(records), "shown": len(shown), "filter": filter_text,
            "prefixes": shown}


def _claim_order(record: dict[str, Value]) -> tuple[int, int, int, int]:
    """Where an item stands: active ones first (ascending id, as ``QUEUE ACTIVE``), then
    pending ones in the order they will be claimed (priority descending, then older
    first, then ascending id, as ``QUEUE PENDING``; docs/dialect.md §3.9)."""
    queue_id = _int(record.get("queue_id")) or 0
    if record.get("status") == "active":
        return (0, 0, 0, queue_id)
    return (1, -(_int(record.get("priority")) or 0), _int(record.get("created")) or 0, queue_id)


def items_view(columns: Sequence[Column], rows: Iterable[Sequence[Value]], *, prefix: str,
               now_ms: int, limit: int) -> Json:
    """One prefix's items from ``system.queue`` in claim order (:func:`_claim_order`):
    ages instead of instants, sizes instead of payloads (the payload itself comes from
    :func:`item_preview`). Only the first ``limit`` are kept while reading, so a prefix
    of a million items costs one pass and a heap of ``limit``."""
    names = [c.name for c in columns]
    at = names.index("prefix")
    total = 0
    matching: list[dict[str, Value]] = []
    for row in rows:  # a large queue: compare one column before building a record
        if row[at] != prefix:
            continue
        total += 1
        matching.append(dict(zip(names, row, strict=True)))
        if len(matching) >= 4 * limit + 64:  # keep memory bounded on a huge prefix
            matching = heapq.nsmallest(limit, matching, key=_claim_order)
    first = heapq.nsmallest(limit, matching, key=_claim_order)
    items: list[Json] = []
    for record in first:
        created = _int(record.get("created"))
        heartbeat = _int(record.get("heartbeat"))
        payload = record.get("value")
        extra = record.get("extra")
        items.append({
            "id": record.get("queue_id"),
            "key": record.get("id"),
            "status": record.get("status"),
            "priority": record.get("priority"),
            "age_ms": None if created is None else now_ms - created,
            "heartbeat_age_ms": None if heartbeat is None else now_ms - heartbeat,
            "process_id": record.get("process_id"),
            "external_id": record.get("external_id"),
            "exclusive": record.get("exclusive"),
            "payload_bytes": utf8_size(payload if isinstance(payload, str) else None),
            "extra_bytes": utf8_size(extra if isinstance(extra, str) else None),
        })
    return {"prefix": prefix, "total": total, "shown": len(items), "items": items}


def item_preview(columns: Sequence[Column], rows: Iterable[Sequence[Value]], *, queue_id: int,
                 limit: int) -> Json | None:
    """One item's payload and extra, each cut to ``limit`` characters; None when gone."""
    names = [c.name for c in columns]
    at = names.index("queue_id")
    for row in rows:
        if row[at] != queue_id:
            continue
        record = dict(zip(names, row, strict=True))
        payload = record.get("value")
        extra = record.get("extra")
        payload_text, payload_cut = truncate_text(payload if isinstance(payload, str) else None,
                                                  limit)
        extra_text, extra_cut = truncate_text(extra if isinstance(extra, str) else None, limit)
        return {
            "id": queue_id,
            "key": record.get("id"),
            "prefix": record.get("prefix"),
            "payload": payload_text,
            "payload_truncated": payload_cut,
            "extra": extra_text,
            "extra_truncated": extra_cut,
            "limit": limit,
        }
    return None


def departures_view(columns: Sequence[Column], rows: Iterable[Sequence[Value]], *,
                    prefix: str | None, now_ms: int, limit: int) -> Json:
    """The latest ``limit`` departures from ``system.queue_log`` (newest first), of one
    prefix or of all."""
    picked: list[Json] = []
    for record in reversed(_records(columns, rows)):
        path = record.get("path")
        if prefix is not None and (not isinstance(path, str) or prefix_of(path) != prefix):
            continue
        at = _int(record.get("at"))
        row: Json = dict(record)
        row["ago_ms"] = None if at is None else now_ms - at
        picked.append(row)
        if len(picked) >= limit:
            break
    return {"prefix": prefix, "shown": len(picked), "departures": picked}
