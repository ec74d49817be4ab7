"""The doors: who may connect, on which socket, and what the server says at start.

Each test runs a real server (``start_cubequeue``) and a real client: psycopg, psql,
websockets, urllib.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest
from server_process import server
from tls import self_signed
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from cubequeue.server.app import open_doors
from cubequeue.server.config import Config
from cubequeue.server.http import peer_allowed
from cubequeue.server.options import ConfigError, load_config
from cubequeue.server.pytest_plugin import start_cubequeue

WAIT_S = 30.0


def _status(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


# --- readiness during the drain ---------------------------------------------------------


def test_readyz_answers_503_through_the_shutdown_grace() -> None:
    srv = start_cubequeue("--shutdown-grace", "20")
    try:
        assert _status(srv.http_url + "/readyz") == 200
        srv.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + WAIT_S
        seen = 0
        while time.monotonic() < deadline and seen == 0:
            with contextlib.suppress(OSError):
                seen = _status(srv.http_url + "/readyz")
        assert seen == 503
        assert _status(srv.http_url + "/healthz") == 200
        assert srv.process.poll() is None  # still draining: the grace is 20 s
        srv.process.send_signal(signal.SIGTERM)  # a second signal ends the grace
        assert srv.process.wait(WAIT_S) == 0
    finally:
        srv.stop()


# --- /ws next to a password ---------------------------------------------------------


def test_auth_without_an_explicit_ws_auth_refuses_to_start() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cubequeue.server", "--auth", "scram-sha-256",
         "--password", "pw", "--port", "1", "--http-port", "2"],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--ws-auth" in lines[0], result.stderr


def test_ws_auth_given_by_variable_counts_as_chosen() -> None:
    config = load_config(["--auth", "md5", "--password", "pw"], {"CUBEQUEUE_WS_AUTH": "none"})
    assert config.ws_auth == "none"
    with pytest.raises(ConfigError, match="--ws-auth"):
        load_config(["--auth", "md5", "--password", "pw"], {})


def test_ws_allow_refuses_peers_outside_the_networks_but_not_the_probes() -> None:
    with server("--ws-allow", "10.0.0.0/8") as srv:
        with pytest.raises(InvalidStatus) as refused, ws_connect(srv.ws_url,
                                                                  open_timeout=WAIT_S):
            pass
        assert refused.value.response.status_code == 403
        assert b"--ws-allow" in refused.value.response.body
        assert _status(srv.http_url + "/healthz") == 200
        assert _status(srv.http_url + "/readyz") == 200
    with server("--ws-allow", "10.0.0.0/8,127.0.0.0/8") as srv, ws_connect(
            srv.ws_url, open_timeout=WAIT_S):
        pass


def test_ws_allow_parses_like_pg_hba() -> None:
    import ipaddress

    allow = load_config(["--ws-allow", "10.1.2.3/8, ::1"], {}).ws_allow
    assert allow == "10.0.0.0/8,::1/128"
    nets = tuple(ipaddress.ip_network(n) for n in allow.split(","))
    assert peer_allowed(nets, "10.200.0.1")
    assert peer_allowed(nets, "::ffff:10.0.0.9")
    assert peer_allowed(nets, "::1")
    assert not peer_allowed(nets, "192.168.0.1")
    assert not peer_allowed(nets, None)
    assert peer_allowed((), "192.168.0.1")
    with pytest.raises(ConfigError, match=r"--ws-allow.*not an address"):
        load_config(["--ws-allow", "10.0.0.0/33"], {})


def test_open_doors_warn_on_a_non_loopback_address_only() -> None:
    assert open_doors(Config(host="127.0.0.1")) == []
    doors = open_doors(Config(host="0.0.0.0"))
    assert len(doors) == 4 and "--auth trust" in doors[0] and "--ws-allow" in doors[1]
    locked = open_doors(Config(host="0.0.0.0", auth="md5", password="x", ws_auth="basic"))
    assert locked == []
    assert "limited to 10.0.0.0/8" in open_doors(
        Config(host="0.0.0.0", auth="md5", password="x", ws_allow="10.0.0.0/8"))[0]


def test_the_warning_is_logged_at_start() -> None:
    with server("--host", "0.0.0.0") as srv:
        pass
    assert "accepts every client without a password (--auth trust)" in srv.log()


# --- unauthenticated connections ----------------------------------------------------


def _startup(user: str) -> bytes:
    body = b"\x00\x03\x00\x00" + b"user\x00" + user.encode() + b"\x00database\x00cube\x00\x00"
    return (len(body) + 4).to_bytes(4, "big") + body


def test_unauthenticated_startups_do_not_lock_the_user_out() -> None:
    with server("--auth", "scram-sha-256", "--password", "pw", "--ws-auth", "none",
                "--max-connections-per-user", "3", "--max-connections", "5") as srv:
        socks = []
        try:
            for i in range(20):
                sock = socket.create_connection((srv.host, srv.port), timeout=WAIT_S)
                socks.append(sock)
                if i % 2:
                    sock.sendall(_startup("cube"))  # then never answers the SASL challenge
                    assert sock.recv(1) == b"R"
            dsn = f"host={srv.host} port={srv.port} user=cube password=pw dbname=cube"
            with psycopg.connect(dsn, autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            for sock in socks:
                sock.close()


def test_the_per_user_cap_still_holds_once_authenticated() -> None:
    with server("--max-connections-per-user", "1") as srv:
        dsn = f"host={srv.host} port={srv.port} user=cube dbname=cube"
        with psycopg.connect(dsn, autocommit=True):
            with pytest.raises(psycopg.OperationalError, match="--max-connections-per-user"):
                psycopg.connect(dsn)
            with psycopg.connect(dsn.replace("user=cube", "user=other"), autocommit=True):
                pass


def test_unauthenticated_connections_have_their_own_cap() -> None:
    # past the cap a client waits in the listen backlog instead of being refused, and is
    # let in once a place is free; sockets that sent part of a startup packet are not
    # silent, so none of them is closed for it (tests/server/pgwire/test_bursts.py)
    with server("--max-unauthenticated-connections", "2", "--startup-timeout", "600") as srv:
        socks = [socket.create_connection((srv.host, srv.port), timeout=WAIT_S)
                 for _ in range(2)]
        try:
            for sock in socks:
                sock.sendall(_startup("cube")[:6])
            dsn = f"host={srv.host} port={srv.port} user=cube dbname=cube"
            with pytest.raises(psycopg.OperationalError, match="timeout expired"):
                psycopg.connect(dsn, connect_timeout=2)  # waits: not accepted, not refused
        finally:
            for sock in socks:
                sock.close()
        with psycopg.connect(dsn, autocommit=True) as conn:  # the pool drained
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert "53300" not in srv.log()


def test_a_silent_socket_is_closed_after_the_startup_timeout() -> None:
    with server("--startup-timeout", "1") as srv:
        sock = socket.create_connection((srv.host, srv.port), timeout=WAIT_S)
        with sock:
            assert sock.recv(1) == b""  # closed by the server, long before 60 s
        assert "--startup-timeout" in srv.log()


# --- TLS ------------------------------------------------------------------------------


def test_tls_required_refuses_plaintext_with_28000(cert: tuple[Path, Path]) -> None:
    crt, key = cert
    with server("--tls-cert", str(crt), "--tls-key", str(key), "--tls-required") as srv:
        dsn = f"host={srv.host} port={srv.port} user=cube dbname=cube"
        with pytest.raises(psycopg.OperationalError, match="no encryption") as refused:
            psycopg.connect(dsn + " sslmode=disable")
        assert "--tls-required" in str(refused.value)
        with psycopg.connect(dsn + " sslmode=require", autocommit=True) as conn:
            assert conn.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_tls_required_reports_its_sqlstate(cert: tuple[Path, Path]) -> None:
    from cubequeue.server.pgclient import PgError, connect

    crt, key = cert
    with server("--tls-cert", str(crt), "--tls-key", str(key), "--tls-required") as srv:
        with pytest.raises(PgError) as refused:
            connect(srv.host, srv.port, timeout=WAIT_S).close()
        assert "28000" in str(refused.value) or "no encryption" in str(refused.value)


def test_tls_options_need_a_certificate() -> None:
    for flag in ("--tls-required", "--http-tls"):
        with pytest.raises(ConfigError, match=f"{flag}: it needs --tls-cert"):
            load_config([flag], {})


def test_http_tls_serves_https_and_wss(cert: tuple[Path, Path]) -> None:
    crt, key = cert
    context = ssl.create_default_context(cafile=str(crt))
    with server("--tls-cert", str(crt), "--tls-key", str(key), "--http-tls") as srv:
        url = f"https://{srv.host}:{srv.http_port}"
        assert _status(url + "/healthz", context) == 200
        with ws_connect(f"wss://{srv.host}:{srv.http_port}/ws", ssl=context,
                        open_timeout=WAIT_S):
            pass
        with pytest.raises(OSError):
            _status(srv.http_url + "/healthz")  # plain http is not served


# --- the Unix socket ------------------------------------------------------------------


def test_psql_over_the_unix_socket(tmp_path: Path) -> None:
    if shutil.which("psql") is None:
        pytest.skip("psql is missing")
    with server("--unix-socket-dir", str(tmp_path)) as srv:
        assert (tmp_path / f".s.PGSQL.{srv.port}").is_socket()
        out = subprocess.run(
            ["psql", "-h", str(tmp_path), "-p", str(srv.port), "-U", "cube", "-d", "cube",
             "-XAtc", "QUEUE ADD 'unix:a' 'x'"],
            capture_output=True, text=True, timeout=WAIT_S, check=True,
        )  # fmt: skip
        assert out.stdout.startswith("1|t|1"), out


def test_nobody_watching_readiness_means_no_wait() -> None:
    srv = start_cubequeue("--shutdown-grace", "120")
    try:
        srv.process.send_signal(signal.SIGTERM)
        assert srv.process.wait(WAIT_S) == 0  # well inside the 120 s grace
    finally:
        srv.stop()


def test_running_out_of_file_descriptors_is_logged() -> None:
    import os
    import resource

    with server() as srv:
        used = len(os.listdir(f"/proc/{srv.process.pid}/fd"))
        resource.prlimit(srv.process.pid, resource.RLIMIT_NOFILE, (used + 4, used + 4))
        socks = []
        try:
            deadline = time.monotonic() + WAIT_S
            for _ in range(20):  # more than the 4 descriptors left to the server
                socks.append(socket.create_connection((srv.host, srv.port), timeout=WAIT_S))
            while "out of file descriptors" not in srv.log() and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting for the server's accept loop, not timing it
        finally:
            for sock in socks:
                sock.close()
        assert "ERROR" in srv.log() and "out of file descriptors" in srv.log()
        assert srv.log().count("out of file descriptors") == 1  # once a minute at most
