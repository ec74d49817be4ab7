"""Cube Store's WebSocket protocol against the real server: queries, typed parameters,
concurrency on one socket, errors (dialect doc §1.4, §8 rule 5).

Each test keeps to its own queue prefix and cache keys, since the server is shared.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from wsclient import QueryFailed, WsClient, rows

from cubequeue.server.cubews.codec import encode_query
from cubequeue.server.cubews.messages import HttpError, HttpResultSet


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def test_select_1_and_the_version_header(ws_server) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            assert c.server_version == "1.7.25"
            answer = await c.query("SELECT 1")
            assert isinstance(answer, HttpResultSet)
            assert len(answer.rows) == 1 and answer.rows[0][0] == "1"

    run(main())


def test_queue_round_trip_cells_are_strings(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            added = await c.rows(f"QUEUE ADD PRIORITY 5 '{p}:a' 'payload-a'")
            assert added == [{"id": added[0]["id"], "added": "true", "pending": "1"}]
            assert int(added[0]["id"] or "0") > 0
            again = await c.rows(f"QUEUE ADD PRIORITY 5 '{p}:a' 'other'")
            assert again[0]["added"] == "false"
            got = await c.rows(f"QUEUE RETRIEVE CONCURRENCY 1 '{p}:a'")
            assert got[0]["payload"] == "payload-a"
            assert got[0]["extra"] is None  # NULL is an absent string
            assert got[0]["active"] == "a"

    run(main())


def test_long_poll_does_not_delay_the_ack_on_the_same_socket(ws_server) -> None:
    """RESULT_BLOCKING and the ACK that wakes it share one socket (§3.2); processed
    serially, the ACK would wait behind the 20 s poll and this test would time out."""
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            await c.rows(f"QUEUE ADD PRIORITY 1 '{p}:job' 'payload'")
            await c.rows(f"QUEUE RETRIEVE '{p}:job'")
            polls = [c.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:job'") for _ in range(3)]
            await asyncio.sleep(0.2)  # let the polls register before the ACK
            assert not any(poll.done() for poll in polls)
            ack = await c.rows("QUEUE ACK ? ?", [f"{p}:job", '{"result": 1}'], timeout=5)
            assert ack == [{"success": "true"}]
            answers = await asyncio.wait_for(asyncio.gather(*polls), 5)
            assert all(rows(a) and rows(a)[0]["payload"] == '{"result": 1}' for a in answers)

    run(main())


def test_many_messages_in_flight_are_all_answered(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            futures = [c.send("CACHE INCR ?", [f"{p}:counter"]) for _ in range(200)]
            values = sorted(int(rows(a)[0]["value"] or "0") for a in await asyncio.gather(*futures))
            assert values == list(range(1, 201))

    run(main())


def test_typed_parameters(ws_server) -> None:
    """Int64 in a key slot is an id, String a path; Null as ACK's result is no result."""
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            added = await c.rows("QUEUE ADD PRIORITY ? ? ?", [3, f"{p}:k", "the-payload"])
            queue_id = int(added[0]["id"] or "0")
            by_id = await c.rows("QUEUE GET ?", [queue_id])
            by_path = await c.rows("QUEUE GET ?", [f"{p}:k"])
            assert by_id == by_path == [{"payload": "the-payload", "extra": None}]
            assert await c.rows("QUEUE GET ?", [str(queue_id)]) == []  # '7' is a path
            await c.rows(f"QUEUE RETRIEVE '{p}:k'")
            assert await c.rows("QUEUE ACK ? ?", [queue_id, None]) == [{"success": "true"}]
            assert await c.rows("CACHE SET TTL ? ? ?", [60, f"{p}:c", "v"]) == [{"success": "true"}]
            assert await c.rows("CACHE GET ?", [f"{p}:c"]) == [{"value": "v"}]

    run(main())


