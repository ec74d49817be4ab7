"""Caps and waits on the PostgreSQL wire that the first round of tests left out (issues 4, 9).

* ``--max-blocking-timeout`` caps a RESULT_BLOCKING asked to wait far longer;
* ``--max-connections-per-user`` refuses the next connection of that user with 53300,
  names the option, lets another user in and frees its slot when a connection closes;
* a CancelRequest with the right pid and a wrong secret cancels nothing: the waiter is
  still registered and is woken by a later ACK (not a timing argument);
* with ``--test-clock``, ``SYS CLOCK ADVANCE`` does not shorten a pending
  RESULT_BLOCKING: its deadline is on real time ("Pending RESULT_BLOCKING
  deadlines stay on real time").

Each test starts its own server so that the gauges it polls and the clock it moves are
its own. Durations are lower bounds measured with ``time.monotonic`` or generous upper
bounds; nothing compares timestamps after a sleep.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from cubequeue.server.pgclient import PgClient, QueryResult, RawClient, connect
from cubequeue.server.pgwire import messages as m

P3 = 196608
StartServer = Callable[..., Any]


def pg(srv: Any, user: str = "cube") -> PgClient:
    return connect(srv.host, srv.port, user=user, timeout=60)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def waiters(srv: Any) -> float:
    with urllib.request.urlopen(f"{srv.http_url}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("cubequeue_blocked_waiters "):
                return float(line.split()[1])
    raise AssertionError("no cubequeue_blocked_waiters gauge")


def rows(msgs: list[m.BackendMessage]) -> list[tuple[bytes | None, ...]]:
    return [msg.values for msg in msgs if isinstance(msg, m.DataRow)]


def errors(msgs: list[m.BackendMessage]) -> list[tuple[str | None, str | None]]:
    return [(msg.get("S"), msg.get("C")) for msg in msgs if isinstance(msg, m.ErrorResponse)]


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` in a thread; the list gets ("ok", value) or ("error", exception)."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(("ok", fn()))
        except BaseException as exc:  # reported to the test thread
            out.append(("error", exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


# ------------------------------------------------------------ --max-blocking-timeout


def test_max_blocking_timeout_caps_a_long_result_blocking(start_server: StartServer) -> None:
    srv = start_server("--max-blocking-timeout", "500")
    with pg(srv) as client:
        started = time.monotonic()
        results = client.query("QUEUE RESULT_BLOCKING 60000 'a:b'")
        took = time.monotonic() - started
    assert len(results) == 1
    assert results[0].rows == []
    assert results[0].columns == ["payload", "type", "id", "external_id"]
    # 60 s asked, 0.5 s allowed: anything near a minute means the cap was ignored
    assert took < 20, f"RESULT_BLOCKING 60000 took {took:.1f} s under a 500 ms cap"


# ------------------------------------------------------- --max-connections-per-user


def _startup(srv: Any, user: str) -> tuple[RawClient, m.BackendMessage | None]:
    """A raw connection and the first answer to its StartupMessage."""
    client = RawClient(srv.host, srv.port, timeout=30)
    client.send(m.StartupMessage(P3, (("user", user), ("database", "cube"))))
    return client, client.receive()


def _admitted(srv: Any, user: str) -> RawClient | None:
    client, first = _startup(srv, user)
    if isinstance(first, m.AuthenticationOk):
        client.until(m.ReadyForQuery)
        return client
    client.close()
    return None


def test_max_connections_per_user_on_the_pg_wire(start_server: StartServer) -> None:
    srv = start_server("--max-connections-per-user", "2")
    first = _admitted(srv, "cube")
    second = _admitted(srv, "cube")
    assert first is not None and second is not None

    third, answer = _startup(srv, "cube")
    with third:
        assert isinstance(answer, m.ErrorResponse), answer
        assert (answer.get("S"), answer.get("C")) == ("FATAL", "53300")
        message = answer.get("M") or ""
        assert "--max-connections-per-user" in message
        assert "2" in message
        assert third.receive() is None  # the server closed it

    # the cap is per user: another name still gets in, and works
    other = _admitted(srv, "alice")
    assert other is not None
    with other:
        assert rows(other.query("SELECT 1")) == [(b"1",)]

    # the two admitted connections still work
    assert rows(first.query("SELECT 1")) == [(b"1",)]
    assert rows(second.query("SELECT 1")) == [(b"1",)]

    # closing one frees a slot (the server notices the close asynchronously)
    first.close()
    admitted: list[RawClient] = []

    def again() -> bool:
        client = _admitted(srv, "cube")
        if client is not None:
            admitted.append(client)
        return client is not None

    wait_for(again, "a slot to free up after a close")
    with admitted[0] as fresh:
        assert rows(fresh.query("SELECT 1")) == [(b"1",)]
        # and the cap holds again with two open
        refused, answer = _startup(srv, "cube")
        with refused:
            assert isinstance(answer, m.ErrorResponse)
            assert answer.get("C") == "53300"
    second.close()


# ------------------------------------------------------------ CancelRequest secret


def test_cancel_request_with_a_wrong_secret_cancels_nothing(start_server: StartServer) -> None:
    srv = start_server()
    with RawClient(srv.host, srv.port, timeout=60) as waiter, pg(srv) as worker:
        out = waiter.startup()
        (key,) = [msg for msg in out if isinstance(msg, m.BackendKeyData)]
        worker.query("QUEUE ADD PRIORITY 1 'wc:a' 'payload'")
        # long enough that only the ACK below can end it within the test's bounds
        waiter.send(m.Query("QUEUE RESULT_BLOCKING 30000 'wc:a'"))
        wait_for(lambda: waiters(srv) == 1, "the RESULT_BLOCKING waiter")

        for wrong in (key.secret_key ^ 1, key.secret_key ^ 0x7FFF0000, 0):
            if wrong == key.secret_key:
                continue
            with RawClient(srv.host, srv.port, timeout=30) as cancel:
                cancel.send(m.CancelRequest(key.process_id, wrong))
                assert cancel.receive() is None  # handled and closed, as PostgreSQL does

        # the server has handled every CancelRequest (it closed each socket); the waiter
        # must still be registered and the connection must not have answered anything
        assert waiters(srv) == 1
        waiter.sock.settimeout(0.2)
        try:
            early = waiter.sock.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            early = b""
        waiter.sock.settimeout(60)
        assert early == b"", "the waiting connection answered before any ACK"

        worker.query("QUEUE RETRIEVE CONCURRENCY 1 'wc:a'")
        acked = worker.query("QUEUE ACK 'wc:a' 'the result'")
        assert acked[-1].rows == [("t",)]

        out = waiter.until(m.ReadyForQuery)
        assert errors(out) == []
        got = rows(out)
        assert len(got) == 1
        assert got[0][:2] == (b"the result", b"success")
        assert [msg.tag for msg in out if isinstance(msg, m.CommandComplete)] == [
            "QUEUE RESULT_BLOCKING 1"
        ]
        assert out[-1] == m.ReadyForQuery("I")
    wait_for(lambda: waiters(srv) == 0, "the waiter gauge to drop")


# ------------------------------------------------------------- real-time deadlines


def test_clock_advance_does_not_shorten_a_pending_result_blocking(
    start_server: StartServer,
) -> None:
    srv = start_server("--test-clock")
    with pg(srv) as worker:
        worker.query("QUEUE ADD PRIORITY 1 'rt:a' 'payload'")

        def blocking() -> tuple[float, list[QueryResult]]:
            with pg(srv) as client:
                started = time.monotonic()
                results = client.query("QUEUE RESULT_BLOCKING 1500 'rt:a'")
                return time.monotonic() - started, results

        thread, out = in_thread(blocking)
        wait_for(lambda: waiters(srv) == 1, "the RESULT_BLOCKING waiter")
        advanced = worker.query("SYS CLOCK ADVANCE 100000")
        assert advanced[-1].columns == ["now", "offset_ms", "frozen"]
        assert advanced[-1].rows[0][1] == "100000"
        thread.join(30)
        assert not thread.is_alive(), "RESULT_BLOCKING 1500 did not return"
        assert out and out[0][0] == "ok", out
        took, results = out[0][1]
        assert results[-1].rows == []  # a timeout: zero rows
        # 100 s of store time passed, yet the wait lasted its 1.5 s of real time
        assert took >= 1.2, f"RESULT_BLOCKING 1500 ended after {took:.3f} s"
        assert waiters(srv) == 0

        # the queue still works normally after the jump: the item is there, an ACK wakes
        # a new waiter and stores the result
        assert worker.query("QUEUE GET 'rt:a'")[-1].rows == [("payload", None)]

        def woken_by_ack() -> list[QueryResult]:
            with pg(srv) as client:
                return client.query("QUEUE RESULT_BLOCKING 30000 'rt:a'")

        thread, out = in_thread(woken_by_ack)
        wait_for(lambda: waiters(srv) == 1, "the second waiter")
        assert worker.query("QUEUE RETRIEVE CONCURRENCY 1 'rt:a'")[-1].rows[0][0] == "payload"
        assert worker.query("QUEUE ACK 'rt:a' 'late result'")[-1].rows == [("t",)]
        thread.join(30)
        assert out and out[0][0] == "ok", out
        woken = out[0][1][-1].rows
        assert len(woken) == 1 and woken[0][:2] == ("late result", "success")
        assert worker.query("QUEUE ACK 'rt:a' 'again'")[-1].rows == [("f",)]
