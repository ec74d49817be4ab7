"""One task-free RESULT_BLOCKING on the WebSocket too (issue 24).

The socket holds a QUEUE RESULT_BLOCKING on the executor's callbacks
(``Executor.begin_blocking``, one ``BlockingWait``), as the PostgreSQL wire does: no
task and no ``Executor.complete`` for it. In-process (the HTTP half of a real server in
this test's event loop) so the test can see the endpoint's tasks and the executor's calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from wsclient import WsClient, rows

from cubequeue.server.app import build_context
from cubequeue.server.blocking_wait import BlockingWait
from cubequeue.server.context import ServerContext
from cubequeue.server.http import start_http_server
from cubequeue.server.options import load_config

TIMEOUT_S = 30.0


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT_S))


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[ServerContext, str]]:
    config = dataclasses.replace(load_config(["--host", "127.0.0.1"], {}), http_port=0)
    ctx = build_context(config)
    server = await start_http_server(ctx)
    try:
        yield ctx, f"ws://127.0.0.1:{server.port}/ws"
    finally:
        ctx.shutting_down = True
        ctx.connections.shutdown_all()
        server.close()
        await server.wait_closed()


def _spy(ctx: ServerContext) -> tuple[list[object], list[BlockingWait]]:
    """Record what the executor's two wait entries are asked for."""
    completed: list[object] = []
    held: list[BlockingWait] = []
    executor = ctx.executor
    complete, begin = executor.complete, executor.begin_blocking

    def complete_spy(wait: Any, *args: Any, **kwargs: Any) -> Any:
        completed.append(wait)
        return complete(wait, *args, **kwargs)

    def begin_spy(*args: Any, **kwargs: Any) -> BlockingWait:
        blocking = begin(*args, **kwargs)
        held.append(blocking)
        return blocking

    executor.complete = complete_spy  # type: ignore[method-assign]
    executor.begin_blocking = begin_spy  # type: ignore[method-assign]
    return completed, held


def _endpoint_tasks() -> list[str]:
    return [task.get_coro().__qualname__  # type: ignore[union-attr]
            for task in asyncio.all_tasks() if not task.done()
            and task.get_coro().__qualname__.startswith("_Socket.")]  # type: ignore[union-attr]


def test_a_waiting_result_blocking_is_held_without_a_task() -> None:
    p = f"t{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        async with serving() as (ctx, url), WsClient(url) as c:
            completed, held = _spy(ctx)
            await c.rows(f"QUEUE ADD PRIORITY 1 '{p}:job' 'payload'")
            await c.rows(f"QUEUE RETRIEVE '{p}:job'")
            shared = c.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:job'")
            private = c.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:job'", connection_id=None)
            await c.rows("SELECT 1")  # answered after both polls were taken up, in order
            assert not shared.done() and not private.done()
            assert len(held) == 2 and not any(b.done() for b in held)
            assert completed == []  # no Executor.complete for a RESULT_BLOCKING
            assert "_Socket._wait" not in _endpoint_tasks()
            ack = await c.rows("QUEUE ACK ? ?", [f"{p}:job", '{"result": 1}'])
            assert ack == [{"success": "true"}]
            for answer in await asyncio.gather(shared, private):
                assert rows(answer)[0]["payload"] == '{"result": 1}'
            assert all(b.done() and not b.cancelled() for b in held)

    run(main())


def test_a_result_already_there_is_answered_at_once() -> None:
    p = f"t{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        async with serving() as (ctx, url), WsClient(url) as c:
            completed, held = _spy(ctx)
            await c.rows(f"QUEUE ADD PRIORITY 1 '{p}:job' 'payload'")
            await c.rows(f"QUEUE RETRIEVE '{p}:job'")
            await c.rows("QUEUE ACK ? ?", [f"{p}:job", '"done"'])
            got = await c.rows(f"QUEUE RESULT_BLOCKING 5000 '{p}:job'")
            assert got[0]["payload"] == '"done"'
            assert len(held) == 1 and held[0].done() and completed == []

    run(main())


def test_a_socket_that_goes_withdraws_its_private_wait_not_its_shared_one() -> None:
    p = f"t{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        async with serving() as (ctx, url):
            c = WsClient(url)
            await c.connect()
            _completed, held = _spy(ctx)
            c.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:private'", connection_id=None)
            c.send(f"QUEUE RESULT_BLOCKING 20000 '{p}:shared'")
            await c.rows("SELECT 1")
            assert len(held) == 2
            await c.drop()
            private, shared = held
            for _ in range(int(TIMEOUT_S / 0.05)):
                if private.cancelled():
                    break
                await asyncio.sleep(0.05)
            assert private.cancelled()  # its waiter withdrawn from the store
            assert not shared.done()  # a resend on another socket may still want it
            shared.cancel()

    run(main())
