"""A pooled connection whose backend is terminated must answer 57P03, never XX000.

A dying server sends its FATAL and only then closes the socket. asyncpg cannot place a
FATAL that reaches a connection between two statements and leaves its protocol "busy"
until the close arrives; a statement given that connection meanwhile failed with
``cannot switch to state …; another operation (2) is in progress`` (the failover test's
XX000). A loopback proxy between the pool and a real PostgreSQL holds the dying
backend's bytes and its close, so the window is hit every time instead of by chance.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import asyncpg

from cubequeue.storage.postgres.database import Database

_WAIT_S = 30.0  # generous: a real wait for PostgreSQL, not a timing


class HoldingProxy:
    """Forwards both ways; :meth:`hold` buffers what the server sends (and its close)."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._held: bytearray | None = None
        self._server_closed = asyncio.Event()
        self._eof_held = False
        self._client: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.server is not None:
            self.server.close()

    def hold(self) -> None:
        self._held = bytearray()
        self._server_closed.clear()

    async def server_gone(self) -> None:
        await asyncio.wait_for(self._server_closed.wait(), _WAIT_S)

    async def flush_but_keep_open(self) -> None:
        """Deliver every held byte in one write; the server's close stays held."""
        assert self._client is not None and self._held is not None
        held, self._held = bytes(self._held), None
        self._eof_held = True
        self._client.write(held)
        await self._client.drain()

    def deliver_close(self) -> None:
        assert self._client is not None
        self._eof_held = False
        self._client.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._port)
        self._client = writer
        for pump in (self._up(reader, up_writer), self._down(up_reader, writer)):
            task = asyncio.ensure_future(pump)
            self._tasks.add(task)

    async def _up(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
        writer.close()

    async def _down(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                if self._held is not None:
                    self._held += data
                else:
                    writer.write(data)
        self._server_closed.set()
        if self._held is None and not self._eof_held:
            writer.close()


async def _terminate_backend(dsn: str, pid: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("select pg_terminate_backend($1)", pid)
    finally:
        await conn.close()


async def _with_proxy(
    dsn: str, body: Callable[[Database, HoldingProxy], Awaitable[None]]
) -> None:
    parts = urlsplit(dsn)
    proxy = HoldingProxy(parts.port or 5432)
    port = await proxy.start()
    db = Database(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}").geturl(),
                  max_size=1)
    await db.open()
    try:
        await body(db, proxy)
    finally:
        await db.close()
        await proxy.close()


def test_a_fatal_behind_the_last_reply_leaves_the_answer_and_drops_the_connection(
    fresh_dsn: str,
) -> None:
    """The statement's rows and the FATAL arrive together: the rows are the answer (the
    statement committed), the broken connection is not given back busy, and the next
    statement gets a new one. Before the fix the release's reset raised XX000."""

    async def body(db: Database, proxy: HoldingProxy) -> None:
        pid = await db.fetchval("test", "select pg_backend_pid()")
        proxy.hold()
        # the statement is prepared already, so its one reply is Bind/Execute's; the
        # terminate runs after it is sent (one backend, so it is answered first)
        answer = asyncio.ensure_future(db.fetchval("test", "select pg_backend_pid()"))
        await _terminate_backend(fresh_dsn, pid)
        await proxy.server_gone()
        await proxy.flush_but_keep_open()
        assert await asyncio.wait_for(answer, _WAIT_S) == pid
        proxy.deliver_close()
        assert await db.fetchval("test", "select pg_backend_pid()") != pid

    asyncio.run(_with_proxy(fresh_dsn, body))


def test_a_fatal_on_an_idle_pooled_connection_is_never_xx000(fresh_dsn: str) -> None:
    """The FATAL reaches the idle pooled connection, its close does not yet: a statement
    then is served on another connection (asyncpg refuses to send it on this one)."""

    async def body(db: Database, proxy: HoldingProxy) -> None:
        pid = await db.fetchval("test", "select pg_backend_pid()")
        proxy.hold()
        await _terminate_backend(fresh_dsn, pid)
        await proxy.server_gone()
        await proxy.flush_but_keep_open()
        for _ in range(20):  # loop turns, no clock: the pool connection reads the FATAL
            await asyncio.sleep(0)
        # asyncpg refuses to write on the broken connection, so the statement was never
        # sent: the store runs it on a new connection (it used to answer 57P03 "whether
        # it took effect is unknown", then "cannot be reached")
        assert await asyncio.wait_for(db.fetchval("CACHE SET", "select pg_backend_pid()"),
                                      _WAIT_S) != pid
        assert db.health().errors == {}

    asyncio.run(_with_proxy(fresh_dsn, body))
