"""One queue item, and the path → (prefix, key) split shared by every queue index.

An item is Cube Store's QueueItems row plus its payload row (``docs/dialect.md`` §2.2), kept as
one slotted object so a queued item costs a few hundred bytes beyond its path and payload
(at most 1 KiB). Times are integer milliseconds (§8 rule 2).
"""

from __future__ import annotations

from cubequeue.storage.sizes import utf8_len

__all__ = ["ID_MASK", "Item", "pack", "path_key", "path_prefix", "unpack_time", "utf8_excess"]

#: i64 values are biased into [0, 2**64) so packed keys order like the signed values
_BIAS = 1 << 63
ID_MASK = (1 << 64) - 1


def pack(time_ms: int, id_: int) -> int:
    """(time, id) as one int ordered like the tuple.

    The sorted indexes hold packed ints instead of tuples: one object per entry instead of
    a tuple plus its members, and one comparison without dereferencing the members, which
    is what keeps the O(log n) steps fast once an index outgrows the CPU caches.
    """
    return ((time_ms + _BIAS) << 64) | id_


def unpack_time(key: int) -> int:
    return (key >> 64) - _BIAS


def path_prefix(path: str) -> str:
    """The prefix of ``path`` for index purposes: before the last ``:``, else ``""`` (§2.1)."""
    prefix, sep, _ = path.rpartition(":")
    return prefix if sep else ""


def utf8_excess(text: str | None) -> int:
    """UTF-8 bytes beyond one a character (0 for ASCII, the usual case, at no cost): a
    row keeps this so its byte size is O(1) (:mod:`.row_sizes`) without encoding again."""
    return 0 if text is None or text.isascii() else utf8_len(text) - len(text)


def path_key(path: str) -> str:
    """The key of ``path``: everything after the last ``:``, or the whole path (§2.1)."""
    return path.rpartition(":")[2]


class Item:
    """A queued item. ``activated`` is None while pending, else the time of its claim.

    The status is derived from ``activated`` (Cube Store's ``finished`` status is never
    used, §2.2). ``prefix`` is the shared string of the item's prefix state, so it costs
    one pointer. ``wide`` is :func:`utf8_excess` of path, payload and extra together.
    ``rank`` is the pending-set key, (-priority, created, id) packed into an int: LIST
    and PENDING order (§3.9, ties by id per §8 rule 2).
    """

    __slots__ = (
        "activated",
        "created",
        "exclusive",
        "expire",
        "external_id",
        "extra",
        "heartbeat",
        "id",
        "orphaned",
        "path",
        "payload",
        "prefix",
        "priority",
        "process_id",
        "wide",
    )

    def __init__(
        self,
        *,
        id: int,
        path: str,
        prefix: str,
        payload: str,
        priority: int,
        created: int,
        orphaned: int | None,
        expire: int,
        process_id: str | None,
        exclusive: bool,
        external_id: str | None,
    ) -> None:
        self.id = id
        self.path = path
        self.prefix = prefix
        self.payload = payload
        self.extra: str | None = None
        self.priority = priority
        self.created = created
        self.heartbeat: int | None = None
        self.orphaned = orphaned
        self.expire = expire
        self.process_id = process_id
        self.exclusive = exclusive
        self.external_id = external_id
        self.activated: int | None = None
        self.wide = (0 if path.isascii() and payload.isascii()
                     else utf8_excess(path) + utf8_excess(payload))

    @property
    def active(self) -> bool:
        return self.activated is not None

    @property
    def status(self) -> str:
        return "pending" if self.activated is None else "active"

    @property
    def key(self) -> str:
        return path_key(self.path)

    @property
    def rank(self) -> int:
        """(-priority, created, id) packed into one int (see :func:`pack`)."""
        return ((_BIAS - 1 - self.priority) << 128) | ((self.created + _BIAS) << 64) | self.id

    def visible_to(self, process_id: str | None) -> bool:
        """LIST/PENDING/ACTIVE filter: an exclusive item with a process id is shown only
        to that process (§3.9)."""
        if self.exclusive and self.process_id is not None:
            return self.process_id == process_id
        return True

    def stalled(self, now: int, heartbeat_timeout: int | None) -> bool:
        """TO_CANCEL's test for an active item (§3.10, strict ``>`` in ms per §8 rule 2)."""
        if heartbeat_timeout is None or self.activated is None:
            return False
        since = self.heartbeat if self.heartbeat is not None else self.created
        return now - since > heartbeat_timeout

    def orphaned_at(self, now: int, orphaned_timeout: int | None) -> bool:
        """TO_CANCEL's test for a pending item: its own ORPHANED time wins (§3.10)."""
        if orphaned_timeout is None or self.activated is not None:
            return False
        if self.orphaned is not None:
            return self.orphaned < now
        return now - self.created > orphaned_timeout
