"""Reading the store through its seam (``storage/interface.py``), whatever it returns.

The in-memory store answers at once; the PostgreSQL store hands back awaitables, and a
large table may come as a :class:`RowStream` (columns now, rows in slices). The console
awaits what must be awaited and walks a stream lazily, so one code path serves every
store. Only ``system_table``, ``stats`` and the clock are used: the console is read-only.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from cubequeue.grammar.results import Column, ResultSet, Row
from cubequeue.storage.interface import RowStream, Table
from cubequeue.storage.stats import StoreStats

__all__ = ["ConsoleStore", "Rows", "StoreReader", "resolve"]

_T = TypeVar("_T")


class ConsoleStore(Protocol):
    """The part of :class:`~cubequeue.storage.interface.StoreBackend` the console reads."""

    @property
    def kind(self) -> str: ...

    def system_table(self, name: str) -> Table: ...

    def stats(self) -> StoreStats | Awaitable[StoreStats]: ...


@dataclass(frozen=True, slots=True)
class Rows:
    columns: tuple[Column, ...]
    rows: Iterable[Row]


def _chain(slices: Iterator[list[Row]]) -> Iterator[Row]:
    for part in slices:
        yield from part


async def resolve(value: _T | Awaitable[_T]) -> _T:
    if inspect.isawaitable(value):
        return await value
    return value


class StoreReader:
    """The store, its kind and its clock, as the console needs them."""

    def __init__(self, store: ConsoleStore, now_ms: Callable[[], int]) -> None:
        self._store = store
        self._now_ms = now_ms
        #: "memory", "durable" or "postgresql" (StoreBackend.kind)
        self.kind = store.kind

    def now_ms(self) -> int:
        return self._now_ms()

    async def table(self, name: str) -> Rows:
        result = await resolve(self._store.system_table(name))
        if isinstance(result, RowStream):
            return Rows(result.columns, _chain(result.slices))
        assert isinstance(result, ResultSet)
        return Rows(result.columns, result.rows)

    async def stats(self) -> StoreStats:
        return await resolve(self._store.stats())
