"""server/stores.py: --store and --data-dir pick the store; the slot answers 57P03 until
it is open; the options refuse what cannot work together."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cubequeue.grammar.commands import QueueAdd
from cubequeue.server.config import Config
from cubequeue.server.options import ConfigError, config_from, parse_store
from cubequeue.server.stores import (
    StartupRefused,
    StoreSlot,
    build_store,
    close_store,
    open_store,
    store_ready,
)
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable.errors import StartingUp
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres import PostgresStore
from cubequeue.storage.store import MemoryStore


def slot_for(**fields: object) -> StoreSlot:
    return build_store(Config(**fields), clock=FakeClock(), limits=Limits())  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["memory", " MEMORY "])
def test_memory_is_attached_at_once(text: str) -> None:
    assert parse_store(text) == "memory"
    slot = slot_for(store=parse_store(text))
    assert isinstance(slot.target, MemoryStore) and store_ready(slot) and slot.kind == "memory"
    assert slot.execute == slot.target.execute  # the bound method itself: no delegation


@pytest.mark.parametrize("text", ["postgresql://u@h:5432/db", "postgres://h/db",
                                  "postgresql:///db?host=/run/postgresql"])
def test_postgresql_urls_answer_57p03_until_open(text: str) -> None:
    assert parse_store(text) == text
    slot = slot_for(store=text, store_session_dsn="postgresql://h/s")
    assert slot.target is None and slot.kind == "postgresql" and not store_ready(slot)
    with pytest.raises(StartingUp) as err:
        slot.execute(QueueAdd(path="q:a", payload="p"))
    assert err.value.sqlstate == "57P03"


@pytest.mark.parametrize("text", ["redis://h", "", "postgresql://", "mem"])
def test_bad_values(text: str) -> None:
    with pytest.raises(ValueError):
        parse_store(text)


@pytest.mark.parametrize(("flags", "named"), [
    ({"store": "redis://h"}, "--store"),
    ({"store_session_dsn": "postgresql://h/s"}, "--store-session-dsn"),
    ({"store": "postgresql://h/db", "data_dir": "/tmp/x"}, "--data-dir"),
])
def test_options_refuse_with_one_line_naming_the_option(flags: dict[str, object],
                                                         named: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from(flags, {})
    assert named in str(err.value) and "\n" not in str(err.value)


def test_env_variable_names_the_store() -> None:
    cfg = config_from({}, {"CUBEQUEUE_STORE": "postgres://db.internal/cube"})
    assert cfg.store == "postgres://db.internal/cube"


def test_open_serve_close(fresh_dsn: str) -> None:
    async def body() -> None:
        slot = slot_for(store=fresh_dsn)
        await open_store(slot)
        try:
            assert isinstance(slot.target, PostgresStore) and store_ready(slot)
            result = slot.execute(QueueAdd(path="q:a", payload="p"))
            assert (await result).rows == [("1", True, 1)]  # type: ignore[union-attr,misc]
            slot.stats()  # the first call samples in the background
            for _ in range(200):
                if slot.stats().items_total == 1:
                    break
                await asyncio.sleep(0.01)
            assert slot.stats().items_total == 1
        finally:
            await close_store(slot)

    asyncio.run(asyncio.wait_for(body(), 60))


def test_durable_opens_and_a_locked_data_dir_is_refused(tmp_path: Path) -> None:
    async def body() -> None:
        first = slot_for(data_dir=str(tmp_path))
        assert first.kind == "durable" and not store_ready(first)
        await open_store(first)
        try:
            assert store_ready(first) and first.kind == "durable"
            second = slot_for(data_dir=str(tmp_path))
            with pytest.raises(StartupRefused) as err:
                await open_store(second)
            assert str(tmp_path) in str(err.value) and "\n" not in str(err.value)
        finally:
            await close_store(first)

    asyncio.run(asyncio.wait_for(body(), 60))
