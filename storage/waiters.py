"""RESULT_BLOCKING waiters (``docs/dialect.md`` §3.12, §8 rule 13).

Waiters are plain callbacks: the store never imports asyncio, the server's
callback resolves its own future. A waiter is registered under an id or a path, is called
at most once, and :meth:`Waiter.cancel` withdraws it without leaking its slot.
"""

from __future__ import annotations

from collections.abc import Callable

from cubequeue.grammar.results import ResultSet

__all__ = ["Callback", "Waiter", "Waiters"]

Callback = Callable[[ResultSet], None]


class Waiter:
    """A registered RESULT_BLOCKING callback; :meth:`cancel` is idempotent."""

    __slots__ = ("_bucket", "_key", "_owner", "callback")

    def __init__(self, owner: Waiters, bucket: dict[int | str, dict[Waiter, None]],
                 key: int | str, callback: Callback) -> None:
        self._owner: Waiters | None = owner
        self._bucket = bucket
        self._key = key
        self.callback = callback

    @property
    def pending(self) -> bool:
        """Still registered: neither woken nor cancelled."""
        return self._owner is not None

    def cancel(self) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        group = self._bucket.get(self._key)
        if group is not None:
            group.pop(self, None)
            if not group:
                del self._bucket[self._key]
        owner.count -= 1


class Waiters:
    """Waiters by id key and by path key (§3.12 step 3)."""

    __slots__ = ("_by_id", "_by_path", "count")

    def __init__(self) -> None:
        self._by_id: dict[int | str, dict[Waiter, None]] = {}
        self._by_path: dict[int | str, dict[Waiter, None]] = {}
        self.count = 0

    def register(self, key: int | str, callback: Callback) -> Waiter:
        bucket = self._by_id if isinstance(key, int) else self._by_path
        waiter = Waiter(self, bucket, key, callback)
        bucket.setdefault(key, {})[waiter] = None
        self.count += 1
        return waiter

    def has(self, id_: int, path: str) -> tuple[bool, bool]:
        """Whether anyone waits on (this id, this path)."""
        return id_ in self._by_id, path in self._by_path

    def take(self, id_: int, path: str) -> list[Waiter]:
        """Unregister and return every waiter on ``id_`` or on ``path``."""
        taken = list(self._by_id.pop(id_, {})) + list(self._by_path.pop(path, {}))
        for waiter in taken:
            waiter._owner = None
        self.count -= len(taken)
        return taken
