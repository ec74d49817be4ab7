"""What the PostgreSQL wire's accept loop sheds, and what ``--tls-required`` refuses, is
counted on ``/metrics`` and logged: a silent connection closed for a waiting client or for
short descriptors (``cubequeue_connections_shed_total``), a plaintext login refused with
28000 (``cubequeue_logins_refused_total``, and a WARNING line).

Real server processes and real clients (psycopg, bare sockets), as tests/server/pgwire/
test_bursts.py runs them.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_process import server
from test_bursts import limited_server, silent_sockets
from tls import self_signed

from cubequeue.server.pytest_plugin import CubequeueServer

WAIT_S = 60.0


def _samples(srv: CubequeueServer, family: str) -> dict[str, float]:
    """``family``'s samples on ``/metrics``, by their one label's value."""
    with urllib.request.urlopen(f"{srv.http_url}/metrics", timeout=WAIT_S) as resp:
        body = resp.read().decode()
    return {next(iter(s.labels.values())): s.value
            for f in text_string_to_metric_families(body) if f.name == family
            for s in f.samples if s.name == f"{family}_total"}


def _dsn(srv: CubequeueServer) -> str:
    return f"host={srv.host} port={srv.port} user=cube dbname=cube connect_timeout={int(WAIT_S)}"


def test_a_silent_connection_shed_for_a_waiting_client_is_counted() -> None:
    with server("--max-unauthenticated-connections", "2", "--startup-timeout", "600") as srv:
        assert _samples(srv, "cubequeue_connections_shed") == {
            "waiting_client": 0.0, "descriptors": 0.0}
        with silent_sockets(srv.host, srv.port, 2):
            with psycopg.connect(_dsn(srv), autocommit=True) as conn:  # waits, then in
                assert conn.execute("SELECT 1").fetchone() == (1,)
            shed = _samples(srv, "cubequeue_connections_shed")
        assert shed["waiting_client"] >= 1, shed
        assert shed["descriptors"] == 0, shed
        assert "closing the oldest silent connection" in srv.log()
        assert _samples(srv, "cubequeue_connections_refused")[
            "max_unauthenticated_connections"] == 0


def test_a_silent_connection_shed_for_descriptors_is_counted() -> None:
    with limited_server(64, 128, "--startup-timeout", "600",
                        "--max-unauthenticated-connections", "1000") as srv:
        with silent_sockets(srv.host, srv.port, 150):
            with psycopg.connect(_dsn(srv), autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            shed = _samples(srv, "cubequeue_connections_shed")
        assert shed["descriptors"] >= 1, shed
        assert shed["waiting_client"] == 0, shed


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_a_plaintext_login_refused_by_tls_required_is_logged_and_counted(
        cert: tuple[Path, Path]) -> None:
    crt, key = cert
    with server("--tls-cert", str(crt), "--tls-key", str(key), "--tls-required") as srv:
        assert _samples(srv, "cubequeue_logins_refused") == {"tls_required": 0.0}
        with pytest.raises(psycopg.OperationalError, match="no encryption"):
            psycopg.connect(_dsn(srv) + " user=alice sslmode=disable")
        with psycopg.connect(_dsn(srv) + " sslmode=require", autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)  # TLS is not counted
        assert _samples(srv, "cubequeue_logins_refused") == {"tls_required": 1.0}
        lines = [line for line in srv.log().splitlines() if "--tls-required" in line]
        assert len(lines) == 1, srv.log()
        assert "WARNING" in lines[0].upper() and "alice" in lines[0], lines
        assert "28000" in lines[0], lines
