"""Optional store capabilities (storage/capabilities.py): found once where a store is
built or attached, never probed on the statement path; the server's slot reads through to
the attached store without rebinding its own methods or a ``__getattr__`` fallback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cubequeue.grammar import parse
from cubequeue.grammar.results import ResultSet
from cubequeue.server.config import Config
from cubequeue.server.executor import Executor
from cubequeue.server.sql import PlainSession
from cubequeue.server.stores import StoreSlot, build_store, close_store, store_ready
from cubequeue.storage.capabilities import (
    Capabilities,
    Closes,
    DefersWork,
    ReportsAvailability,
    ReportsPersistence,
    capabilities_of,
)
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable.errors import StartingUp
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

T0 = 1_700_000_000_000


class Recording:
    """A store with the seam only, recording every read of anything else."""

    kind = "recording"

    def __init__(self) -> None:
        inner = MemoryStore(FakeClock(T0))
        self.execute = inner.execute
        self.result_blocking = inner.result_blocking
        self.system_table = inner.system_table
        self.stats = inner.stats
        self.now_ms = inner.now_ms
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.__dict__["reads"].append(name)
        raise AttributeError(name)


class Plain:
    """A store with the seam only: none of the optional capabilities."""

    kind = "plain"

    def __init__(self) -> None:
        self._inner = MemoryStore(FakeClock(T0))
        self.execute = self._inner.execute
        self.result_blocking = self._inner.result_blocking
        self.system_table = self._inner.system_table
        self.stats = self._inner.stats
        self.now_ms = self._inner.now_ms


def test_the_statement_path_reads_only_execute_from_a_store_without_capabilities() -> None:
    """Before, every step probed ``has_deferred`` with getattr (through the slot's
    ``__getattr__`` when the store was attached)."""
    store = Recording()
    executor = Executor(store)  # type: ignore[arg-type]
    store.reads.clear()  # what the executor checked once, when it was given the store
    for _ in range(3):
        executor.run(parse("QUEUE ADD PRIORITY 1 'q:1' 'p'"))
        executor.statement("QUEUE GET 'q:1'", PlainSession(server_version="15", user="u"), None)
    assert store.reads == []


def test_the_executor_runs_on_the_attached_store_not_through_the_slot() -> None:
    slot = StoreSlot("memory", FakeClock(T0))
    executor = Executor(slot)
    with pytest.raises(StartingUp):
        executor.run(parse("QUEUE GET 'q:1'"))
    store = MemoryStore(FakeClock(T0))
    slot.attach(store)
    assert executor.store is store
    result = executor.run(parse("QUEUE ADD PRIORITY 1 'q:1' 'p'"))
    assert isinstance(result, ResultSet)
    other = Plain()
    slot.attach(other)  # type: ignore[arg-type]
    assert executor.store is other


def test_the_slot_rebinds_nothing_and_reads_through_no_fallback() -> None:
    slot = StoreSlot("memory", FakeClock(T0))
    store = MemoryStore(FakeClock(T0))
    slot.attach(store)
    assert not {"execute", "result_blocking", "system_table", "stats", "now_ms"} & set(vars(slot))
    assert slot.execute == store.execute and slot.system_table == store.system_table
    with pytest.raises(AttributeError):
        slot.has_deferred  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError):
        slot.info_rows  # type: ignore[attr-defined]  # noqa: B018


def test_capabilities_are_found_once_when_the_store_is_attached() -> None:
    slot = StoreSlot("memory", FakeClock(T0))
    assert slot.capabilities == Capabilities()
    store = MemoryStore(FakeClock(T0))
    slot.attach(store)
    caps = slot.capabilities
    assert caps.defers_work is store and caps.closes is None and caps.persistence is None
    assert caps.availability is None and caps.pool_health is None
    assert capabilities_of(slot) is caps
    assert capabilities_of(Plain()) == Capabilities()
    seen: list[tuple[object, Capabilities]] = []
    slot.watch(lambda s, c: seen.append((s, c)))
    plain = Plain()
    slot.attach(plain)  # type: ignore[arg-type]
    assert seen == [(store, caps), (plain, Capabilities())]


def test_the_durable_store_declares_its_capabilities(tmp_path: Path) -> None:
    config = Config(data_dir=str(tmp_path))  # type: ignore[call-arg]
    slot = build_store(config, clock=FakeClock(T0), limits=Limits())

    async def main() -> None:
        from cubequeue.server.stores import open_store

        assert not store_ready(slot)
        await open_store(slot)
        durable = slot.target
        assert isinstance(durable, DefersWork) and isinstance(durable, Closes)
        assert isinstance(durable, ReportsAvailability) and isinstance(durable, ReportsPersistence)
        caps = slot.capabilities
        assert caps.persistence is durable and caps.closes is durable
        assert store_ready(slot)
        durable.log.failed = "disk gone"  # type: ignore[attr-defined]
        assert not store_ready(slot)
        durable.log.failed = None  # type: ignore[attr-defined]
        await close_store(slot)

    asyncio.run(main())
