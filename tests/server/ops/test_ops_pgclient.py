"""The stdlib PostgreSQL client and ``cubequeue healthcheck``, against a scripted server.

The scripted server is written from the PostgreSQL protocol docs (§55.2, §55.7), not from
cubequeue's own codec, so a shared misunderstanding cannot make both sides agree. The
same checks against the real server live in test_ops_live.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import scramp

from cubequeue.server.pgclient import PgError, connect


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _auth(code: int, extra: bytes = b"") -> bytes:
    return _msg(b"R", struct.pack("!I", code) + extra)


def _error(code: str, text: str, severity: str = "ERROR") -> bytes:
    body = b"S" + severity.encode() + b"\0V" + severity.encode() + b"\0C" + code.encode()
    return _msg(b"E", body + b"\0M" + text.encode() + b"\0\0")


READY = _msg(b"Z", b"I")


@dataclass
class Script:
    """How the scripted server behaves for one connection."""

    auth: str = "trust"  # trust | cleartext | md5 | scram
    password: str = "secret"
    #: statement -> raw reply (before ReadyForQuery)
    replies: dict[str, bytes] = field(default_factory=dict)
    silent: bool = False  # accept and never answer
    seen: list[dict[str, str]] = field(default_factory=list)


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def message(self) -> tuple[bytes, bytes]:
        kind = self.read(1)
        (length,) = struct.unpack("!I", self.read(4))
        return kind, self.read(length - 4)


def _serve_one(sock: socket.socket, script: Script) -> None:
    conn = _Conn(sock)
    (length,) = struct.unpack("!I", conn.read(4))
    body = conn.read(length - 4)
    assert struct.unpack("!I", body[:4])[0] == 196608
    parts = body[4:].split(b"\0")
    params = {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 2, 2)}
    script.seen.append(params)
    if script.silent:
        time.sleep(5)
        return
    user = params["user"]
    ok = True
    if script.auth == "cleartext":
        sock.sendall(_auth(3))
        _, pw = conn.message()
        ok = pw.rstrip(b"\0").decode() == script.password
    elif script.auth == "md5":
        salt = b"\x01\x02\x03\x04"
        sock.sendall(_auth(5, salt))
        _, pw = conn.message()
        inner = hashlib.md5((script.password + user).encode()).hexdigest()
        expected = "md5" + hashlib.md5(inner.encode() + salt).hexdigest()
        ok = pw.rstrip(b"\0").decode() == expected
    elif script.auth == "scram":
        mech = scramp.ScramMechanism("SCRAM-SHA-256")
        info = mech.make_auth_info(script.password)
        server = mech.make_server(lambda _name: info)
        sock.sendall(_auth(10, b"SCRAM-SHA-256\0\0"))
        _, body = conn.message()
        name_end = body.index(b"\0")
        assert body[:name_end] == b"SCRAM-SHA-256"
        server.set_client_first(body[name_end + 5:].decode())
        sock.sendall(_auth(11, server.get_server_first().encode()))
        _, final = conn.message()
        try:
            server.set_client_final(final.decode())
        except scramp.ScramException:
            ok = False
        else:
            sock.sendall(_auth(12, server.get_server_final().encode()))
    if not ok:
        sock.sendall(_error("28P01", f'password authentication failed for user "{user}"',
                            "FATAL"))
        return
    sock.sendall(_auth(0) + _msg(b"S", b"server_version\x0015.0\0")
                 + _msg(b"K", struct.pack("!II", 7, 9)) + READY)
    while True:
        try:
            kind, body = conn.message()
        except EOFError:
            return
        if kind == b"X":
            return
        assert kind == b"Q"
        sql = body.rstrip(b"\0").decode()
        reply = script.replies.get(sql, _error("42601", f"unknown: {sql}"))
        sock.sendall(reply + READY)


@pytest.fixture
def fake_pg() -> Iterator[tuple[int, Script]]:
    script = Script()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def loop() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with sock, contextlib.suppress(EOFError, OSError):
                _serve_one(sock, script)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield port, script
    stop.set()
    thread.join(2)
    listener.close()


HEALTHY = _msg(b"C", b"SYS CACHESTORE HEALTHCHECK\0")
ROWS = (_msg(b"T", struct.pack("!H", 2) + b"a\0" + bytes(18) + b"b\0" + bytes(18))
        + _msg(b"D", struct.pack("!H", 2) + struct.pack("!i", 2) + b"hi" + struct.pack("!i", -1))
        + _msg(b"C", b"SELECT 1\0"))


@pytest.mark.parametrize("auth", ["trust", "cleartext", "md5", "scram"])
def test_connect_and_query_each_auth(fake_pg: tuple[int, Script], auth: str) -> None:
    port, script = fake_pg
    script.auth = auth
    script.replies = {"SELECT": ROWS, "SYS CACHESTORE HEALTHCHECK": HEALTHY}
    with connect("127.0.0.1", port, user="alice", password="secret") as client:
        assert client.parameters["server_version"] == "15.0"
        assert client.backend_key == (7, 9)
        [result] = client.query("SELECT")
        assert result.columns == ["a", "b"]
        assert result.rows == [("hi", None)]
        assert result.tag == "SELECT 1"
        [health] = client.query("SYS CACHESTORE HEALTHCHECK")
        assert health.rows == [] and health.tag == "SYS CACHESTORE HEALTHCHECK"
    assert script.seen[0]["user"] == "alice"
    assert script.seen[0]["database"] == "cube"


@pytest.mark.parametrize("auth", ["cleartext", "md5", "scram"])
def test_wrong_password_is_28p01(fake_pg: tuple[int, Script], auth: str) -> None:
    port, script = fake_pg
    script.auth = auth
    with pytest.raises(PgError) as info:
        connect("127.0.0.1", port, password="wrong")
    assert info.value.sqlstate == "28P01"
    assert info.value.from_server


def test_password_needed_but_missing(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.auth = "md5"
    with pytest.raises(PgError, match="asks for a password"):
        connect("127.0.0.1", port)


def test_error_then_connection_still_usable(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.replies = {"SELECT": ROWS}
    with connect("127.0.0.1", port) as client:
        with pytest.raises(PgError) as info:
            client.query("nonsense")
        assert (info.value.sqlstate, info.value.message) == ("42601", "unknown: nonsense")
        assert str(info.value) == "ERROR 42601: unknown: nonsense"
        assert client.query("SELECT")[0].rows == [("hi", None)]


def test_deadline_bounds_a_silent_server(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.silent = True
    started = time.monotonic()
    with pytest.raises(PgError, match="timed out"):
        connect("127.0.0.1", port, timeout=5, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - started < 3


def test_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(PgError, match="cannot connect"):
            connect("127.0.0.1", port, timeout=1)


# --- cubequeue healthcheck ----------------------------------------------------------------


def _healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", "healthcheck", *args],
                          capture_output=True, text=True, timeout=30, env=env or {})


def test_healthcheck_ok(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.replies = {"SYS CACHESTORE HEALTHCHECK": HEALTHY}
    proc = _healthcheck("--port", str(port))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    [line] = proc.stdout.splitlines()
    assert line.startswith(f"healthy: 127.0.0.1:{port} answered SYS CACHESTORE HEALTHCHECK in ")
    assert script.seen[0]["application_name"] == "cubequeue-healthcheck"


def test_healthcheck_reads_the_image_env(fake_pg: tuple[int, Script], tmp_path: Path) -> None:
    port, script = fake_pg
    script.auth = "md5"
    script.password = "pw:with:colons"
    script.replies = {"SYS CACHESTORE HEALTHCHECK": HEALTHY}
    users = tmp_path / "users"
    users.write_text("# operators\n# ops is first, so the healthcheck's\nops:pw:with:colons\n"
                     "other:x\n")
    env = {"CUBEQUEUE_HOST": "0.0.0.0", "CUBEQUEUE_PORT": str(port),
           "CUBEQUEUE_USERS_FILE": str(users)}
    proc = _healthcheck(env=env)
    assert proc.returncode == 0, proc.stderr
    assert script.seen[0]["user"] == "ops"


def test_healthcheck_server_error_exits_1(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.replies = {"SYS CACHESTORE HEALTHCHECK": _error("57P01", "terminating connection "
                                                             "due to administrator command")}
    proc = _healthcheck("--port", str(port))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"unhealthy: 127.0.0.1:{port} answered ERROR 57P01: terminating connection due to "
        "administrator command"]


def test_healthcheck_closed_port_exits_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        proc = _healthcheck("--port", str(port))
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"unhealthy: cannot connect to 127.0.0.1:{port}")


def test_healthcheck_timeout_exits_1(fake_pg: tuple[int, Script]) -> None:
    port, script = fake_pg
    script.silent = True
    started = time.monotonic()
    proc = _healthcheck("--port", str(port), "--timeout", "0.5")
    assert time.monotonic() - started < 4
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["unhealthy: timed out waiting for the server"]


def test_healthcheck_bad_env_exits_1() -> None:
    proc = _healthcheck(env={"CUBEQUEUE_PORT": "nope"})
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "unhealthy: invalid value for --port (CUBEQUEUE_PORT): 'nope' is not an integer"]
