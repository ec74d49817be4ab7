"""An asyncio transport that records instead of sending, for driving a protocol
(``PgProtocol``) by hand: what it wrote, whether reading is paused, whether it closed."""

from __future__ import annotations

from typing import Any

__all__ = ["FakeTransport"]


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True
