"""Clocks for the store. The store never reads wall-clock time itself: it is handed a
``Clock`` (a callable returning integer milliseconds since the epoch).

* :class:`FakeClock` — a settable clock for unit and model tests.
* :class:`AdjustableClock` — wraps a real time source (injected by the server) and adds
  the ``--test-clock`` controls: advance by an offset, freeze, resume (``SYS CLOCK``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["AdjustableClock", "Clock", "FakeClock"]


class Clock(Protocol):
    def __call__(self) -> int: ...


class FakeClock:
    """A clock that only moves when told to."""

    __slots__ = ("now",)

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class AdjustableClock:
    """A real time source plus an offset; can be frozen at an instant and resumed.

    Resuming continues from the frozen instant (the offset absorbs the pause), so time
    seen by the store never goes backwards.
    """

    __slots__ = ("_frozen_at", "_source", "offset_ms")

    def __init__(self, source: Callable[[], int]) -> None:
        self._source = source
        self.offset_ms = 0
        self._frozen_at: int | None = None

    def __call__(self) -> int:
        if self._frozen_at is not None:
            return self._frozen_at
        return self._source() + self.offset_ms

    @property
    def frozen(self) -> bool:
        return self._frozen_at is not None

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("the clock only moves forward")
        self.offset_ms += ms
        if self._frozen_at is not None:
            self._frozen_at += ms

    def freeze(self) -> None:
        if self._frozen_at is None:
            self._frozen_at = self()

    def resume(self) -> None:
        if self._frozen_at is not None:
            self.offset_ms = self._frozen_at - self._source()
            self._frozen_at = None
