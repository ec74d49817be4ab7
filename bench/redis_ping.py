"""Redis's round trip, measured as bench/wire.py measures ``SELECT 1``: ``redis-benchmark``
sending ``PING`` (RESP, one command per round trip, no pipelining) from ``c`` connections,
the server's CPU from /proc over a steady window (``WARMUP_S`` in, ``TAIL_S`` before the
end), divided by the commands Redis counted in the same window (``total_commands_processed``
from ``INFO stats``, read over loopback at both ends of the window).

``redis-benchmark`` comes with Debian's redis-server (the redis-tools package), as pgbench
comes with PostgreSQL; like pgbench it runs ``min(c, 2)`` threads.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from bench.cpu import tree_cpu_s
from bench.peers import Peer
from bench.wire import TAIL_S, WARMUP_S, WireRun

__all__ = ["REDIS_BENCHMARK", "have_redis_benchmark", "run_redis_ping"]

REDIS_BENCHMARK = shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark"
#: more requests than any run completes: the run is stopped at its window's end
REQUESTS = 2_000_000_000


def have_redis_benchmark() -> bool:
    return shutil.which(REDIS_BENCHMARK) is not None


def commands_processed(port: int) -> int:
    """Redis's ``total_commands_processed`` (``INFO stats``, one inline command)."""
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(b"INFO stats\r\n")
        data = b""
        while True:
            head, sep, rest = data.partition(b"\r\n")
            if sep and len(rest) >= int(head[1:]):
                break
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("Redis closed the INFO connection")
            data += chunk
    for line in rest.decode().splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":", 1)[1])
    raise ValueError("INFO stats has no total_commands_processed")


def _sleep_until(t: float) -> None:
    left = t - time.time()
    if left > 0:
        time.sleep(left)


def run_redis_ping(peer: Peer, clients: int, seconds: int) -> WireRun:
    """``PING`` from ``clients`` connections for ``seconds``; steady state (module doc)."""
    cmd = [REDIS_BENCHMARK, "-h", "127.0.0.1", "-p", str(peer.port), "-c", str(clients),
           "-n", str(REQUESTS), "-t", "ping_mbulk", "-q"]  # fmt: skip
    if clients > 1:
        cmd += ["--threads", "2"]
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    errors: list[str] = []
    try:
        _sleep_until(started + WARMUP_S)
        t0, cpu0, n0 = time.time(), tree_cpu_s(peer.pid), commands_processed(peer.port)
        _sleep_until(started + seconds - TAIL_S)
        t1, cpu1, n1 = time.time(), tree_cpu_s(peer.pid), commands_processed(peer.port)
    finally:
        proc.terminate()
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
    if proc.returncode not in (0, -15) or "error" in stderr.lower():
        errors.append(stderr.strip()[:300] or f"redis-benchmark exit {proc.returncode}")
    commands = max(0, n1 - n0 - 1)  # the first INFO is counted in n1
    return WireRun("redis", "PING", "RESP", clients, t1 - t0, commands, commands / (t1 - t0),
                   cpu1 - cpu0, total_transactions=commands, errors=errors)  # fmt: skip
