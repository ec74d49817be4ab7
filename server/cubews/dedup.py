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
sent after the answer, see ``endpoint.py``), or when it is older than ``--ws-dedup-ttl``.
Entries still running never expire: the task owns them and always ends
(RESULT_BLOCKING is capped by ``--max-blocking-timeout``).

Bounded in bytes: a client that never pongs would otherwise pin every answer for the TTL.
Kept answers are capped per ``connection_id`` (``--max-ws-resend-bytes``) and in total
(``--max-ws-resend-total-bytes``). An answer that does not fit is still sent to the
sockets waiting for it, but only a marker is kept: a resend of it is refused
(:class:`Refused`, an HttpError naming the limit) and never runs a second time. Where
the WebSocket is authenticated, an entry remembers its user, and a resend by another
user is refused too, so one user cannot read another's answers by replaying its ids.

Pure bookkeeping: no asyncio, the clock is injected, subscribers are opaque.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from cubequeue.server.cubews.frame_sink import Frame

__all__ = ["JOINED", "RUN", "Cached", "DedupTable", "Key", "Refused"]

S = TypeVar("S")
Key = tuple[str, int]

#: what an unbounded table would keep: no limit
_UNBOUNDED: Final = 1 << 62


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
    answer: Frame


@dataclass(frozen=True, slots=True)
class Refused:
    """A resend that must not run and has no kept answer: ``reason`` is its HttpError."""

    reason: str


@dataclass(slots=True)
class _Entry(Generic[S]):
    subscribers: list[S] = field(default_factory=list)
    answer: Frame | None = None
    done_at: float = 0.0
    #: the marker of an answer that was sent but not kept (the limit it broke)
    dropped: str | None = None
    #: the authenticated user whose message this is (None: the WebSocket has no auth)
    user: str | None = None

    @property
    def done(self) -> bool:
        return self.answer is not None or self.dropped is not None


def _dropped_reason(key: Key, option: str, limit: int) -> str:
    env = "CUBEQUEUE_" + option[2:].replace("-", "_").upper()
    scope = "for this connection_id" if option == "--max-ws-resend-bytes" else "in total"
    return (
        f"The answer to message {key[1]} of connection {key[0]} was not kept for a resend: "
        f"answers kept {scope} would exceed {option} ({limit} bytes, {env}). The message "
        "ran once and is not run again."
    )


class DedupTable(Generic[S]):
    def __init__(
        self,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_bytes_per_connection: int = _UNBOUNDED,
        max_bytes_total: int = _UNBOUNDED,
    ) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[Key, _Entry[S]] = {}
        self.max_bytes_per_connection = max_bytes_per_connection
        self.max_bytes_total = max_bytes_total
        #: bytes of kept answers, in total and by connection_id
        self.bytes_total = 0
        self._bytes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Key) -> bool:
        return key in self._entries

    def bytes_of(self, connection_id: str) -> int:
        """Bytes of the answers kept for ``connection_id``."""
        return self._bytes.get(connection_id, 0)

    def begin(self, key: Key, subscriber: S, user: str | None = None) -> _Outcome | Cached | Refused:
        """Register an arrival; the caller runs the message only on :data:`RUN`."""
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry([subscriber], None, 0.0, None, user)  # positional: hot
            return RUN
        if entry.user != user:
            return Refused(
                f"connection_id {key[0]} belongs to another user: a message may be resent "
                "only by the user who sent it"
            )
        if entry.dropped is not None:
            return Refused(entry.dropped)
        if entry.answer is None:
            entry.subscribers.append(subscriber)
            return JOINED
        return Cached(entry.answer)

    def complete(self, key: Key, answer: Frame) -> list[S]:
        """Store the answer (or, past a byte limit, its marker); returns every socket
        waiting for it (first arrival first), which all get the answer either way."""
        entry = self._entries.get(key)
        if entry is None:  # only if the table was cleared meanwhile
            return []
        subscribers, entry.subscribers = entry.subscribers, []
        entry.done_at = self._clock()
        size = len(answer)
        held = self._bytes.get(key[0], 0)
        if held + size > self.max_bytes_per_connection:
            entry.dropped = _dropped_reason(key, "--max-ws-resend-bytes",
                                            self.max_bytes_per_connection)
        elif self.bytes_total + size > self.max_bytes_total:
            entry.dropped = _dropped_reason(key, "--max-ws-resend-total-bytes",
                                            self.max_bytes_total)
        else:
            entry.answer = answer
            self._bytes[key[0]] = held + size
            self.bytes_total += size
        return subscribers

    def abandon(self, key: Key) -> list[S]:
        """The run ended without an answer (cancelled at shutdown): drop the entry."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return []
        self._release(key, entry)
        return entry.subscribers

    def confirmed(self, key: Key) -> None:
        """The client has read the answer: it will not resend, so forget it."""
        entry = self._entries.get(key)
        if entry is not None and entry.done:
            del self._entries[key]
            self._release(key, entry)

    def sweep(self) -> int:
        """Drop answers older than the TTL; returns how many were dropped."""
        horizon = self._clock() - self.ttl_s
        stale = [k for k, e in self._entries.items() if e.done and e.done_at <= horizon]
        for key in stale:
            self._release(key, self._entries.pop(key))
        return len(stale)

    def _release(self, key: Key, entry: _Entry[S]) -> None:
        if entry.answer is None:
            return
        size = len(entry.answer)
        self.bytes_total -= size
        left = self._bytes.get(key[0], 0) - size
        if left > 0:
            self._bytes[key[0]] = left
        else:
            self._bytes.pop(key[0], None)
