"""One list of commands: each class carries its step's name and whether it writes, and
every store builds its table from those names at construction (storage/steps.py)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

import pytest

from cubequeue.grammar import commands
from cubequeue.grammar.commands import COMMANDS, Command, QueueResultBlocking, SysClock
from cubequeue.grammar.errors import (
    FeatureNotSupported,
    InsufficientPrivilege,
    InternalError,
    InvalidParameterValue,
)
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.limits import Limits
from cubequeue.storage.postgres.store import PostgresStore
from cubequeue.storage.steps import EXECUTED, find_steps, step_table
from cubequeue.storage.store import MemoryStore
from cubequeue.storage.sys_steps import CACHESTORE_ACTIONS, cachestore_actions, clock_request


def test_commands_lists_every_command_class_once() -> None:
    defined = {cls for _, cls in inspect.getmembers(commands, inspect.isclass)
               if issubclass(cls, Command) and cls is not Command}
    assert set(COMMANDS) == defined
    assert len(COMMANDS) == len(defined)
    assert len({kind.step for kind in COMMANDS}) == len(COMMANDS)
    assert all(kind.step and kind.tag for kind in COMMANDS)
    assert set(EXECUTED) == defined - {QueueResultBlocking}


def test_a_command_that_grows_state_mutates_it() -> None:
    assert all(kind.mutating for kind in COMMANDS if kind.grows)
    assert {kind.__name__ for kind in COMMANDS if kind.grows} == {
        "QueueAdd", "QueueAddAndRetrieve", "QueueMergeExtra", "CacheSet", "CacheIncr"}
    assert {kind.__name__ for kind in COMMANDS if not kind.mutating} == {
        "QueueGet", "QueueList", "QueueToCancel", "QueueResult", "QueueResultBlocking",
        "CacheGet", "CacheKeys", "SysCachestore"}


def test_the_memory_store_has_a_step_for_every_command() -> None:
    store = MemoryStore(FakeClock())
    assert set(store._dispatch) == set(EXECUTED)


def test_the_postgres_store_has_a_step_for_every_command() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none")  # connects only at start()
    assert set(store._dispatch) == set(EXECUTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Unknown(Command):
    tag: ClassVar[str] = "QUEUE UNKNOWN"
    step: ClassVar[str] = "queue_unknown"


class _Steps:
    def queue_unknown(self, cmd: _Unknown, process_id: str | None) -> ResultSet:
        return EMPTY


def test_a_missing_step_fails_at_construction_naming_the_command() -> None:
    with pytest.raises(TypeError, match=r"_Unknown \(queue_unknown\)"):
        step_table(object(), commands=(_Unknown,))
    assert step_table(object(), commands=(_Unknown,), every=False) == {}


def test_two_steps_for_one_command_are_refused() -> None:
    with pytest.raises(TypeError, match="more than one step named 'queue_unknown'"):
        find_steps((_Steps(), _Steps()), (_Unknown,))
    owner = _Steps()
    assert find_steps((owner, object()), (_Unknown,)) == {
        _Unknown: (owner, owner.queue_unknown)}


def test_both_stores_have_every_sys_cachestore_action() -> None:
    memory = MemoryStore(FakeClock())
    postgres = PostgresStore("postgresql://nobody@127.0.0.1:1/none")
    assert set(memory._cachestore) == set(CACHESTORE_ACTIONS) == set(postgres._cachestore)
    assert set(CACHESTORE_ACTIONS) == {
        "healthcheck", "info", "compaction", "eviction", "persist", "wipe"}
    with pytest.raises(TypeError, match="object has no cachestore_healthcheck, "):
        cachestore_actions(object())


def test_sys_clock_checks_are_shared() -> None:
    limits = Limits(clock_control=True)
    assert clock_request(SysClock(action="advance", ms=5), limits) == 5
    assert clock_request(SysClock(action="freeze"), limits) is None
    with pytest.raises(InsufficientPrivilege, match="start the server with --test-clock"):
        clock_request(SysClock(), Limits())
    with pytest.raises(InsufficientPrivilege):
        clock_request(SysClock(), limits, movable=False)
    with pytest.raises(InvalidParameterValue, match="non-negative number of milliseconds"):
        clock_request(SysClock(action="advance", ms=-1), limits)


def test_a_command_without_a_step_is_refused_alike_by_both_stores() -> None:
    blocking = QueueResultBlocking(key="a:b", timeout=1)
    for store in (MemoryStore(FakeClock()),
                  PostgresStore("postgresql://nobody@127.0.0.1:1/none")):
        with pytest.raises(InternalError, match="goes through the store's result_blocking"):
            store.execute(blocking)
        with pytest.raises(FeatureNotSupported, match="_Unknown is not a store command"):
            store.execute(_Unknown())
