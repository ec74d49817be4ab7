"""kill -9 over both wires: a durable server is killed at seeded moments and restarted
on the same data directory, and :mod:`killkit`'s checker compares what it holds with
what the clients were told.

Clients on the PostgreSQL wire (psycopg 3) and on Cube Store's WebSocket
(``tests/support/wsclient.py``) run ADD, RETRIEVE, HEARTBEAT, ACK, RESULT_BLOCKING and CACHE
SET on unique keys. The kill comes after a seeded number of acknowledged commands (no
sleeping: the moment is a point in the command stream, not on the clock). Under
``--fsync always`` every acknowledged command is fsynced; under ``everysec`` it is
written, and a kill -9 (unlike a power loss) keeps what was written, so the same strict
checker applies to both.

The short run (in ``make test``) kills each mode a few times; ``CUBEQUEUE_LONG_TESTS=1``
kills it many more times. The totals are printed (``-s`` shows them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg
import pytest
from killkit import CACHE_PREFIX, PREFIX, STEPS, KeyHistory, Ledger, Observed, check
from wsclient import WsClient, rows  # tests/support is on the test path

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

LONG = os.environ.get("CUBEQUEUE_LONG_TESTS") == "1"
KILLS = 40 if LONG else 3
PG_CLIENTS = 3
WS_CLIENTS = 3
#: a round is killed after this many acknowledged commands (seeded within the range)
KILL_AFTER = (60, 400)
#: generous: a reply under --fsync always waits for an fsync on a shared, busy disk
REPLY_TIMEOUT_S = 30.0
#: generous: recovery on a shared machine
READY_TIMEOUT_S = 120.0

Run = Callable[[str], Awaitable[list[tuple[object, ...]]]]


class Killed(Exception):
    """The round's kill happened; the client stops."""


class Round:
    """One server life: clients run keys until the seeded kill."""

    def __init__(self, ledger: Ledger, server: CubequeueServer, rng: random.Random,
                 number: int) -> None:
        self.ledger = ledger
        self.server = server
        self.rng = rng
        self.number = number
        self.kill_after = ledger.acked_ops + rng.randint(*KILL_AFTER)
        self.killed = False

    def acked(self) -> None:
        self.ledger.acked_ops += 1
        if not self.killed and self.ledger.acked_ops >= self.kill_after:
            self.killed = True
            os.kill(self.server.process.pid, signal.SIGKILL)
        if self.killed:
            raise Killed

    async def client(self, name: str, run: Run, stops: list[int]) -> None:
        for n, stop in enumerate(stops):
            history = self.ledger.key(f"r{self.number}-{name}-{n}")
            for step in STEPS[:stop]:
                history.sent.add(step)
                self.ledger.sent_ops += 1
                got = await asyncio.wait_for(run(_sql(step, history)), REPLY_TIMEOUT_S)
                _record(self.ledger, history, step, got)
                history.acked.add(step)
                self.acked()


def _sql(step: str, h: KeyHistory) -> str:
    if step == "add":
        return f"QUEUE ADD PRIORITY 1 '{h.path}' '{h.payload}'"
    if step == "retrieve":
        return f"QUEUE RETRIEVE CONCURRENCY 100000 '{h.path}'"
    if step == "heartbeat":
        return f"QUEUE HEARTBEAT {h.id}"
    if step == "ack":
        return f"QUEUE ACK {h.id} '{h.result}'"
    if step == "result_blocking":
        return f"QUEUE RESULT_BLOCKING 10000 {h.id}"
    return f"CACHE SET '{CACHE_PREFIX}:{h.key}' '{h.cache_value}'"


def _record(ledger: Ledger, h: KeyHistory, step: str, got: list[tuple[object, ...]]) -> None:
    if step == "add":
        assert got and str(got[0][1]).lower() in ("true", "t", "1"), got
        h.id = int(str(got[0][0]))
        ledger.saw_id(h.id)
    elif step == "retrieve":
        assert got and got[0][0] == h.payload, got
    elif step == "result_blocking":
        h.blocking_result = str(got[0][0]) if got else None


async def _pg_client(round_: Round, name: str, stops: list[int]) -> None:
    try:
        conn = await psycopg.AsyncConnection.connect(round_.server.dsn, autocommit=True)
    except psycopg.OperationalError:
        if round_.killed:
            return
        raise
    try:
        async def run(sql: str) -> list[tuple[object, ...]]:
            cur = await conn.execute(sql)
            return await cur.fetchall() if cur.description else []

        await round_.client(name, run, stops)
    except (Killed, psycopg.OperationalError):
        if not round_.killed:
            raise
    finally:
        await conn.close()


