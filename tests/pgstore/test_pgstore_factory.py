"""server/stores.py: the --store value picks the store."""

from __future__ import annotations

import asyncio

import pytest

from cubequeue.grammar.commands import QueueAdd
from cubequeue.server.stores import build_store, close_store, open_store, parse_store, store_ready
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres import PostgresStore
from cubequeue.storage.store import Store


@pytest.mark.parametrize("text", ["memory", " MEMORY "])
def test_memory(text: str) -> None:
    assert parse_store(text) == "memory"
    assert isinstance(build_store(text, clock=FakeClock(), limits=Limits()), Store)


@pytest.mark.parametrize("text", ["postgresql://u@h:5432/db", "postgres://h/db",
                                  "postgresql:///db?host=/run/postgresql"])
def test_postgresql_urls(text: str) -> None:
    assert parse_store(text) == text
    store = build_store(text, clock=FakeClock(), limits=Limits(), session_dsn="postgresql://h/s")
    assert isinstance(store, PostgresStore) and store.kind == "postgresql"


@pytest.mark.parametrize("text", ["redis://h", "", "postgresql://", "mem"])
def test_bad_values(text: str) -> None:
    with pytest.raises(ValueError):
        parse_store(text)


def test_open_serve_close(fresh_dsn: str) -> None:
    async def body() -> None:
        store = build_store(fresh_dsn, clock=FakeClock(), limits=Limits())
        await open_store(store)
        try:
            assert store_ready(store)
            result = store.execute(QueueAdd(path="q:a", payload="p"))
            assert not isinstance(result, type(None))
            assert (await result).rows == [("1", True, 1)]  # type: ignore[misc]
        finally:
            await close_store(store)
        memory = build_store("memory", clock=FakeClock(), limits=Limits())
        await open_store(memory)
        assert store_ready(memory)
        await close_store(memory)

    asyncio.run(asyncio.wait_for(body(), 60))