@pytest.mark.parametrize(("sql", "params", "error"), [
    ("CACHE GET ?", None, "Empty parameters, please send parameters within query"),
    ("CACHE GET ?", [], "Empty parameters, please send parameters within query"),
    ("CACHE SET TTL ? ? ?", [60, "k"],
     "Placeholder index is out of bound, actual: 2, parameters length: 2"),
    ("CACHE SET TTL ? ? ?", ["60", "k", "v"],
     "Wrong parameters type, actual: string, expected: int64 parameter"),
    ("CACHE SET TTL ? ? ?", [True, "k", "v"],
     "Wrong parameters type, actual: bool, expected: int64 parameter"),
    ("CACHE GET ?", [1.5], "Wrong parameters type, actual: float64, expected: string parameter"),
    ("CACHE GET ?", [b"k"], "Wrong parameters type, actual: binary, expected: string parameter"),
    ("QUEUE GET ?", [None],
     "Wrong parameters type, actual: null, expected: string or integer parameter"),
])
def test_parameter_errors(ws_server, sql: str, params: list[Any] | None, error: str) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            assert await c.query(sql, params) == HttpError(error)

    run(main())


def test_errors_are_plain_messages_and_the_socket_survives(ws_server) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            bad = await c.query("QUEUE FROBNICATE 'x'")
            assert isinstance(bad, HttpError) and "frobnicate" in bad.error.lower()
            assert not bad.error.startswith(("Internal", "ParserError"))
            preagg = await c.query("CREATE TABLE dev_pre_aggregations.orders_main (id int)")
            # refused by what it asks for, with the setup hint in the text (an HttpError has
            # no hint field)
            assert isinstance(preagg, HttpError)
            assert preagg.error.startswith(
                "cubequeue does not support pre-aggregation tables (CREATE TABLE): "
                "CREATE TABLE dev_pre_aggregations.orders_main"
            )
            assert "build pre-aggregations in the source database" in preagg.error
            # information_schema is served for the system tables; a question about a
            # pre-aggregation schema is refused by what it asks for
            tables = await c.query("SELECT * FROM information_schema.tables")
            assert isinstance(tables, HttpResultSet)
            assert {row[2] for row in tables.rows} >= {"queue", "cache", "queue_log"}
            schema = await c.query(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'dev_pre_aggregations'"
            )
            assert isinstance(schema, HttpError) and "pre-aggregation" in schema.error
            incr = await c.query("CACHE SET TTL 60 'not-a-number-key' 'abc'")
            assert isinstance(incr, HttpResultSet)
            assert isinstance(await c.query("CACHE INCR 'not-a-number-key'"), HttpError)
            assert rows(await c.query("SELECT 1"))  # still serving

    run(main())


def test_arrow_requests_get_the_legacy_result_set(ws_server) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            answer = await asyncio.wait_for(c.send("SELECT 1", response_format=1), 10)
            assert isinstance(answer, HttpResultSet)

    run(main())