async def _ws_client(round_: Round, name: str, stops: list[int]) -> None:
    client = WsClient(round_.server.ws_url)
    try:
        await client.connect()
    except OSError:
        if round_.killed:
            return
        raise

    async def run(sql: str) -> list[tuple[object, ...]]:
        return [tuple(row.values()) for row in rows(await client.query(sql, timeout=3600))]

    try:
        await round_.client(name, run, stops)
    except Killed:
        pass
    finally:
        await client.drop()


async def _workload(round_: Round) -> None:
    rng = round_.rng
    loop = asyncio.get_running_loop()

    def quiet_after_kill(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if not round_.killed:  # a WebSocket send cut by the kill is expected, not news
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet_after_kill)
    # psycopg tries to cancel the query of a connection cut by the kill and warns each time
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    jobs = []
    for i in range(PG_CLIENTS + WS_CLIENTS):
        stops = [rng.randint(1, len(STEPS)) for _ in range(10_000)]
        if i < PG_CLIENTS:
            jobs.append(asyncio.ensure_future(_pg_client(round_, f"pg{i}", stops)))
        else:
            jobs.append(asyncio.ensure_future(_ws_client(round_, f"ws{i}", stops)))
    try:
        while not round_.killed:
            done, _ = await asyncio.wait(jobs, timeout=60, return_when=asyncio.FIRST_COMPLETED)
            for job in done:
                job.result()  # a client that failed before the kill fails the test
            assert done or round_.killed, "no client finished or acked within 60 s"
            assert round_.killed or not all(j.done() for j in jobs), "clients ran out of keys"
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)


def _observe(server: CubequeueServer) -> Observed:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        # Plain SQL cannot wait for the log (the executor refuses a system table the
        # durable store hands back as an awaitable), so first a dialect read that waits
        # until the restarted server's own records (its id reservation) are released; the
        # server is idle after it, so the SELECTs below read released state.
        conn.execute(f"QUEUE GET '{PREFIX}:none'").fetchall()
        queue = {
            f"{prefix}:{key}": (int(qid), str(status), str(value))
            for key, qid, prefix, status, value in conn.execute(
                "SELECT id, queue_id, prefix, status, value FROM system.queue "
                f"WHERE prefix = '{PREFIX}'")
        }
        results = {
            int(qid): (str(path), str(value))
            for qid, path, value in conn.execute(
                "SELECT id, path, value FROM system.queue_results")
            if str(path).startswith(f"{PREFIX}:")
        }
        cache = {
            str(key): str(value)
            for key, value in conn.execute(
                f"SELECT id, value FROM system.cache WHERE prefix = '{CACHE_PREFIX}'")
        }
    return Observed(queue, results, cache)


def _start(data_dir: Path, fsync: str) -> CubequeueServer:
    """A server on ``data_dir``, once its recovery is done (the ports accept before that
    when recovery takes over two seconds, answering 57P03 meanwhile)."""
    server = start_cubequeue("--data-dir", str(data_dir), "--fsync", fsync,
                             "--results-expire", "300", test_clock=False)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute(f"QUEUE GET '{PREFIX}:none'").fetchall()
            return server
        except psycopg.errors.CannotConnectNow:
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.05)


@pytest.mark.timeout(3600 if LONG else 300)  # the long run: ~10 s a kill on a busy machine
@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_kill_9_keeps_every_acknowledged_write(tmp_path: Path, fsync: str) -> None:
    """Each server life: check what it recovered, run the clients, kill -9 it."""
    rng = random.Random(f"kill-9-{fsync}")
    ledger = Ledger()
    data_dir = tmp_path / "data"
    server = _start(data_dir, fsync)
    try:
        for number in range(KILLS + 1):
            if number:
                problems = check(ledger, _observe(server))
                assert not problems, "\n".join(problems[:20])
            if number == KILLS:
                break
            ledger.start_round()
            round_ = Round(ledger, server, rng, number)
            asyncio.run(_workload(round_))
            assert round_.killed
            assert server.process.wait(30) == -signal.SIGKILL
            server.stop()
            server = _start(data_dir, fsync)
    finally:
        server.stop()
    print(f"\nkill -9 ({fsync}): {KILLS} kills, {ledger.sent_ops} commands sent, "
          f"{ledger.acked_ops} acknowledged, {len(ledger.keys)} keys, "
          f"highest id {ledger.max_seen_id}")
