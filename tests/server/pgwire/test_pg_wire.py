"""The listener over real sockets, with raw messages: first packets, limits, pipelining,
blocking waits, cancel, disconnects, garbage, shutdown and TLS."""

from __future__ import annotations

import signal
import socket
import struct
import threading
import time
import urllib.request
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tls import self_signed

from cubequeue.server.pgclient import RawClient
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import encode_frontend

P3 = 196608


def prefix() -> str:
    return "w" + uuid.uuid4().hex[:10]


def connect(server) -> RawClient:
    client = RawClient(server.host, server.port)
    client.startup()
    return client


def errors(msgs):
    return [(msg.get("S"), msg.get("C")) for msg in msgs if isinstance(msg, m.ErrorResponse)]


def rows(msgs):
    return [msg.values for msg in msgs if isinstance(msg, m.DataRow)]


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def waiters(server) -> float:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("cubequeue_blocked_waiters "):
                return float(line.split()[1])
    raise AssertionError("no waiter gauge")


def test_ssl_and_gssenc_requests_answered_n(server):
    with RawClient(server.host, server.port) as c:
        c.send(m.GSSENCRequest())
        assert c.recv_byte() == b"N"
        c.send(m.SSLRequest())
        assert c.recv_byte() == b"N"
        out = c.startup()
        assert out[-1] == m.ReadyForQuery("I")


def test_negotiate_protocol_version_over_the_wire(server):
    with RawClient(server.host, server.port) as c:
        c.send(m.StartupMessage((3 << 16) | 9999, (("user", "u"), ("_pq_.x", "y"))))
        out = c.until(m.ReadyForQuery)
        assert out[0] == m.NegotiateProtocolVersion(0, ("_pq_.x",))


def test_two_thousand_syncs(server):
    with connect(server) as c:
        c.send_raw(encode_frontend(m.Sync()) * 2000)
        out = c.until(m.ReadyForQuery, 2000)
        assert len(out) == 2000


def test_thousands_of_pipelined_queries_answered_in_order(server):
    p = prefix()
    with connect(server) as c, connect(server) as other:
        batch = b"".join(encode_frontend(m.Query(f"QUEUE ADD '{p}:{i}' 'x'")) for i in range(3000))
        sender = threading.Thread(target=c.send_raw, args=(batch,))
        sender.start()
        # another connection is served while the pipeline is in flight
        assert other.query(f"QUEUE LIST '{p}x'")[-1] == m.ReadyForQuery("I")
        out = c.until(m.ReadyForQuery, 3000)
        sender.join()
        ids = [int(v[0]) for v in rows(out)]
        assert ids == sorted(ids) and len(ids) == 3000


def test_flush_answers_without_sync(server):
    with connect(server) as c:
        c.send(m.Parse("s", "QUEUE GET $1"), m.Describe("S", "s"), m.Flush())
        out = c.until(m.RowDescription)
        assert out[:2] == [m.ParseComplete(), m.ParameterDescription((25,))]


def test_garbage_closes_only_that_connection(server):
    with connect(server) as good, connect(server) as bad:
        bad.send_raw(b"?\0\0\0\x04")
        err = bad.receive()
        assert isinstance(err, m.ErrorResponse)
        assert (err.get("S"), err.get("C")) == ("FATAL", "08P01")
        assert bad.receive() is None
        assert good.query("SELECT 1")[-1] == m.ReadyForQuery("I")


