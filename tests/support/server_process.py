"""A real cubequeue process for the length of a ``with`` block (``start_cubequeue``, then
``stop()`` however the block ends)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

__all__ = ["server"]


@contextlib.contextmanager
def server(*args: str) -> Iterator[CubequeueServer]:
    """A server started with ``args`` (its own command-line flags)."""
    srv = start_cubequeue(*args)
    try:
        yield srv
    finally:
        srv.stop()
