"""The HTTP port: routes, the upgrade's checks and headers, size limits, shutdown
(the upgrade, message size)."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
from collections.abc import Coroutine
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from wsclient import WsClient, rows

from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.cubews.codec import decode_message, encode_query
from cubequeue.server.cubews.messages import HttpError
from cubequeue.server.http import start_http_server


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def get(server: Any, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        conn.close()


def test_probe_routes_and_404(ws_server) -> None:
    assert get(ws_server, "/healthz")[0] == 200
    assert get(ws_server, "/readyz")[0] == 200
    status, content_type, body = get(ws_server, "/metrics")
    assert status == 200 and content_type.startswith("text/plain") and "cubequeue" in body
    assert get(ws_server, "/nope")[0] == 404
    assert get(ws_server, "/ws/extra")[0] == 404
    assert get(ws_server, "/upload-temp-file?name=x")[0] == 404
    assert get(ws_server, "/ws")[0] == 426  # a plain GET, no upgrade


def test_process_id_header_is_capped_at_64(ws_server) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url, process_id="p" * 64) as c:
            assert rows(await c.query("SELECT 1"))
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_server.ws_url, additional_headers={"x-process-id": "p" * 65})
        response = refused.value.response
        assert response.status_code == 400
        assert json.loads(response.body) == {
            "error": "x-process-id header exceeds maximum allowed length of 64 characters"
        }

    run(main())


def test_advertised_version_follows_the_option(ws_start) -> None:
    server = ws_start("--cubestore-version", "1.6.0")

    async def main() -> None:
        async with WsClient(server.ws_url) as c:
            assert c.server_version == "1.6.0"

    run(main())


def test_basic_auth(ws_start) -> None:
    server = ws_start("--ws-auth", "basic", "--password", "s3cret")

    def basic(user: str, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    async def main() -> None:
        for headers in ({}, basic("cube", "wrong"), {"Authorization": "Bearer s3cret"}):
            with pytest.raises(InvalidStatus) as refused:
                await connect(server.ws_url, additional_headers=headers)
            assert refused.value.response.status_code == 403
            assert json.loads(refused.value.response.body) == {"error": "Not authorized"}
        async with WsClient(server.ws_url, headers=basic("cube", "s3cret")) as c:
            assert rows(await c.query("SELECT 1"))

    run(main())


def test_message_size_limits(ws_start) -> None:
    limit = 4096
    server = ws_start("--max-message-size", str(limit))

    async def main() -> None:
        async with WsClient(server.ws_url) as c:
            over = await c.query("CACHE SET TTL ? ? ?", [60, "big", "x" * (limit + 100)])
            assert isinstance(over, HttpError)
            assert over.error.startswith("Request of ")
            assert f"exceeds the maximum message size of {limit} bytes" in over.error
            assert rows(await c.query("SELECT 1"))  # the socket stays up
        async with connect(server.ws_url, compression=None) as ws:
            data = encode_query(1, "c", "CACHE SET TTL 60 'k' ?", parameters=["y" * (3 * limit)])
            await ws.send(data)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            frame = closed.value.rcvd
            assert frame is not None and frame.code == 1009
            assert frame.reason == (
                f"Message of {len(data)} bytes exceeds the maximum message size of {limit} bytes"
            )

    run(main())


def test_shutdown_closes_sockets_with_1001(ws_start) -> None:
    server = ws_start()

    async def main() -> None:
        async with connect(server.ws_url) as ws:
            await ws.send(encode_query(1, "c", "SELECT 1"))
            decode_message(await asyncio.wait_for(ws.recv(), 10))
            stopping = asyncio.get_running_loop().run_in_executor(None, server.stop)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 20)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
            await stopping

    run(main())


def test_readyz_is_503_while_shutting_down() -> None:
    async def main() -> None:
        ctx = build_context(Config(http_port=0))
        server = await start_http_server(ctx)
        try:
            probe = type("Probe", (), {"host": "127.0.0.1", "http_port": server.port})
            loop = asyncio.get_running_loop()
            assert (await loop.run_in_executor(None, get, probe, "/readyz"))[0] == 200
            ctx.shutting_down = True
            assert (await loop.run_in_executor(None, get, probe, "/readyz"))[0] == 503
            assert (await loop.run_in_executor(None, get, probe, "/healthz"))[0] == 200
        finally:
            server.close()
            await server.wait_closed()

    run(main())
