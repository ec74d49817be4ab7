"""What a web page may reach: the Origin rule on ``/ws`` and the Host rule on the console
and ``/metrics`` (server/browsers.py).

A browser always sends ``Origin`` on a WebSocket upgrade (Cube's driver sends none), and
a DNS-rebinding page still sends its own name as ``Host``. Each test runs a real server
and real clients (websockets, http.client, psycopg); the rules' parsing is tested alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import ipaddress
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect
from wsclient import WsClient, rows

from cubequeue.server.browsers import (
    PRIVATE_SUFFIXES,
    HostRule,
    OriginRule,
    RefusalLog,
    host_name,
    normalize_hosts,
    normalize_origins,
)
from cubequeue.server.options import ConfigError, load_config
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

WAIT_S = 30.0
EVIL = "http://evil.example"

Start = Callable[..., CubequeueServer]


def _cache_get(srv: CubequeueServer, key: str, password: str | None = None) -> str | None:
    dsn = srv.dsn if password is None else srv.dsn.replace("cube@", f"cube:{password}@")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"CACHE GET '{key}'").fetchone()
    return None if row is None else row[0]


async def _ws_cache_set(url: str, key: str, headers: dict[str, str]) -> None:
    async with WsClient(url, headers=headers) as client:
        assert rows(await client.query(f"CACHE SET '{key}' 'from-ws'")) is not None


def _refused_upgrade(url: str, origin: str) -> tuple[int, bytes]:
    with pytest.raises(InvalidStatus) as refused, ws_connect(url, origin=origin,  # type: ignore[arg-type]
                                                              open_timeout=WAIT_S):
        pass
    response = refused.value.response
    return response.status_code, response.body or b""


def _get(srv: CubequeueServer, path: str, host: str | None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET ``path`` with exactly the ``Host`` given (None: no Host header at all)."""
    conn = http.client.HTTPConnection(srv.host, srv.http_port, timeout=WAIT_S)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _metric(srv: CubequeueServer, reason: str) -> float:
    status, body = _get(srv, "/metrics", f"127.0.0.1:{srv.http_port}")
    assert status == 200
    needle = f'cubequeue_http_refusals_total{{reason="{reason}"}} '
    for line in body.decode().splitlines():
        if line.startswith(needle):
            return float(line[len(needle):])
    raise AssertionError(f"no {needle!r} in /metrics")


# --- the Origin rule on /ws ---------------------------------------------------------


def test_a_foreign_origin_cannot_open_ws_on_the_defaults(start_server: Start) -> None:
    srv = start_server()
    status, body = _refused_upgrade(srv.ws_url, EVIL)
    assert status == 403
    assert b"--ws-allowed-origins" in body and b"evil.example" in body
    assert _cache_get(srv, "origin:k") is None
    # Cube's driver sends no Origin: it is served as before
    asyncio.run(_ws_cache_set(srv.ws_url, "origin:k", {}))
    assert _cache_get(srv, "origin:k") == "from-ws"
    assert _metric(srv, "origin") == 1
    log = srv.log()
    assert "refused a /ws upgrade" in log and "evil.example" in log


def test_refusals_are_logged_once_per_interval_and_all_counted(start_server: Start) -> None:
    srv = start_server()
    for _ in range(5):
        assert _refused_upgrade(srv.ws_url, EVIL)[0] == 403
    assert _metric(srv, "origin") == 5
    assert srv.log().count("refused a /ws upgrade") == 1


def test_listed_origins_are_served_and_others_refused(start_server: Start) -> None:
    srv = start_server("--ws-allowed-origins", "http://app.example:4000, https://ui.example")
    asyncio.run(_ws_cache_set(srv.ws_url, "origin:a", {"Origin": "http://app.example:4000"}))
    asyncio.run(_ws_cache_set(srv.ws_url, "origin:b", {"Origin": "https://ui.example"}))
    assert _cache_get(srv, "origin:a") == "from-ws"
    assert _cache_get(srv, "origin:b") == "from-ws"
    for origin in (EVIL, "http://app.example:4001", "https://app.example:4000", "null"):
        assert _refused_upgrade(srv.ws_url, origin)[0] == 403


def test_star_allows_any_origin(start_server: Start) -> None:
    srv = start_server("--ws-allowed-origins", "*")
    asyncio.run(_ws_cache_set(srv.ws_url, "origin:star", {"Origin": EVIL}))
    assert _cache_get(srv, "origin:star") == "from-ws"


def test_the_documented_cube_setup_refuses_a_foreign_origin(start_server: Start) -> None:
    srv = start_server("--auth", "scram-sha-256", "--password", "pw", "--ws-auth", "none")
    assert _refused_upgrade(srv.ws_url, EVIL)[0] == 403
    asyncio.run(_ws_cache_set(srv.ws_url, "origin:cube", {}))
    assert _cache_get(srv, "origin:cube", password="pw") == "from-ws"


