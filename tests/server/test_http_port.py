"""The HTTP port as an HTTP client sees it: a connection it may not reuse says so, and a
silent socket is closed on ``--startup-timeout``'s schedule.

websockets serves one request per connection: any answer but the upgrade closes it.
Without ``Connection: close`` a client that keeps connections alive (Node's fetch;
here ``http.client``, which keeps one unless told) writes its next request into the
closed socket and fails ("other side closed", ``RemoteDisconnected``).
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator

import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

WAIT_S = 30.0


@pytest.fixture(scope="module")
def srv() -> Iterator[CubequeueServer]:
    server = start_cubequeue("--console-auth", "none")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("path", ["/metrics", "/api/v1/overview", "/", "/healthz",
                                  "/readyz", "/nowhere"])
def test_two_requests_over_one_reused_connection_are_both_answered(
        srv: CubequeueServer, path: str) -> None:
    conn = http.client.HTTPConnection(srv.host, srv.http_port, timeout=WAIT_S)
    try:
        for _ in range(2):
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            assert response.status in (200, 404), (path, response.status, body[:200])
            assert response.getheader("Connection") == "close"
    finally:
        conn.close()


def test_a_refused_scrape_says_close_too(srv: CubequeueServer) -> None:
    conn = http.client.HTTPConnection(srv.host, srv.http_port, timeout=WAIT_S)
    try:
        for _ in range(2):
            conn.request("GET", "/metrics", headers={"Host": "evil.example"})
            response = conn.getresponse()
            response.read()
            assert response.status == 403
            assert response.getheader("Connection") == "close"
    finally:
        conn.close()


def test_a_silent_http_socket_is_closed_after_the_startup_timeout() -> None:
    """The HTTP server's own default is 10 s; with --startup-timeout 1 the socket goes
    within a few seconds, as a silent PostgreSQL socket does."""
    server = start_cubequeue("--startup-timeout", "1")
    try:
        with socket.create_connection((server.host, server.http_port), timeout=WAIT_S) as sock:
            sock.settimeout(6.0)  # well past 1 s, well short of websockets' default 10 s
            assert sock.recv(1) == b""
    finally:
        server.stop()
