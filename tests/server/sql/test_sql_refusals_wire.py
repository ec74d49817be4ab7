"""A pre-aggregation read is refused over both wires with 0A000, and the session lives on."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from wsclient import WsClient

from cubequeue.server.pytest_plugin import CubequeueServer
from cubequeue.server.sql.refusals import PREAGGREGATION_HINT

READ = "SELECT `orders__count` FROM dev_pre_aggregations.orders_main_abcd1234_efgh5678_ijkl9012"


def test_pg_wire_refusal_names_the_feature_and_the_setup(server: CubequeueServer) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            conn.execute(READ)
        assert "pre-aggregation" in e.value.diag.message_primary
        assert e.value.diag.message_hint == PREAGGREGATION_HINT
        assert conn.execute("SELECT FLOOR((UNIX_TIMESTAMP()) / 10) as refresh_key").fetchone()


def test_websocket_refusal_and_the_socket_stays_usable(server: CubequeueServer) -> None:
    async def main() -> None:
        async with WsClient(server.ws_url) as client:
            answer = await client.query(READ)
            assert "pre-aggregation" in getattr(answer, "error", "")
            assert await client.rows("SELECT 1 AS one") == [{"one": "1"}]

    asyncio.run(asyncio.wait_for(main(), 30))

