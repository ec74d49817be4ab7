"""Over Cube Store's WebSocket protocol: the same clock and purge checks as over
the PostgreSQL wire (tests/server/test_pg_operator_features.py). Every cell arrives as
text, as Cube's driver sees it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from wsclient import QueryFailed, WsClient, rows  # type: ignore[import-not-found]


def run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture(scope="module")
def clock_server(launcher):  # type: ignore[no-untyped-def]
    """This module's own server: its clock jumps must not disturb other tests."""
    proc = launcher("--test-clock")
    yield proc
    proc.stop()


def test_orphaned_found_by_to_cancel_after_advance(clock_server: Any) -> None:
    async def main() -> None:
        async with WsClient(clock_server.ws_url) as c:
            (added,) = await c.rows("QUEUE ADD PRIORITY 1 'wsorph:a' '{}'")
            assert added["added"] == "true"
            assert await c.rows("QUEUE TO_CANCEL 120000 120000 'wsorph'") == []
            (clock,) = await c.rows("SYS CLOCK ADVANCE 120001")
            assert clock["frozen"] == "false"
            assert await c.rows("QUEUE TO_CANCEL 120000 120000 'wsorph'") == [
                {"id": "a", "queue_id": added["id"]}
            ]

    run(main())


def test_cache_ttl_expires_by_advance(clock_server: Any) -> None:
    async def main() -> None:
        async with WsClient(clock_server.ws_url) as c:
            assert await c.rows("CACHE SET TTL 10 'wsttl:k' 'v'") == [{"success": "true"}]
            await c.rows("SYS CLOCK ADVANCE 10001")
            assert await c.rows("CACHE GET 'wsttl:k'") == [{"value": None}]
            assert await c.rows("CACHE KEYS 'wsttl'") == []

    run(main())


def test_purge_counts_and_wakes_no_waiter(clock_server: Any) -> None:
    async def main() -> None:
        async with WsClient(clock_server.ws_url) as c:
            for key in ("a", "b", "c"):
                await c.rows(f"QUEUE ADD 'wspurge:{key}' '{{}}'")
            await c.rows("QUEUE RETRIEVE CONCURRENCY 5 'wspurge:a'")
            waiter = c.send("QUEUE RESULT_BLOCKING 1500 'wspurge:a'")
            assert await c.rows("QUEUE PURGE PENDING 'wspurge'") == [{"removed": "2"}]
            assert await c.rows("QUEUE PURGE 'wspurge'") == [{"removed": "1"}]
            woke = await asyncio.wait_for(waiter, 30)
            assert rows(woke) == [], "a purge must not wake a RESULT_BLOCKING waiter"
            assert await c.rows("QUEUE LIST 'wspurge'") == []
            for key in ("x", "y"):
                await c.rows(f"CACHE SET 'wspurge:{key}' '1'")
            assert await c.rows("CACHE PURGE 'wspurge'") == [{"removed": "2"}]

    run(main())


def test_clock_refused_without_the_flag(ws_start: Any) -> None:
    server = ws_start()

    async def main() -> None:
        async with WsClient(server.ws_url) as c:
            with pytest.raises(QueryFailed) as refused:
                await c.rows("SYS CLOCK ADVANCE 1000")
            assert refused.value.error == (
                "clock control is disabled; start the server with --test-clock"
            )
            assert await c.rows("SELECT 1")

    run(main())
