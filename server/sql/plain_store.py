"""What plain SQL needs of the store, as a Protocol both :mod:`.statements` and :mod:`.select`
type against (its own module so that neither imports the other for it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cubequeue.grammar.results import ResultSet

__all__ = ["PlainStore"]


class PlainStore(Protocol):
    """What plain SQL needs of the store: the system tables and the clock."""

    def system_table(self, name: str) -> ResultSet: ...

    @property
    def clock(self) -> Callable[[], int]: ...
