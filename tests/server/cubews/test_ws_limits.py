"""Memory one WebSocket client may hold, against the real server.

* The resend table is bounded in bytes per connection_id (``--max-ws-resend-bytes``) and
  in total (``--max-ws-resend-total-bytes``): an answer beyond the bound still reaches
  its socket, but a resend of it gets an HttpError naming the limit, and never runs the
  statement a second time.
* With ``--ws-auth basic`` only the user who sent a message may replay its ids.
* RESULT_BLOCKING: at most ``--max-ws-blocking-waits`` per socket, each message at most
  ``--max-blocking-message-bytes``.

Answers are kept until the client pongs the ping that follows them; the resend tests
use a client that never pongs (:class:`SilentClient`, websockets' sans-I/O protocol on
a plain socket), so what the table keeps does not depend on timing.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import time
import uuid
from collections.abc import Sequence
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri
from wsclient import WsClient, rows

from cubequeue.server.cubews.codec import decode_message, encode_query
from cubequeue.server.cubews.dedup import Cached, DedupTable, Refused
from cubequeue.server.cubews.messages import HttpError, HttpResultSet, ParamValue

TIMEOUT_S = 20.0


class SilentClient:
    """A WebSocket client that reads answers but never answers a ping: every answer it
    gets stays unconfirmed in the server's resend table."""

    def __init__(self, url: str, connection_id: str, headers: dict[str, str] | None = None):
        self.connection_id = connection_id
        uri = parse_uri(url)
        self.sock = socket.create_connection((uri.host, uri.port), timeout=TIMEOUT_S)
        self.proto = ClientProtocol(uri, max_size=None)
        request = self.proto.connect()
        for name, value in (headers or {}).items():
            request.headers[name] = value
        self.proto.send_request(request)
        self._flush()
        self.answers: dict[int, HttpResultSet | HttpError] = {}
        self.response: Response | None = None
        while self.response is None:
            for event in self._read():
                if isinstance(event, Response):
                    self.response = event

    def _flush(self) -> None:
        self.sock.sendall(b"".join(self.proto.data_to_send()))

    def _read(self) -> list[Frame | Response]:
        data = self.sock.recv(1 << 20)
        assert data, "the server closed the connection"
        self.proto.receive_data(data)
        events = self.proto.events_received()
        self.proto.data_to_send()  # the pongs the protocol queued: never sent
        return [e for e in events if isinstance(e, Frame | Response)]

    def ask(self, message_id: int, sql: str, params: Sequence[ParamValue] = ()) -> Any:
        """Send one message and wait for its answer."""
        frame = encode_query(message_id, self.connection_id, sql, parameters=list(params))
        self.proto.send_binary(frame)
        self._flush()
        deadline = time.monotonic() + 3 * TIMEOUT_S  # pings alone must not keep it waiting
        while message_id not in self.answers:
            assert time.monotonic() < deadline, f"no answer to message {message_id}"
            for event in self._read():
                if isinstance(event, Frame) and event.opcode is Opcode.BINARY:
                    message = decode_message(event.data)
                    assert isinstance(message.command, HttpResultSet | HttpError)
                    self.answers[message.message_id] = message.command
        return self.answers[message_id]

    def close(self) -> None:
        self.sock.close()


def prefix() -> str:
    return f"l{uuid.uuid4().hex[:10]}"


def error_of(answer: Any) -> str:
    assert isinstance(answer, HttpError), answer
    return answer.error


def test_a_resend_of_an_answer_not_kept_is_refused_and_never_reruns(ws_start) -> None:
    server = ws_start("--max-ws-resend-bytes", "2048")
    p = prefix()
    conn = str(uuid.uuid4())
    first = SilentClient(server.ws_url, conn)
    assert rows(first.ask(1, "CACHE SET ? ?", [f"{p}:big", "x" * 1700])) == [{"success": "true"}]
    assert len(rows(first.ask(2, "CACHE GET ?", [f"{p}:big"]))[0]["value"] or "") == 1700
    # the GET's answer fills the connection's budget: INCR's answer is sent, not kept
    assert rows(first.ask(3, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "1"}]
    assert rows(first.ask(4, "QUEUE ADD PRIORITY 1 ? ?", [f"{p}:job", "x"]))[0]["added"] == "true"

    again = SilentClient(server.ws_url, conn)  # Cube's resend on a new socket
    assert "--max-ws-resend-bytes" in error_of(again.ask(3, "CACHE INCR ?", [f"{p}:n"]))
    assert "--max-ws-resend-bytes" in error_of(
        again.ask(4, "QUEUE ADD PRIORITY 1 ? ?", [f"{p}:job", "x"]))
    # a kept answer is still replayed, not rerun
    assert rows(again.ask(1, "CACHE SET ? ?", [f"{p}:big", "y"])) == [{"success": "true"}]
    assert rows(again.ask(5, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "2"}]  # 3 if rerun
    pending = rows(again.ask(6, f"QUEUE PENDING '{p}'"))
    assert [r["id"] for r in pending] == ["job"]
    assert len(rows(again.ask(7, "CACHE GET ?", [f"{p}:big"]))[0]["value"] or "") == 1700
    first.close()
    again.close()


