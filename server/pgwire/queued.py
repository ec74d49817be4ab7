"""The messages a connection holds behind a wait, and the memory they hold.

While a step waits (a RESULT_BLOCKING, a store that answers later, a TLS upgrade) the
connection's later messages are queued in a :class:`QueuedMessages`; reading pauses once
they hold more than :data:`MAX_QUEUED_BYTES` or number more than
:data:`MAX_QUEUED_MESSAGES` (:attr:`QueuedMessages.full`), so the rest waits in the kernel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from cubequeue.grammar.errors import QueueError
from cubequeue.server.pgwire import messages as m

__all__ = ["MAX_QUEUED_BYTES", "MAX_QUEUED_MESSAGES", "Fatal", "Queued", "QueuedMessages"]

#: messages queued behind a blocking wait before reading pauses
MAX_QUEUED_MESSAGES: Final = 10_000
#: bytes those messages may hold (their text and parameters) before reading pauses
MAX_QUEUED_BYTES: Final = 1 << 20
#: what a message with no text or parameters is counted as
_MESSAGE_OVERHEAD: Final = 64


class Fatal:
    """Queued after the last good message of a chunk whose remainder broke framing."""

    __slots__ = ("error",)

    def __init__(self, error: QueueError) -> None:
        self.error = error


#: what a connection queues: a decoded message, or the framing error after the last one
Queued = m.FrontendMessage | Fatal


class QueuedMessages(deque[Queued]):
    """A deque of queued messages that counts the bytes they hold (its truth and length
    are the deque's own, as cheap as a plain one's on every read)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        super().__init__()
        #: what the queued messages hold, by :func:`held_bytes`
        self.held = 0

    def add(self, items: Sequence[Queued]) -> None:
        if items:
            self.extend(items)
            self.held += sum(held_bytes(msg) for msg in items)

    def take(self) -> Queued:
        item = self.popleft()
        self.held -= held_bytes(item)
        return item

    def drop(self) -> None:
        self.clear()
        self.held = 0

    @property
    def full(self) -> bool:
        """Over either cap: reading pauses until the connection works some off."""
        return self.held > MAX_QUEUED_BYTES or len(self) > MAX_QUEUED_MESSAGES


def held_bytes(msg: Queued) -> int:
    """What a queued message keeps in memory: its text and parameters, roughly."""
    if isinstance(msg, m.Query):
        return _MESSAGE_OVERHEAD + len(msg.sql)
    if isinstance(msg, m.Parse):
        return _MESSAGE_OVERHEAD + len(msg.query)
    if isinstance(msg, m.Bind):
        return _MESSAGE_OVERHEAD + sum(len(p) for p in msg.params if p is not None)
    if isinstance(msg, m.CopyData | m.PasswordMessage | m.FunctionCall):
        data = msg.data if isinstance(msg, m.CopyData) else msg.payload
        return _MESSAGE_OVERHEAD + len(data)
    return _MESSAGE_OVERHEAD