@settings(
    deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(garbage=st.binary(min_size=1, max_size=64), after_startup=st.booleans())
def test_random_garbage_never_disturbs_another_connection(server, garbage, after_startup):
    with connect(server) as good:
        with RawClient(server.host, server.port, timeout=5) as bad:
            if after_startup:
                bad.startup()
            bad.send_raw(garbage)
            bad.sock.shutdown(socket.SHUT_WR)
            try:
                while bad.receive() is not None:
                    pass
            except (ConnectionError, OSError):
                pass
        assert good.query("SELECT 1")[-1] == m.ReadyForQuery("I")


def test_startup_packet_over_10000_bytes_is_refused(server):
    with RawClient(server.host, server.port) as c:
        c.send_raw(struct.pack("!ii", 10_001, P3))  # the body is never sent
        err = c.receive()
        assert (err.get("S"), err.get("C")) == ("FATAL", "08P01")
        assert c.receive() is None


def test_max_message_size_refuses_from_the_header(start_server):
    srv = start_server("--max-message-size", "1000")
    with connect(srv) as c:
        assert c.query("QUEUE LIST '" + "x" * 900 + "'")[-1] == m.ReadyForQuery("I")
        c.send_raw(b"Q" + struct.pack("!i", 50_000_000))  # only the header
        err = c.receive()
        assert (err.get("S"), err.get("C")) == ("FATAL", "08P01")
        assert "maximum message size" in err.get("M")
        assert c.receive() is None


def test_max_connections_is_53300(start_server):
    srv = start_server("--max-connections", "2")
    a, b = connect(srv), connect(srv)
    with RawClient(srv.host, srv.port) as c:
        c.send(m.StartupMessage(P3, (("user", "cube"),)))
        err = c.receive()
        assert (err.get("S"), err.get("C")) == ("FATAL", "53300")
        assert c.receive() is None
    a.close()
    wait_for(lambda: _can_connect(srv))
    b.close()


def _can_connect(srv) -> bool:
    with RawClient(srv.host, srv.port) as c:
        c.send(m.StartupMessage(P3, (("user", "cube"),)))
        return isinstance(c.receive(), m.AuthenticationOk)


def _blocking_execute(c: RawClient, path: str, timeout_ms: int = 60_000) -> None:
    c.send(
        m.Parse("", f"QUEUE RESULT_BLOCKING {timeout_ms} $1"),
        m.Bind("", "", (), (path.encode(),)),
        m.Execute(""),
        m.Sync(),
    )


def test_result_blocking_woken_by_ack_and_pipelined_messages_wait_their_turn(server):
    p = prefix()
    with connect(server) as waiter, connect(server) as worker:
        worker.query(f"QUEUE ADD '{p}:a' 'payload'")
        _blocking_execute(waiter, f"{p}:a")
        waiter.send(m.Query(f"QUEUE LIST '{p}'"))  # queued behind the wait
        wait_for(lambda: waiters(server) >= 1)
        assert worker.query(f"QUEUE RETRIEVE CONCURRENCY 1 '{p}:a'")[-1] == m.ReadyForQuery("I")
        out = worker.query(f"QUEUE ACK '{p}:a' 'the result'")
        assert rows(out) == [(b"t",)]
        out = waiter.until(m.ReadyForQuery, 2)
        assert rows(out)[0][:2] == (b"the result", b"success")
        tags = [msg.tag for msg in out if isinstance(msg, m.CommandComplete)]
        assert tags == ["QUEUE RESULT_BLOCKING 1", "QUEUE LIST 0"]


def test_cancel_request_interrupts_result_blocking(server):
    p = prefix()
    with RawClient(server.host, server.port) as waiter:
        out = waiter.startup()
        (key,) = [msg for msg in out if isinstance(msg, m.BackendKeyData)]
        _blocking_execute(waiter, f"{p}:never")
        wait_for(lambda: waiters(server) >= 1)
        # a wrong secret does nothing
        with RawClient(server.host, server.port) as cancel:
            cancel.send(m.CancelRequest(key.process_id, key.secret_key ^ 1))
            assert cancel.receive() is None
        with RawClient(server.host, server.port) as cancel:
            cancel.send(m.CancelRequest(key.process_id, key.secret_key))
            assert cancel.receive() is None
        out = waiter.until(m.ReadyForQuery)
        assert errors(out) == [("ERROR", "57014")]
        assert out[-2].get("M") == "canceling statement due to user request"
        assert waiter.query("SELECT 1")[-1] == m.ReadyForQuery("I")


def test_disconnect_during_wait_withdraws_the_waiter(server):
    p = prefix()
    base = waiters(server)
    c = connect(server)
    _blocking_execute(c, f"{p}:gone")
    wait_for(lambda: waiters(server) >= base + 1)
    c.close()
    wait_for(lambda: waiters(server) <= base)


def test_shutdown_sends_57p01_to_idle_and_blocked_connections(start_server):
    srv = start_server()
    idle, blocked = connect(srv), connect(srv)
    _blocking_execute(blocked, "sd:x")
    wait_for(lambda: waiters(srv) >= 1)
    srv.process.send_signal(signal.SIGTERM)
    for c in (idle, blocked):
        err = c.until(m.ErrorResponse)[-1]
        assert (err.get("S"), err.get("C")) == ("FATAL", "57P01")
        assert err.get("M") == "terminating connection due to administrator command"
        assert c.receive() is None
    assert srv.process.wait(30) == 0


@pytest.mark.parametrize("method", ["scram-sha-256", "md5"])
def test_password_auth(start_server, method):
    srv = start_server("--ws-auth", "none", "--auth", method, "--password", "pa ss")
    dsn = f"host={srv.host} port={srv.port} user=cube dbname=cube"
    with psycopg.connect(dsn + " password='pa ss'", autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn + " password=wrong")


def test_users_file_and_unknown_user(start_server, tmp_path):
    users = tmp_path / "users"
    users.write_text("# comment\nalice:wonder\n")
    srv = start_server("--ws-auth", "none", "--auth", "scram-sha-256", "--users-file", str(users))
    dsn = f"host={srv.host} port={srv.port} dbname=cube"
    with psycopg.connect(dsn + " user=alice password=wonder") as conn:
        assert conn.execute("SHOW session_authorization").fetchone() == ("alice",)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn + " user=bob password=wonder")


def test_tls(start_server, tmp_path):
    cert, key = self_signed(tmp_path)
    srv = start_server("--tls-cert", str(cert), "--tls-key", str(key))
    dsn = f"host={srv.host} port={srv.port} user=cube dbname=cube"
    with psycopg.connect(dsn + " sslmode=require", autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("QUEUE ADD 'tls:a' 'x'").fetchone()[1] is True
    with psycopg.connect(dsn + " sslmode=disable", autocommit=True) as conn:
        assert not conn.pgconn.ssl_in_use
        assert conn.execute("QUEUE GET 'tls:a'").fetchone() == ("x", None)
