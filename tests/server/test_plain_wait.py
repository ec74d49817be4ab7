"""Plain SQL over system tables a store answers later (a durable read that saw an unwritten
record, every read of the PostgreSQL store), without a socket: the executor hands back a
PlainWait, and the PostgreSQL session (simple Query, Execute, COPY) and the WebSocket
session answer it as a dialect wait; errors keep their SQLSTATE; counted once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from cubequeue.grammar.commands import Command, QueueResultBlocking
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.grammar.results import ResultSet
from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.cubews.codec import decode_message, encode_query
from cubequeue.server.cubews.dedup import DedupTable
from cubequeue.server.cubews.messages import HttpError, HttpResultSet
from cubequeue.server.cubews.session import Await, Send, WsSession
from cubequeue.server.executor import Executor, PlainWait, WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.session import PgSession
from cubequeue.server.sql import PlainOutcome, PlainSession
from cubequeue.storage.interface import BlockingOutcome, StoreBackend, Table

P3 = 196608
COUNT = "SELECT count(*) FROM system.queue"


class Later:
    """The in-memory store, except that every system table is an awaitable (``fail``: the
    awaitable raises it instead)."""

    def __init__(self, inner: StoreBackend, fail: BaseException | None = None) -> None:
        self.inner = inner
        self.kind = "later"
        self.fail = fail
        self.reads: list[str] = []

    def execute(self, cmd: Command, process_id: str | None = None) -> Any:
        return self.inner.execute(cmd, process_id)

    def result_blocking(self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
                        process_id: str | None = None) -> BlockingOutcome:
        return self.inner.result_blocking(cmd, callback, process_id)

    def system_table(self, name: str) -> Table:
        self.reads.append(name)
        table, fail = self.inner.system_table(name), self.fail

        async def later() -> Any:
            await asyncio.sleep(0)
            if fail is not None:
                raise fail
            return table

        return later()

    def stats(self) -> Any:
        return self.inner.stats()

    def now_ms(self) -> int:
        return self.inner.now_ms()


class Hooks:
    def admit(self, user: str) -> tuple[int, int]:
        return 4242, -7


def later_context(fail: BaseException | None = None) -> tuple[Any, Later]:
    ctx = build_context(Config(test_clock=True))
    slot: Any = ctx.store  # the server's store slot (attach: the seam's replacement)
    store = Later(slot.target, fail)
    slot.attach(store)
    return ctx, store


def pg(ctx: Any) -> PgSession:
    session = PgSession(ctx, Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    session.take()
    return session


def drive(ctx: Any, session: PgSession, *msgs: m.FrontendMessage) -> list[m.BackendMessage]:
    """Each message handled, each wait awaited through the executor and resumed."""
    waited = run_waits(ctx, session, *msgs)
    out = session.take()
    out.append(m.NoticeResponse((("waits", str(waited)),)))  # how many waits, for asserts
    return out


def run_waits(ctx: Any, session: PgSession, *msgs: m.FrontendMessage) -> int:
    waited = 0

    async def main() -> None:
        nonlocal waited
        for msg in msgs:
            wait = session.handle(msg)
            while wait is not None:
                waited += 1
                try:
                    result = await ctx.executor.complete(wait, 0)
                except Exception as exc:
                    wait = session.resume(error=exc)
                else:
                    wait = session.resume(result)

    asyncio.run(main())
    return waited


def waits(out: list[m.BackendMessage]) -> int:
    last = out[-1]
    assert isinstance(last, m.NoticeResponse)
    return int(dict(last.fields)["waits"])


def add_items(ctx: Any, n: int) -> None:
    for i in range(n):
        step = ctx.executor.statement(f"QUEUE ADD PRIORITY 1 'p:{i}' '{{}}'",
                                      PlainSession(server_version="15", user="u"), None)
        assert isinstance(step, tuple) and isinstance(step[1], ResultSet)


def rows(out: list[m.BackendMessage]) -> list[tuple[bytes | None, ...]]:
    return [msg.values for msg in out if isinstance(msg, m.DataRow)]


def tags(out: list[m.BackendMessage]) -> list[str]:
    return [msg.tag for msg in out if isinstance(msg, m.CommandComplete)]


def sqlstates(out: list[m.BackendMessage]) -> list[str | None]:
    return [dict(msg.fields).get("C") for msg in out if isinstance(msg, m.ErrorResponse)]


# --- the executor ----------------------------------------------------------------------


def test_the_in_memory_store_answers_plain_sql_at_once() -> None:
    ctx = build_context(Config(test_clock=True))
    add_items(ctx, 2)
    answer = ctx.executor.statement(COUNT, PlainSession(server_version="15", user="u"), None)
    assert isinstance(answer, PlainOutcome)  # no wait, no coroutine
    assert answer.result is not None and answer.result.rows == [(2,)]


def test_a_late_table_is_a_plain_wait_counted_and_logged_once() -> None:
    seen: list[tuple[str, str]] = []
    ctx, store = later_context()
    add_items(ctx, 3)
    executor = Executor(ctx.store, observe=lambda name, outcome, s: seen.append((name, outcome)))
    session = PlainSession(server_version="15", user="u")
    wait = executor.statement(COUNT + " WHERE prefix = $1", session, None, params=["p"])
    assert isinstance(wait, PlainWait) and wait.pending is None and seen == []
    answer = asyncio.run(executor.complete(wait))
    assert answer.rows == [(3,)]
    assert seen == [("SELECT", "ok")]
    assert store.reads == ["queue"]  # the awaitable fetched once, evaluated over its frame


@pytest.mark.parametrize(("fail", "sqlstate"), [
    (LimitExceeded("disk use exceeds the limit"), "54000"),
    (RuntimeError("database on fire"), "XX000"),
])
def test_errors_inside_the_wait_keep_their_sqlstate(fail: BaseException, sqlstate: str) -> None:
    seen: list[tuple[str, str]] = []
    ctx, _store = later_context(fail)
    executor = Executor(ctx.store, observe=lambda name, outcome, s: seen.append((name, outcome)))
    wait = executor.statement(COUNT, PlainSession(server_version="15", user="u"), None)
    assert isinstance(wait, PlainWait)
    with pytest.raises(Exception) as caught:
        asyncio.run(executor.complete(wait))
    assert getattr(caught.value, "sqlstate", None) == sqlstate
    assert seen == [("SELECT", sqlstate)]


def test_the_row_bound_holds_for_a_late_table() -> None:
    ctx, _store = later_context()
    add_items(ctx, 5)
    executor = Executor(ctx.store, max_sql_rows=4)
    wait = executor.statement(COUNT, PlainSession(server_version="15", user="u"), None)
    assert isinstance(wait, PlainWait)
    with pytest.raises(LimitExceeded, match="--max-sql-rows=4"):
        asyncio.run(executor.complete(wait))


def test_a_stuck_table_meets_the_statement_timeout() -> None:
    ctx = build_context(Config(test_clock=True))

    class Stuck(Later):
        def system_table(self, name: str) -> Table:
            return asyncio.get_running_loop().create_future()

    async def main() -> None:
        slot: Any = ctx.store
        slot.attach(Stuck(slot.target))
        wait = ctx.executor.statement(COUNT, PlainSession(server_version="15", user="u"), None)
        assert isinstance(wait, WaitFor)
        await ctx.executor.complete(wait, 50)

    with pytest.raises(Exception) as caught:
        asyncio.run(main())
    assert getattr(caught.value, "sqlstate", None) == "57014"


# --- the PostgreSQL session ------------------------------------------------------------


def test_simple_query_waits_then_answers_and_runs_the_rest() -> None:
    ctx, _store = later_context()
    add_items(ctx, 2)
    session = pg(ctx)
    out = drive(ctx, session, m.Query(f"{COUNT}; SELECT 1; SELECT prefix FROM system.queue "
                                      "GROUP BY prefix"))
    assert rows(out) == [(b"2",), (b"1",), (b"p",)]
    assert tags(out) == ["SELECT 1", "SELECT 1", "SELECT 1"]
    assert waits(out) == 2
    assert isinstance(out[-2], m.ReadyForQuery)


def test_simple_query_error_in_the_wait_ends_the_query() -> None:
    ctx, _store = later_context(LimitExceeded("too much"))
    session = pg(ctx)
    out = drive(ctx, session, m.Query(f"{COUNT}; SELECT 1"))
    assert sqlstates(out) == ["54000"] and rows(out) == []
    assert sum(isinstance(msg, m.ReadyForQuery) for msg in out) == 1


def test_extended_protocol_describe_is_at_once_execute_waits() -> None:
    ctx, _store = later_context()
    add_items(ctx, 3)
    session = pg(ctx)
    out = drive(ctx, session,
                m.Parse("", COUNT + " WHERE priority = $1", ()),
                m.Describe("S", ""),
                m.Bind("", "", (), (b"1",), ()),
                m.Execute("", 0),
                m.Sync())
    kinds = [type(msg).__name__ for msg in out]
    assert kinds[:4] == ["ParseComplete", "ParameterDescription", "RowDescription",
                         "BindComplete"]
    assert rows(out) == [(b"3",)] and tags(out) == ["SELECT 1"]
    assert waits(out) == 1


def test_extended_protocol_max_rows_slices_a_late_result() -> None:
    ctx, _store = later_context()
    add_items(ctx, 3)
    session = pg(ctx)
    out = drive(ctx, session,
                m.Parse("", "SELECT id FROM system.queue ORDER BY id", ()),
                m.Bind("", "", (), (), ()),
                m.Execute("", 2),
                m.Execute("", 2),
                m.Sync())
    assert rows(out) == [(b"0",), (b"1",), (b"2",)]  # the keys of p:0, p:1, p:2
    assert any(isinstance(msg, m.PortalSuspended) for msg in out)
    assert tags(out) == ["SELECT 1"]
    assert waits(out) == 1  # the second Execute reads what the first fetched


def test_copy_of_a_late_table() -> None:
    ctx, _store = later_context()
    add_items(ctx, 2)
    session = pg(ctx)
    waited = run_waits(ctx, session, m.Query("COPY (SELECT prefix, count(*) FROM "
                                             "system.queue GROUP BY prefix) TO STDOUT"))
    wire = session.take_bytes()  # the test decoder reads no CopyOutResponse: raw bytes
    assert wire.startswith(b"H") and b"d\x00\x00\x00\x08p\t2\n" in wire
    assert b"C\x00\x00\x00\x0bCOPY 1\x00" in wire and wire.endswith(b"Z\x00\x00\x00\x05I")
    assert waited == 1


# --- the WebSocket session -------------------------------------------------------------


def test_websocket_plain_sql_over_a_late_table() -> None:
    ctx, _store = later_context()
    add_items(ctx, 2)
    session: WsSession[str] = WsSession(
        ctx.executor, DedupTable(60.0), "sock", process_id=None, user="cube",
        server_version=ctx.server_version, max_message_size=1 << 20,
    )
    (event,) = session.receive(encode_query(5, "c1", COUNT))
    assert isinstance(event, Await) and not event.ticket.blocking

    async def settle() -> list[Any]:
        return session.settle(event.ticket, await ctx.executor.complete(event.wait, 0))

    (sent,) = asyncio.run(settle())
    assert isinstance(sent, Send)
    reply = decode_message(sent.frame)
    assert reply.message_id == 5 and reply.command == HttpResultSet(("count",), (("2",),))


def test_websocket_error_inside_the_wait_is_an_http_error() -> None:
    ctx, _store = later_context(LimitExceeded("too much"))
    session: WsSession[str] = WsSession(
        ctx.executor, DedupTable(60.0), "sock", process_id=None, user="cube",
        server_version=ctx.server_version, max_message_size=1 << 20,
    )
    (event,) = session.receive(encode_query(6, None, COUNT))
    assert isinstance(event, Await)

    async def settle() -> list[Any]:
        try:
            result = await ctx.executor.complete(event.wait, 0)
        except Exception as exc:
            return session.settle(event.ticket, error=exc)
        return session.settle(event.ticket, result)

    (sent,) = asyncio.run(settle())
    assert isinstance(sent, Send)
    command = decode_message(sent.frame).command
    assert isinstance(command, HttpError) and "too much" in command.error
