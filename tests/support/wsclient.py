"""A small Python client for Cube Store's WebSocket protocol, as Cube's driver speaks it.

One socket, many messages in flight, answers matched by ``message_id`` (
§3.2). ``connection_id`` is a uuid that survives :meth:`WsClient.reconnect`, so a test
can resend a message with the same ids on a new socket, as Cube's driver does after a
disconnect (§3.4). Results come back as :class:`HttpResultSet` / :class:`HttpError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from cubequeue.server.cubews.codec import decode_message, encode_query
from cubequeue.server.cubews.messages import HttpError, HttpResultSet, ParamValue

Answer = HttpResultSet | HttpError


class QueryFailed(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def rows(answer: Answer) -> list[dict[str, str | None]]:
    """The rows as dicts keyed by column name (how Cube's driver sees them)."""
    if isinstance(answer, HttpError):
        raise QueryFailed(answer.error)
    return [dict(zip(answer.columns, row, strict=False)) for row in answer.rows]


class WsClient:
    def __init__(
        self,
        url: str,
        *,
        connection_id: str | None = None,
        process_id: str | None = None,
        headers: dict[str, str] | None = None,
        max_size: int | None = 2**28,
    ) -> None:
        self.url = url
        self.connection_id = connection_id if connection_id is not None else str(uuid.uuid4())
        self.headers = dict(headers or {})
        if process_id is not None:
            self.headers["x-process-id"] = process_id
        self.max_size = max_size
        self.ws: ClientConnection | None = None
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Answer]] = {}
        self.unexpected: list[Any] = []
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WsClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def server_version(self) -> str | None:
        assert self.ws is not None and self.ws.response is not None
        return self.ws.response.headers.get("X-CubeStore-Version")

    async def connect(self) -> None:
        self.ws = await connect(
            self.url, additional_headers=self.headers, max_size=self.max_size, compression=None
        )
        self._reader = asyncio.get_running_loop().create_task(self._read(self.ws))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def drop(self) -> None:
        """Lose the socket without a closing handshake (a network failure)."""
        assert self.ws is not None
        self.ws.transport.abort()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def reconnect(self) -> None:
        """A new socket for the same connection_id; pending messages stay pending."""
        await self.connect()

    async def _read(self, ws: ClientConnection) -> None:
        with contextlib.suppress(Exception):
            async for data in ws:
                if isinstance(data, str):
                    self.unexpected.append(data)
                    continue
                message = decode_message(data)
                future = self.pending.pop(message.message_id, None)
                if future is None or future.done():
                    self.unexpected.append(message)
                    continue
                assert isinstance(message.command, HttpResultSet | HttpError)
                future.set_result(message.command)

    def send(
        self,
        sql: str,
        parameters: Sequence[ParamValue] | None = None,
        *,
        message_id: int | None = None,
        response_format: int = 0,
        connection_id: str | bool | None = True,
    ) -> asyncio.Future[Answer]:
        """Send one query; the future resolves with its answer (any order)."""
        assert self.ws is not None
        mid = next(self.ids) if message_id is None else message_id
        conn = self.connection_id if connection_id is True else (connection_id or None)
        data = encode_query(mid, conn, sql, parameters=parameters, response_format=response_format)
        future = self.pending.get(mid)
        if future is None or future.done():
            future = asyncio.get_running_loop().create_future()
            self.pending[mid] = future
        asyncio.get_running_loop().create_task(self.ws.send(data))
        return future

    async def send_raw(self, data: bytes | str) -> None:
        assert self.ws is not None
        await self.ws.send(data)

    async def query(
        self, sql: str, parameters: Sequence[ParamValue] | None = None, *, timeout: float = 10
    ) -> Answer:
        return await asyncio.wait_for(self.send(sql, parameters), timeout)

    async def rows(
        self, sql: str, parameters: Sequence[ParamValue] | None = None, *, timeout: float = 10
    ) -> list[dict[str, str | None]]:
        return rows(await self.query(sql, parameters, timeout=timeout))
