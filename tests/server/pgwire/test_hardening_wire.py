"""The PostgreSQL wire's bounds and faults.

* messages queued behind a RESULT_BLOCKING are capped by the bytes they hold (reading
  pauses), not only by their number: the protocol driven with a fake transport;
* named prepared statements and portals: ``--max-prepared-statements`` per connection;
* a half-closed client still gets its RESULT_BLOCKING's answer, then the close;
* a store step that never completes is canceled after ``statement_timeout`` (57014),
  and ``/readyz`` answers 503 when the store stops answering: a real server in this
  process whose store is wrapped, through the public seam, by one that never answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fake_transport import FakeTransport
from wire_messages import SYNC, bind, parse, query, read_messages, startup, until_ready

from cubequeue.grammar.commands import CacheGet, Command, QueueResultBlocking
from cubequeue.grammar.results import ResultSet
from cubequeue.server.pgwire import connection, listener, queued
from cubequeue.storage.interface import BlockingOutcome, StoreBackend, Table

TIMEOUT_S = 30.0


# --- a connection by hand (its messages: tests/support/wire_messages.py) ---------------


def error_fields(body: bytes) -> dict[str, str]:
    return {part[:1].decode(): part[1:].decode() for part in body.split(b"\0") if part}


def connect_raw(port: int) -> tuple[socket.socket, Iterator[tuple[bytes, bytes]]]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    sock.sendall(startup())
    messages = read_messages(sock)
    until_ready(messages)
    return sock, messages


# --- 14: queued bytes ------------------------------------------------------------------


def _context() -> Any:
    from cubequeue.server.app import build_context
    from cubequeue.server.options import load_config

    return build_context(load_config([], {}))


def test_messages_queued_behind_a_wait_are_capped_by_bytes() -> None:
    async def main() -> None:
        ctx = _context()
        proto = connection.PgProtocol(ctx, None)
        transport = FakeTransport()
        proto.connection_made(transport)  # type: ignore[arg-type]
        proto.data_received(startup())
        proto.data_received(query("QUEUE RESULT_BLOCKING 60000 'held:k'"))
        assert proto._busy is not None  # waiting: what follows is queued
        big = "SELECT 1 /* " + "x" * (queued.MAX_QUEUED_BYTES // 2) + " */"
        proto.data_received(query(big))
        assert not transport.paused
        proto.data_received(query(big) + query(big))  # 3 messages, far under the count cap
        assert transport.paused, "three half-cap queries must pause reading"
        proto.connection_lost(None)
        await asyncio.sleep(0)  # the cancelled wait unwinds

    asyncio.run(main())


# --- 15: prepared statements and portals -----------------------------------------------


@pytest.mark.cubequeue_args("--max-prepared-statements", "3")
def test_named_prepared_statements_are_capped(cubequeue_server: Any) -> None:
    with psycopg.connect(cubequeue_server.dsn, autocommit=True, prepare_threshold=0) as conn:
        for i in range(3):
            conn.execute(f"SELECT {i}", prepare=True)
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded) as caught:
            conn.execute("SELECT 3", prepare=True)
        assert "--max-prepared-statements" in str(caught.value)
        assert conn.execute("SELECT 0", prepare=True).fetchone() == (0,)  # kept ones work
        assert conn.execute("SELECT 4", prepare=False).fetchone() == (4,)  # unnamed too


@pytest.mark.cubequeue_args("--max-prepared-statements", "2")
def test_named_portals_are_capped(cubequeue_server: Any) -> None:
    sock, messages = connect_raw(cubequeue_server.port)
    with sock:
        sock.sendall(parse("", "SELECT 1") + bind("a", "") + bind("b", "") + bind("c", "")
                     + SYNC)
        got = until_ready(messages)
        kinds = [kind for kind, _ in got]
        assert kinds == [b"1", b"2", b"2", b"E", b"Z"]
        fields = error_fields(got[3][1])
        assert fields["C"] == "53400" and "--max-prepared-statements" in fields["M"]
        sock.sendall(query("SELECT 1"))  # the connection goes on
        assert [k for k, _ in until_ready(messages)][-1] == b"Z"


# --- 16: half-close ----------------------------------------------------------------------


def test_a_half_closed_client_gets_its_result_blocking_answer(cubequeue_server: Any) -> None:
    sock, messages = connect_raw(cubequeue_server.port)
    with sock:
        sock.sendall(query(f"QUEUE RESULT_BLOCKING 300 'half{uuid.uuid4().hex[:8]}:k'"))
        sock.shutdown(socket.SHUT_WR)
        rest = list(messages)  # until the server closes
    kinds = [kind for kind, _ in rest]
    assert kinds == [b"T", b"C", b"Z"], rest  # zero rows at its timeout, then the close
    assert rest[1][1].startswith(b"QUEUE RESULT_BLOCKING")


def test_a_half_closed_client_gets_every_pipelined_answer(cubequeue_server: Any) -> None:
    sock, messages = connect_raw(cubequeue_server.port)
    p = f"half{uuid.uuid4().hex[:8]}"
    with sock:
        sock.sendall(query(f"QUEUE RESULT_BLOCKING 300 '{p}:k'") + query("SELECT 7"))
        sock.shutdown(socket.SHUT_WR)
        rest = list(messages)
    assert [kind for kind, _ in rest] == [b"T", b"C", b"Z", b"T", b"D", b"C", b"Z"]


# --- 17: deadlines ---------------------------------------------------------------------


class NeverAnswers:
    """The in-memory store behind the seam, except that ``CACHE GET 'stuck:…'`` (and,
    once ``stuck`` is set, every step) waits forever: a store that stopped answering."""

    def __init__(self, inner: StoreBackend) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.stuck = False
        self.hanging: list[asyncio.Future[ResultSet]] = []

    def _hang(self) -> asyncio.Future[ResultSet]:
        future: asyncio.Future[ResultSet] = asyncio.get_running_loop().create_future()
        self.hanging.append(future)
        return future

    def execute(self, cmd: Command, process_id: str | None = None) -> Any:
        if self.stuck or (isinstance(cmd, CacheGet) and str(cmd.key).startswith("stuck:")):
            return self._hang()
        return self.inner.execute(cmd, process_id)

    def result_blocking(self, cmd: QueueResultBlocking, callback: Callable[[ResultSet], None],
                        process_id: str | None = None) -> BlockingOutcome:
        return self.inner.result_blocking(cmd, callback, process_id)

    def system_table(self, name: str) -> Table:
        return self.inner.system_table(name)

    def stats(self) -> Any:
        return self.inner.stats()

    def now_ms(self) -> int:
        return self.inner.now_ms()


@dataclasses.dataclass
class SlowServer:
    port: int
    http_port: int
    store: NeverAnswers
    loop: asyncio.AbstractEventLoop


@pytest.fixture
def slow_server() -> Iterator[SlowServer]:
    """Both listeners of a real server, in a thread, over a :class:`NeverAnswers` store."""
    from cubequeue.server.app import build_context
    from cubequeue.server.http import start_http_server
    from cubequeue.server.options import load_config

    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        config = dataclasses.replace(load_config([], {}), port=0, http_port=0)  # free ports
        ctx = build_context(config)
        store = NeverAnswers(ctx.store.target)
        ctx.store.attach(store)
        pg = await listener.start_pg_server(ctx)
        http = await start_http_server(ctx)
        done = asyncio.Event()
        box.update(done=done, server=SlowServer(pg.sockets[0].getsockname()[1], http.port,
                                                store, asyncio.get_running_loop()))
        ready.set()
        await done.wait()
        ctx.shutting_down = True
        ctx.connections.shutdown_all()
        pg.close()
        http.close()
        await http.wait_closed()

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT_S)
    yield box["server"]
    box["server"].loop.call_soon_threadsafe(box["done"].set)
    thread.join(TIMEOUT_S)


def test_a_store_step_that_never_answers_meets_statement_timeout(slow_server: SlowServer) -> None:
    dsn = f"postgresql://cube@127.0.0.1:{slow_server.port}/cube"
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("1min",)  # the default
        conn.execute("SET statement_timeout = '200ms'")
        with pytest.raises(psycopg.errors.QueryCanceled) as caught:
            conn.execute("CACHE GET 'stuck:k'")
        assert "statement timeout" in str(caught.value)
        assert conn.execute("CACHE GET 'fine:k'").fetchone() == (None,)  # the session goes on
    with (psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=150") as conn,
          pytest.raises(psycopg.errors.QueryCanceled)):
        conn.execute("CACHE GET 'stuck:k2'")


def test_a_websocket_step_that_never_answers_meets_statement_timeout(
    slow_server: SlowServer,
) -> None:

    from wsclient import WsClient

    from cubequeue.server.cubews.messages import HttpError

    async def main() -> None:
        async with WsClient(f"ws://127.0.0.1:{slow_server.http_port}/ws") as client:
            await client.rows("SET statement_timeout = 200")
            answer = await client.query("CACHE GET 'stuck:w'", timeout=TIMEOUT_S)
            assert isinstance(answer, HttpError) and "statement timeout" in answer.error

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readyz_runs_a_store_round_trip(slow_server: SlowServer) -> None:
    assert _readyz(slow_server.http_port) == (200, "ready\n")
    slow_server.store.stuck = True
    status, body = _readyz(slow_server.http_port)
    assert status == 503 and "did not answer" in body
    slow_server.store.stuck = False
    assert _readyz(slow_server.http_port) == (200, "ready\n")
