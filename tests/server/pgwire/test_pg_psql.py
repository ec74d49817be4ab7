"""psql 15 against the real server: -c, errors, ON_ERROR_STOP scripts, Ctrl-C, both flows."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import subprocess
import termios
import time
import urllib.request
import uuid

import pytest

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def prefix() -> str:
    return "p" + uuid.uuid4().hex[:10]


def psql(server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-d", "cube",
           "-A", "-t", *args]  # fmt: skip
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60, env=env)


def waiters(server) -> float:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("cubequeue_blocked_waiters "):
                return float(line.split()[1])
    raise AssertionError("no waiter gauge")


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_multi_statement_c_and_no_warning(server):
    p = prefix()
    out = psql(server, "-c", f"QUEUE ADD PRIORITY 1 '{p}:a' '{{}}'; QUEUE ADD '{p}:b' 'x'; "
                             f"QUEUE LIST '{p}'")  # fmt: skip
    assert out.returncode == 0, out.stderr
    # psql 15 shows the result of every statement of the string
    first, second, *listed = out.stdout.splitlines()
    id_a, id_b = first.split("|")[0], second.split("|")[0]
    assert (first, second) == (f"{id_a}|t|1", f"{id_b}|t|2")
    assert listed == [f"a|{id_a}|pending|", f"b|{id_b}|pending|"]
    assert "Some psql features might not work" not in out.stderr + out.stdout


def test_error_display_and_connection_survives(server):
    out = psql(server, "-c", "QUEUE NOPE 'x'", "-c", "SELECT 1")
    assert "ERROR:" in out.stderr and "nope" in out.stderr.lower()
    assert out.stdout.strip() == "1"


def test_on_error_stop_script(server):
    p = prefix()
    script = (
        f"\\set ON_ERROR_STOP on\nQUEUE ADD '{p}:a' 'x';\nQUEUE BROKEN;\nQUEUE ADD '{p}:b' 'y';\n"
    )
    out = psql(server, stdin=script)
    assert out.returncode == 3, out
    assert "ERROR:" in out.stderr
    listed = psql(server, "-c", f"QUEUE LIST '{p}'")
    assert [line.split("|")[0] for line in listed.stdout.splitlines()] == ["a"]


def test_version_and_settings(server):
    out = psql(server, "-c", "SHOW server_version", "-c", "SHOW standard_conforming_strings")
    lines = out.stdout.splitlines()
    assert lines[0].startswith("15.18 (cubequeue ")
    assert lines[1] == "off"


def test_normal_path_and_fast_track(server):
    p = prefix()
    path = f"{p}:job"
    assert psql(server, "-c", f"QUEUE RESULT '{path}'").stdout == ""
    added = psql(server, "-c", f"QUEUE ADD PRIORITY 1 '{path}' $${{\"a\":1}}$$").stdout.strip()
    qid = added.split("|")[0]
    assert added == f"{qid}|t|1"
    blocked = subprocess.Popen(
        ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-A", "-t",
         "-c", f"QUEUE RESULT_BLOCKING 60000 '{path}'"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        script = (
            f"QUEUE LIST '{p}';\n"
            f"QUEUE RETRIEVE EXTENDED CONCURRENCY 2 '{path}';\n"
            f"QUEUE MERGE_EXTRA '{path}' '{{\"stage\":1}}';\n"
            f"QUEUE HEARTBEAT '{path}';\n"
            f"QUEUE ACK '{path}' 'done';\n"
        )
        out = psql(server, "-v", "ON_ERROR_STOP=1", stdin=script)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == f"job|{qid}|pending|"
        assert lines[1] == f'{{"a":1}}||0|job|{qid}'
        assert lines[-1] == "t"
        stdout, stderr = blocked.communicate(timeout=60)
        assert stdout.strip() == f"done|success|{qid}|", stderr
    finally:
        blocked.kill()
    fast = f"{p}:fast"
    out = psql(server, "-c", f"QUEUE ADD_AND_RETRIEVE '{fast}' 'pl' 1")
    assert out.stdout.strip().split("|")[1:] == ["t", "0", "fast", "pl", ""]
    psql(server, "-c", f"QUEUE ACK '{fast}' 'ok'")
    out = psql(server, "-c", f"QUEUE RESULT_BLOCKING 60000 '{fast}'")
    assert out.stdout.strip().split("|")[:2] == ["ok", "success"]


def _controlling_tty() -> None:
    """In the child: a new session whose controlling terminal is the pty on fd 0, so
    Ctrl-C becomes SIGINT for psql (which then sends a CancelRequest)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_ctrl_c_cancels_result_blocking(server):
    base = waiters(server)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-d", "cube"],
        stdin=slave, stdout=slave, stderr=slave, close_fds=True, preexec_fn=_controlling_tty,
        env={**os.environ, "TERM": "dumb", "PAGER": "cat"},
    )  # fmt: skip
    os.close(slave)
    seen = b""

    def read_until(token: bytes, timeout: float = 30.0) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while token not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"never saw {token!r} in {seen!r}"
            ready, _, _ = select.select([master], [], [], remaining)
            if ready:
                seen += os.read(master, 4096)

    try:
        read_until(b"cube=")
        os.write(master, f"QUEUE RESULT_BLOCKING 60000 '{prefix()}:never';\n".encode())
        wait_for(lambda: waiters(server) >= base + 1)
        os.write(master, b"\x03")  # Ctrl-C: psql sends a CancelRequest
        read_until(b"canceling statement due to user request")
        os.write(master, b"SELECT 1;\n")
        read_until(b"(1 row)")
        os.write(master, b"\\q\n")
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
