"""Shared helpers for the queue store tests: a store on a FakeClock and short command
builders, so each test reads like the statement it checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from cubequeue.grammar.commands import (
    Command,
    QueueAck,
    QueueAdd,
    QueueAddAndRetrieve,
    QueueCancel,
    QueueGet,
    QueueHeartbeat,
    QueueList,
    QueueMergeExtra,
    QueueResult,
    QueueResultBlocking,
    QueueRetrieve,
    QueueToCancel,
)
from cubequeue.grammar.results import ResultSet, Row
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.interface import RowStream
from cubequeue.storage.limits import Limits
from cubequeue.storage.queue_log import Departure
from cubequeue.storage.store import MemoryStore
from cubequeue.storage.waiters import Waiter

START = 1_700_000_000_000
HOUR = 3_600_000


@dataclass
class Harness:
    clock: FakeClock
    store: MemoryStore
    departures: list[Departure] = field(default_factory=list)

    def run(self, cmd: Command, pid: str | None = None) -> list[Row]:
        return self.frame(cmd, pid).rows

    def frame(self, cmd: Command, pid: str | None = None) -> ResultSet:
        """The step's frame (a listing streamed above the work budget is collected)."""
        result = self.store.execute(cmd, pid)
        return result.collect() if isinstance(result, RowStream) else result

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    # short forms -------------------------------------------------------------------

    def add(self, path: str, payload: str = "p", pid: str | None = None, **kw: object) -> Row:
        return self.run(QueueAdd(path=path, payload=payload, **kw), pid)[0]  # type: ignore[arg-type]

    def add_retrieve(self, path: str, concurrency: int, payload: str = "p",
                     pid: str | None = None, **kw: object) -> Row:
        cmd = QueueAddAndRetrieve(path=path, payload=payload, concurrency=concurrency, **kw)  # type: ignore[arg-type]
        return self.run(cmd, pid)[0]

    def retrieve(self, path: str, concurrency: int = 1, pid: str | None = None,
                 extended: bool = True) -> list[Row]:
        return self.run(QueueRetrieve(path=path, concurrency=concurrency, extended=extended), pid)

    def ack(self, key: int | str, result: str | None = "r") -> bool:
        value = self.run(QueueAck(key=key, result=result))[0][0]
        assert isinstance(value, bool)
        return value

    def cancel(self, key: int | str) -> list[Row]:
        return self.run(QueueCancel(key=key))

    def get(self, key: int | str) -> list[Row]:
        return self.run(QueueGet(key=key))

    def heartbeat(self, key: int | str) -> None:
        self.run(QueueHeartbeat(key=key))

    def merge(self, key: int | str, json: str) -> None:
        self.run(QueueMergeExtra(key=key, json=json))

    def list(self, prefix: str, status: str | None = None, pid: str | None = None,
             with_payload: bool = False) -> list[Row]:
        return self.run(QueueList(prefix=prefix, status=status, with_payload=with_payload), pid)  # type: ignore[arg-type]

    def to_cancel(self, prefix: str, heartbeat: int | None, orphaned: int | None) -> list[Row]:
        return self.run(
            QueueToCancel(prefix=prefix, heartbeat_timeout=heartbeat, orphaned_timeout=orphaned)
        )

    def result(self, key: int | str, external_id: str | None = None) -> list[Row]:
        return self.run(QueueResult(key=key, external_id=external_id))

    def blocking(self, key: int | str, got: list[ResultSet]) -> ResultSet | Waiter:
        return self.store.result_blocking(QueueResultBlocking(key=key, timeout=1000), got.append)


def harness(limits: Limits | None = None, start: int = START) -> Harness:
    clock = FakeClock(start)
    departures: list[Departure] = []
    store = MemoryStore(clock, limits or Limits(), on_departure=departures.append)
    return Harness(clock, store, departures)
