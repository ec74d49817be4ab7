"""The (connection_id, message_id) table that makes a resent message run at most once.

Cube's client re-sends every unanswered message with the same ids after a reconnect
after a reconnect, so a QUEUE ADD, ACK or CACHE INCR whose answer was lost would
otherwise run twice. Cube Store's rules (``http/mod.rs``), which this table keeps:

* first arrival → the caller runs the message (:data:`RUN`);
* arrival while it still runs → the new socket is subscribed and gets the same answer
  (:data:`JOINED`);
* arrival after completion → the cached answer is sent to it (:class:`Cached`).

Where cubequeue is stricter: Cube Store forgets an answer as soon as it has been handed
to a socket that is still open, so an answer written into a connection that dies a
moment later is lost, and the resend runs the statement again. Here an answer is
forgotten only when the endpoint confirms that the client has read it (a pong to a ping
sent after the answer, see ``endpoint.py``), or when it is older than ``--ws-dedup-ttl``
Entries still running never expire: the task owns them and always ends
(RESULT_BLOCKING is capped by ``--max-blocking-timeout``).

Pure bookkeeping: no asyncio, the clock is injected, subscribers are opaque.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

__all__ = ["JOINED", "RUN", "Cached", "DedupTable", "Key"]

S = TypeVar("S")
Key = tuple[str, int]


class _Outcome:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


RUN: Final = _Outcome("RUN")
JOINED: Final = _Outcome("JOINED")


@dataclass(frozen=True, slots=True)
class Cached:
    answer: bytes


@dataclass(slots=True)
class _Entry(Generic[S]):
    subscribers: list[S] = field(default_factory=list)
    answer: bytes | None = None
    done_at: float = 0.0


class DedupTable(Generic[S]):
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[Key, _Entry[S]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Key) -> bool:
        return key in self._entries

    def begin(self, key: Key, subscriber: S) -> _Outcome | Cached:
        """Register an arrival; the caller runs the message only on :data:`RUN`."""
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry([subscriber])
            return RUN
        if entry.answer is None:
            entry.subscribers.append(subscriber)
            return JOINED
        return Cached(entry.answer)

    def complete(self, key: Key, answer: bytes) -> list[S]:
        """Store the answer; returns every socket waiting for it (first arrival first)."""
        entry = self._entries.get(key)
        if entry is None:  # only if the table was cleared meanwhile
            return []
        subscribers, entry.subscribers = entry.subscribers, []
        entry.answer = answer
        entry.done_at = self._clock()
        return subscribers

    def abandon(self, key: Key) -> list[S]:
        """The run ended without an answer (cancelled at shutdown): drop the entry."""
        entry = self._entries.pop(key, None)
        return [] if entry is None else entry.subscribers

    def confirmed(self, key: Key) -> None:
        """The client has read the answer: it will not resend, so forget it."""
        entry = self._entries.get(key)
        if entry is not None and entry.answer is not None:
            del self._entries[key]

    def sweep(self) -> int:
        """Drop answers older than the TTL; returns how many were dropped."""
        horizon = self._clock() - self.ttl_s
        stale = [k for k, e in self._entries.items() if e.answer is not None and e.done_at <= horizon]
        for key in stale:
            del self._entries[key]
        return len(stale)