def test_the_total_bound_spans_connections(ws_start) -> None:
    server = ws_start("--max-ws-resend-total-bytes", "2048")
    p = prefix()
    a = SilentClient(server.ws_url, str(uuid.uuid4()))
    b = SilentClient(server.ws_url, str(uuid.uuid4()))
    a.ask(1, "CACHE SET ? ?", [f"{p}:big", "x" * 1700])
    a.ask(2, "CACHE GET ?", [f"{p}:big"])
    assert rows(b.ask(1, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "1"}]
    b2 = SilentClient(server.ws_url, b.connection_id)
    assert "--max-ws-resend-total-bytes" in error_of(b2.ask(1, "CACHE INCR ?", [f"{p}:n"]))
    assert rows(b2.ask(2, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "2"}]
    for client in (a, b, b2):
        client.close()


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_only_the_same_user_may_replay_a_connection_id(ws_start, tmp_path) -> None:
    users = tmp_path / "users"
    users.write_text("alice:wonderland\nbob:builder\n")
    server = ws_start("--auth", "scram-sha-256", "--users-file", str(users),
                      "--ws-auth", "basic")
    p = prefix()
    conn = str(uuid.uuid4())
    alice = SilentClient(server.ws_url, conn, _basic("alice", "wonderland"))
    assert rows(alice.ask(1, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "1"}]
    bob = SilentClient(server.ws_url, conn, _basic("bob", "builder"))
    assert "another user" in error_of(bob.ask(1, "CACHE INCR ?", [f"{p}:n"]))
    alice2 = SilentClient(server.ws_url, conn, _basic("alice", "wonderland"))
    assert rows(alice2.ask(1, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "1"}]  # replayed
    assert rows(alice2.ask(2, "CACHE INCR ?", [f"{p}:n"])) == [{"value": "2"}]
    for client in (alice, bob, alice2):
        client.close()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_result_blocking_waits_per_socket_are_capped(ws_start) -> None:
    server = ws_start("--max-ws-blocking-waits", "3")
    p = prefix()

    async def main() -> None:
        async with WsClient(server.ws_url) as client:
            waits = [client.send(f"QUEUE RESULT_BLOCKING 60000 '{p}:k{i}'") for i in range(3)]
            # messages run in order, so the fourth finds three waiting
            over = await asyncio.wait_for(client.send(f"QUEUE RESULT_BLOCKING 60000 '{p}:k3'"),
                                          TIMEOUT_S)
            assert isinstance(over, HttpError)
            assert "--max-ws-blocking-waits" in over.error
            assert not any(w.done() for w in waits)
            # a settled wait frees its place
            await client.rows(f"QUEUE ADD PRIORITY 1 '{p}:k0' 'x'")
            await client.rows(f"QUEUE RETRIEVE '{p}:k0'")
            await client.rows(f"QUEUE ACK '{p}:k0' 'done'")
            assert rows(await asyncio.wait_for(waits[0], TIMEOUT_S))[0]["payload"] == "done"
            await client.rows(f"QUEUE ADD PRIORITY 1 '{p}:k4' 'x'")
            await client.rows(f"QUEUE RETRIEVE '{p}:k4'")
            late = client.send(f"QUEUE RESULT_BLOCKING 60000 '{p}:k4'")
            await client.rows(f"QUEUE ACK '{p}:k4' 'four'")
            assert rows(await asyncio.wait_for(late, TIMEOUT_S))[0]["payload"] == "four"

    run(main())


def test_a_large_result_blocking_message_is_refused(ws_start) -> None:
    server = ws_start("--max-blocking-message-bytes", "2048")
    p = prefix()

    async def main() -> None:
        async with WsClient(server.ws_url) as client:
            padded = f"QUEUE RESULT_BLOCKING 60000 '{p}:k' /* {'x' * 4096} */"
            answer = await asyncio.wait_for(client.send(padded), TIMEOUT_S)
            assert isinstance(answer, HttpError)
            assert "--max-blocking-message-bytes" in answer.error
            small = await client.query(f"QUEUE RESULT_BLOCKING 1 '{p}:k'")
            assert isinstance(small, HttpResultSet)

    run(main())


# --- the table itself --------------------------------------------------------------------


def test_table_bytes_are_released_when_confirmed_or_swept() -> None:
    now = [0.0]
    table: DedupTable[str] = DedupTable(10, lambda: now[0], max_bytes_per_connection=100,
                                        max_bytes_total=150)
    table.begin(("a", 1), "s")
    table.complete(("a", 1), b"x" * 60)
    table.begin(("a", 2), "s")
    table.complete(("a", 2), b"x" * 60)  # 120 > 100: a marker
    assert table.bytes_of("a") == 60
    assert isinstance(table.begin(("a", 2), "t"), Refused)
    assert isinstance(table.begin(("a", 1), "t"), Cached)
    table.begin(("b", 1), "s")
    table.complete(("b", 1), b"x" * 100)  # 160 > 150 in total: a marker
    assert "--max-ws-resend-total-bytes" in str(table.begin(("b", 1), "t"))
    table.confirmed(("a", 1))
    assert table.bytes_of("a") == 0 and table.bytes_total == 0
    table.begin(("b", 2), "s")
    table.complete(("b", 2), b"x" * 100)
    assert table.bytes_total == 100
    now[0] = 11.0
    assert table.sweep() == 3  # ("a", 2) and ("b", 1) markers, ("b", 2)
    assert table.bytes_total == 0 and len(table) == 0