def test_ws_takes_any_host_name_cube_was_given(start_server: Start) -> None:
    """Cube's driver connects by a service name (``CUBEJS_CUBESTORE_HOST=cubequeue``):
    the Host rule is not applied to /ws, whose browsers the Origin rule stops."""
    srv = start_server()
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection((srv.host, srv.http_port), timeout=WAIT_S) as sock:
        sock.sendall((f"GET /ws HTTP/1.1\r\nHost: cubequeue:3030\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head


# --- the Host rule on the console and /metrics --------------------------------------


CONSOLE_PATHS = ("/", "/api/v1/overview", "/api/v1/live", "/metrics")


def test_a_rebinding_host_is_refused_and_the_servers_names_answer(start_server: Start) -> None:
    srv = start_server()
    port = srv.http_port
    for path in CONSOLE_PATHS:
        status, body = _get(srv, path, f"evil.example:{port}")
        assert status == 403, path
        assert b"--allowed-hosts" in body and b"evil.example" in body
        assert _get(srv, path, None)[0] == 403
        for host in (f"127.0.0.1:{port}", "127.0.0.1", "localhost", f"LOCALHOST:{port}",
                     f"[::1]:{port}", "10.1.2.3:3030"):
            assert _get(srv, path, host)[0] == 200, (path, host)
    # the probes answer any name an orchestrator uses
    for path in ("/healthz", "/readyz"):
        assert _get(srv, path, "cubequeue.default.svc:3030")[0] == 200
    assert _metric(srv, "host") == 2 * len(CONSOLE_PATHS)
    assert "is not a name this server is reached by" in srv.log()


def test_allowed_hosts_adds_names_and_suffixes(start_server: Start) -> None:
    srv = start_server("--allowed-hosts", "cubequeue,.corp.example")
    for host in ("cubequeue:3030", "corp.example", "a.b.corp.example:80", "localhost"):
        assert _get(srv, "/api/v1/overview", host)[0] == 200, host
    for host in ("evil.example", "cubequeue.evil.example", "xcorp.example", "cubequeue:x"):
        assert _get(srv, "/api/v1/overview", host)[0] == 403, host


def test_allowed_hosts_star_allows_any(start_server: Start) -> None:
    srv = start_server("--allowed-hosts", "*")
    assert _get(srv, "/metrics", "evil.example")[0] == 200


def test_the_listen_name_is_allowed() -> None:
    name = socket.gethostname().lower()
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        found = set()
    if not found or not all(_is_loopback(address) for address in found):
        pytest.skip("this machine's name does not resolve to loopback addresses only")
    srv = start_cubequeue(host=name, test_clock=False)
    try:
        assert _get(srv, "/", f"{name}:{srv.http_port}")[0] == 200
        assert _get(srv, "/", "evil.example")[0] == 403
    finally:
        srv.stop()


# --- the option values and the rules alone --------------------------------------------


def test_origin_values_are_normalised_and_bad_ones_named() -> None:
    assert normalize_origins(" HTTPS://App.Example:443/, http://x:8080 ") == (
        "https://app.example,http://x:8080")
    assert normalize_origins("http://a, *") == "*"
    for bad in ("null", "app.example", "http://a/path", "http://a:99999", " , "):
        with pytest.raises(ValueError):
            normalize_origins(bad)
    with pytest.raises(ConfigError, match=r"--ws-allowed-origins.*'null'"):
        load_config(["--ws-allowed-origins", "null"], {})
    config = load_config([], {"CUBEQUEUE_WS_ALLOWED_ORIGINS": "http://a:1"})
    assert config.ws_allowed_origins == "http://a:1"


def test_host_values_are_normalised_and_bad_ones_named() -> None:
    assert normalize_hosts("CubeQueue., .Corp.Example") == "cubequeue,.corp.example"
    for bad in ("cubequeue:3030", "http://x", "a b", ""):
        with pytest.raises(ValueError):
            normalize_hosts(bad)
    with pytest.raises(ConfigError, match="--allowed-hosts"):
        load_config(["--allowed-hosts", "x:1"], {})


def test_a_bad_value_stops_the_start_with_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cubequeue.server", "--allowed-hosts", "a/b",
         "--port", "1", "--http-port", "2"],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allowed-hosts" in lines[0], result.stderr


def test_origin_rule() -> None:
    rule = OriginRule.of(normalize_origins("http://a:1"))
    assert rule.allows(None)
    assert rule.allows("http://a:1") and rule.allows("HTTP://A:1")
    assert not rule.allows("http://a:1, http://a:1")  # a repeated header, joined
    assert not OriginRule.of(None).allows("http://localhost:3030")
    assert OriginRule.of("*").allows("null")


def test_host_names() -> None:
    assert host_name("[::1]:3030") == "::1"
    assert host_name("[0:0::1]") == "::1"
    assert host_name("Example.COM.:80") == "example.com"
    for bad in ("[::1", "[::1]x", "a:b", "a b", "a@b", "::1", "", ":80", "a..b"):
        assert host_name(bad) is None, bad


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=60))
def test_any_host_header_is_answered_without_an_error(header: str) -> None:
    rule = HostRule.of(None, "0.0.0.0")
    allowed = rule.allows(header)
    name = host_name(header)
    assert allowed == (name is not None and (name == "localhost" or _is_address(name)
                                             or name == "0.0.0.0" or "." not in name
                                             or name.endswith(PRIVATE_SUFFIXES)))


def test_names_no_public_dns_serves_are_allowed_without_the_option(start_server: Start) -> None:
    """A Prometheus in compose or Kubernetes scrapes by service name: one label, or a name
    under .svc.cluster.local; no rebinding page can have such a name, so no option is
    needed. A public name still needs --allowed-hosts."""
    srv = start_server()
    for host in ("cubequeue:3030", "cubequeue-a", "cubequeue.default.svc.cluster.local:3030",
                 "cq.internal", "box.home.arpa", "dev.localhost:3030"):
        assert _get(srv, "/metrics", host)[0] == 200, host
    for host in ("cubequeue.default.svc", "evil.example", "local.evil.example",
                 "internal.example.com"):
        assert _get(srv, "/metrics", host)[0] == 403, host


def _is_address(name: str) -> bool:
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(name)
        return True
    return False


def _is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback


def test_refusal_log_rate_limits_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RefusalLog(logging.getLogger("test.refusals"), interval_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for _ in range(3):
            log.refused("origin", "o")
        log.refused("host", "h")
        now[0] = 61.0
        log.refused("origin", "o")
    assert [r.getMessage() for r in caplog.records] == [
        "o", "h", "o (2 more refused since the last such line)"]