def test_messages_without_connection_id_are_answered(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            a = await asyncio.wait_for(c.send("CACHE INCR ?", [p], connection_id=None), 10)
            b = await asyncio.wait_for(c.send("CACHE INCR ?", [p], connection_id=None), 10)
            assert [rows(a)[0]["value"], rows(b)[0]["value"]] == ["1", "2"]

    run(main())


def test_exclusive_needs_and_uses_the_process_id(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as anonymous:
            refused = await anonymous.query(f"QUEUE ADD EXCLUSIVE PRIORITY 1 '{p}:x' 'p'")
            assert isinstance(refused, HttpError) and "process" in refused.error
        async with WsClient(ws_server.ws_url, process_id="proc-1") as one, \
                WsClient(ws_server.ws_url, process_id="proc-2") as two:
            assert (await one.rows(f"QUEUE ADD EXCLUSIVE PRIORITY 1 '{p}:x' 'p'"))[0]["added"] == "true"
            await one.rows(f"QUEUE ADD PRIORITY 1 '{p}:shared' 'p'")
            mine = {r["id"] for r in await one.rows(f"QUEUE PENDING '{p}'")}
            theirs = {r["id"] for r in await two.rows(f"QUEUE PENDING '{p}'")}
            assert mine == {"x", "shared"}
            assert theirs == {"shared"}

    run(main())


def test_sys_clock_and_purge_over_ws(ws_start) -> None:
    server = ws_start("--test-clock")

    async def main() -> None:
        async with WsClient(server.ws_url) as c:
            await c.rows("QUEUE ADD PRIORITY 1 'purge:a' 'p'")
            before = (await c.rows("SYS CLOCK"))[0]
            after = (await c.rows("SYS CLOCK ADVANCE 60000"))[0]
            assert after["offset_ms"] == str(int(before["offset_ms"] or "0") + 60000)
            assert (after["now"] or "").endswith("Z")
            await c.rows("QUEUE PURGE 'purge'")
            assert await c.rows("QUEUE PENDING 'purge'") == []

    run(main())


def test_text_messages_close_the_socket(ws_server) -> None:
    async def main() -> None:
        async with connect(ws_server.ws_url) as ws:
            await ws.send("SELECT 1")
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003

    run(main())


def test_undecodable_binary_is_ignored(ws_server) -> None:
    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            await c.send_raw(b"\xff\xff\xff\x7f garbage")
            assert rows(await c.query("SELECT 1"))

    run(main())


def test_a_result_set_sent_by_a_client_is_refused_and_closes(ws_server) -> None:
    async def main() -> None:
        async with connect(ws_server.ws_url) as ws:
            data = bytearray(encode_query(5, "c", "SELECT 1"))
            # turn the command type (HttpQuery = 1) into HttpError = 3
            root = int.from_bytes(data[0:4], "little")
            vtable = root - int.from_bytes(data[root:root + 4], "little", signed=True)
            data[root + int.from_bytes(data[vtable + 6:vtable + 8], "little")] = 3
            await ws.send(bytes(data))
            from cubequeue.server.cubews.codec import decode_message

            answer = decode_message(await asyncio.wait_for(ws.recv(), 10))
            assert answer.message_id == 5 and isinstance(answer.command, HttpError)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)

    run(main())


def test_query_failed_helper_raises() -> None:
    with pytest.raises(QueryFailed):
        rows(HttpError("x"))


def test_plain_sql_sees_the_process_id_and_system_tables_render_timestamps(ws_server) -> None:
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url, process_id="proc-show") as c:
            shown = await c.rows("SHOW process_id")
            assert list(shown[0].values()) == ["proc-show"]
            await c.rows(f"QUEUE ADD PRIORITY 1 '{p}:t' 'p'")
            queue = await c.rows(
                f"SELECT id, created, priority, exclusive FROM system.queue WHERE prefix = '{p}'"
            )
            assert len(queue) == 1 and queue[0]["id"] == "t" and queue[0]["priority"] == "1"
            assert queue[0]["exclusive"] == "false"
            created = queue[0]["created"] or ""
            assert len(created) == 24 and created[10] == "T" and created.endswith("Z")

    run(main())


def test_pings_are_answered_while_long_polls_wait(ws_server) -> None:
    """Cube's client pings every 5 s and reconnects without a pong."""
    p = prefix()

    async def main() -> None:
        async with WsClient(ws_server.ws_url) as c:
            polls = [c.send(f"QUEUE RESULT_BLOCKING 3000 '{p}:{i}'") for i in range(5)]
            assert c.ws is not None
            for _ in range(3):
                pong = await c.ws.ping()
                await asyncio.wait_for(pong, 2)
            assert not any(poll.done() for poll in polls)
            answers = await asyncio.wait_for(asyncio.gather(*polls), 10)
            assert all(rows(a) == [] for a in answers)  # timed out: zero rows

    run(main())
