"""Servers for the WebSocket protocol tests.

By default the tests talk to the real server process (``tests/conftest.py``: ``server``
for the shared one, ``start_server(*args)`` for one with its own options). With
``CUBEQUEUE_WS_INPROC=1`` they talk instead to the HTTP/WS half of the server running
in a thread of the test process (same context, same endpoint, no PostgreSQL listener),
which is handy under a debugger or a coverage run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

INPROC = os.environ.get("CUBEQUEUE_WS_INPROC") == "1"


@dataclass
class InprocServer:
    """The HTTP port of a server built from ``argv``, served by a background loop."""

    argv: tuple[str, ...]
    host: str = "127.0.0.1"
    http_port: int = 0
    ctx: Any = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.http_port}/ws"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def start(self) -> InprocServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("in-process server did not start")
        return self

    def _run(self, ready: threading.Event) -> None:
        from cubequeue.server.app import build_context
        from cubequeue.server.http import start_http_server
        from cubequeue.server.options import load_config

        async def main() -> None:
            config = load_config(["--host", self.host, *self.argv], {})
            config = dataclasses.replace(config, http_port=0)  # any free port
            self.ctx = build_context(config)
            server = await start_http_server(self.ctx)
            self.http_port = server.port
            self._loop = asyncio.get_running_loop()
            self._done = asyncio.Event()
            ready.set()
            await self._done.wait()
            self.ctx.shutting_down = True
            self.ctx.connections.shutdown_all()
            for _ in range(100):
                if not len(self.ctx.connections):
                    break
                await asyncio.sleep(0.02)
            server.close()
            await server.wait_closed()

        asyncio.run(main())
        self._stopped.set()

    def stop(self) -> int:
        if self._loop is not None and not self._stopped.is_set():
            self._loop.call_soon_threadsafe(self._done.set)
            self._stopped.wait(10)
        return 0


@pytest.fixture(scope="session")
def ws_server(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One server for the module's tests (``--test-clock``); tests keep to own prefixes."""
    if INPROC:
        proc = InprocServer(("--test-clock",)).start()
        yield proc
        proc.stop()
    else:
        yield request.getfixturevalue("server")


@pytest.fixture
def ws_start(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``ws_start(*args)``: a server of one's own, stopped after the test."""
    if not INPROC:
        yield request.getfixturevalue("start_server")
        return
    started: list[InprocServer] = []

    def start(*args: str) -> InprocServer:
        proc = InprocServer(args).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
