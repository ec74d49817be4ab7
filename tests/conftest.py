"""Start the real server for end-to-end tests: a subprocess on free loopback ports.

The processes are started by the same code as the public ``cubequeue_server`` fixture
(:func:`cubequeue.server.pytest_plugin.start_cubequeue`), without ``--test-clock``
unless a test asks for it.

* ``server``: one shared server (with ``--test-clock``) for the whole session; tests that
  share it keep to their own queue prefixes and cache keys, and never move its clock.
* ``launcher``: a session-scoped ``launch`` for module-scoped fixtures.
* ``start_server``: servers of one test's own (its options, its clock, or to stop it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue


def launch(*args: str, env: dict[str, str] | None = None) -> CubequeueServer:
    """``python -m cubequeue.server *args`` on free ports, once both ports accept."""
    return start_cubequeue(*args, test_clock=False, env=env)


def _tracking_launcher() -> tuple[Callable[..., CubequeueServer], list[CubequeueServer]]:
    started: list[CubequeueServer] = []

    def start(*args: str, env: dict[str, str] | None = None) -> CubequeueServer:
        proc = launch(*args, env=env)
        started.append(proc)
        return proc

    return start, started


@pytest.fixture(scope="session")
def server() -> Iterator[CubequeueServer]:
    proc = launch("--test-clock")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def launcher() -> Iterator[Callable[..., CubequeueServer]]:
    start, started = _tracking_launcher()
    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def start_server() -> Iterator[Callable[..., CubequeueServer]]:
    start, started = _tracking_launcher()
    yield start
    for proc in started:
        proc.stop()
