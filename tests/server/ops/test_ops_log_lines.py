"""The log lines operators read: statements (DEBUG when they succeed, WARNING with the
SQLSTATE when refused), refused logins with user and peer, and the rate limit on
repeated warnings, driven by an injected clock (no sleeping)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import psycopg
import pytest

from cubequeue.server.config import Config
from cubequeue.server.errors import InvalidPassword
from cubequeue.server.logs import (
    RateLimitFilter,
    log_auth_failure,
    log_statement,
    setup_logging,
    statement_start,
)
from cubequeue.server.pgwire.auth import Md5Exchange
from cubequeue.server.pytest_plugin import CubequeueServer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    ours = logging.getLogger("cubequeue")
    saved = (list(root.handlers), root.level, ours.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.setLevel(saved[2])


def _json_logs(level: str = "debug", clock: FakeClock | None = None
               ) -> tuple[io.StringIO, RateLimitFilter]:
    stream = io.StringIO()
    limiter = setup_logging(Config(log_format="json", log_level=level), stream=stream,
                            clock=clock or FakeClock())
    return stream, limiter


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


# --- statements -------------------------------------------------------------------------


@pytest.mark.usefixtures("restore_logging")
def test_debug_shows_each_statement_with_duration_and_sqlstate() -> None:
    stream, _ = _json_logs("debug")
    log_statement("QUEUE ADD", "QUEUE ADD PRIORITY 1 'q:1' '{}'", None, 0.25,
                  protocol="pg", conn_id=3, peer="127.0.0.1:4000", user="cube")
    (line,) = _records(stream)
    assert line["level"] == "debug"
    assert line["logger"] == "cubequeue.statement"
    assert (line["command"], line["sqlstate"], line["ms"]) == ("QUEUE ADD", "00000", 0.25)
    assert (line["conn_id"], line["peer"], line["protocol"], line["user"]) == (
        3, "127.0.0.1:4000", "pg", "cube")
    assert "QUEUE ADD PRIORITY 1 'q:1' '{}'" in str(line["msg"])


@pytest.mark.usefixtures("restore_logging")
def test_a_refused_statement_is_a_warning_with_its_sqlstate_and_start() -> None:
    stream, _ = _json_logs("info")
    log_statement("SELECT", "SELECT * FROM a JOIN b ON true", None, 0.1)  # debug: hidden
    log_statement("SELECT", "SELECT *\n  FROM a JOIN b ON true " + "x" * 500, "0A000", 0.3,
                  protocol="ws")
    (line,) = _records(stream)
    assert line["level"] == "warning"
    assert line["sqlstate"] == "0A000"
    assert line["protocol"] == "ws"
    msg = str(line["msg"])
    assert msg.startswith("statement SELECT failed with SQLSTATE 0A000: SELECT * FROM a JOIN")
    assert msg.endswith("...")
    assert len(msg) < 200


def test_statement_start() -> None:
    assert statement_start("SELECT  1\n\tFROM x") == "SELECT 1 FROM x"
    assert statement_start("a" * 10, limit=4) == "aaaa..."
    assert statement_start("a" * 4, limit=4) == "aaaa"
    assert statement_start(" " * 10_000 + "b", limit=4) == "..."


# --- refused logins ---------------------------------------------------------------------


@pytest.mark.usefixtures("restore_logging")
def test_auth_failure_names_user_peer_and_reason() -> None:
    stream, _ = _json_logs("info")
    exchange = Md5Exchange("alice", "right", peer="10.0.0.7:50000")
    exchange.start()
    with pytest.raises(InvalidPassword):
        exchange.step(b"md5" + b"0" * 32 + b"\0")
    (line,) = _records(stream)
    assert line["level"] == "warning"
    assert line["logger"] == "cubequeue.auth"
    assert (line["user"], line["peer"], line["sqlstate"]) == ("alice", "10.0.0.7:50000",
                                                              "28P01")
    assert line["reason"] == "the password does not match"
    assert line["msg"] == ('password authentication failed for user "alice" from '
                           "10.0.0.7:50000: the password does not match")


@pytest.mark.cubequeue_args("--ws-auth", "none", "--auth", "scram-sha-256", "--password", "right",
                            "--log-format", "json")
def test_failed_password_login_over_psycopg_is_logged(
        cubequeue_server: CubequeueServer) -> None:
    dsn = (f"host={cubequeue_server.host} port={cubequeue_server.port} user=alice "
           "password=wrong dbname=cube")
    for _ in range(8):
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(dsn, connect_timeout=10)
    with psycopg.connect(dsn.replace("wrong", "right"), autocommit=True) as conn:
        conn.execute("SELECT 1")  # the server has logged everything before this answer
    lines = [json.loads(line) for line in cubequeue_server.log().splitlines()
             if line.startswith("{")]
    refused = [line for line in lines if line.get("logger") == "cubequeue.auth"]
    # logged with the user and the reason, and rate-limited: 8 attempts, at most 5 lines
    assert 1 <= len(refused) <= 5
    assert all(line["user"] == "alice" and line["level"] == "warning" for line in refused)
    assert refused[0]["reason"] == "the password does not match"


# --- the rate limit ---------------------------------------------------------------------


@pytest.mark.usefixtures("restore_logging")
def test_repeated_warnings_are_limited_then_counted() -> None:
    clock = FakeClock()
    stream, limiter = _json_logs("info", clock)
    for _ in range(12):
        log_auth_failure("bob", "10.0.0.9:1234", "md5", "the password does not match")
    log_auth_failure("bob", "10.0.0.8:1234", "md5", "the password does not match")
    logging.getLogger("cubequeue.conn").info("not a warning: never limited")
    assert len(_records(stream)) == 5 + 1 + 1
    clock.now += 59.0
    log_auth_failure("bob", "10.0.0.9:999", "md5", "the password does not match")
    assert len(_records(stream)) == 7  # same host, new port, same window: suppressed
    clock.now += 1.0
    log_auth_failure("carol", "10.0.0.9:1", "md5", "no password is set for this user")
    lines = _records(stream)
    summary, carol = lines[7:]
    assert summary["msg"] == ('password authentication failed for user "bob" from '
                              "10.0.0.9:999: the password does not match ... repeated 8 "
                              "times in 60 s")
    assert summary["repeated"] == 8
    assert summary["user"] == "bob"
    assert carol["user"] == "carol"
    limiter.flush()
    assert len(_records(stream)) == 9  # nothing was suppressed for the other keys


def test_rate_limit_keys_are_bounded() -> None:
    clock = FakeClock()
    emitted: list[logging.LogRecord] = []
    limiter = RateLimitFilter(emitted.append, clock=clock, burst=1, interval=10,
                              max_keys=2)

    def warn(msg: str) -> bool:
        return limiter.filter(logging.makeLogRecord(
            {"msg": msg, "levelno": logging.WARNING, "levelname": "WARNING"}))

    assert warn("a") and not warn("a") and not warn("a")
    assert warn("b") and warn("c")  # "c" pushes out "a", whose count is emitted
    assert [(r.getMessage(), getattr(r, "repeated", None)) for r in emitted] == [
        ("a ... repeated 2 times in 10 s", 2)]
    assert warn("a")  # a fresh window
