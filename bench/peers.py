"""Start and stop the systems on loopback: cubequeue, PostgreSQL 15, Redis 7 and the floor.

Each peer is started by the benchmark itself on free ports in a throwaway directory and
exposes ``pid`` (the root of its process tree, for ``cpu.tree_cpu_s``).

PostgreSQL keeps its durability defaults (``fsync=on``, ``full_page_writes=on``, WAL
logged tables) except the settings an expert would choose for a queue whose contents are
recoverable (Cube re-queues lost queries): ``PG_SETTINGS`` below, listed verbatim in
RESULTS.md. Its cluster is made by ``tests/support/pgcluster.py`` (``init_cluster``, run
as the ``postgres`` user under root), the one home of starting a throwaway PostgreSQL;
the benchmark starts it with its own settings and PostgreSQL 15 (``PG_BIN``). Redis runs without persistence (``--save '' --appendonly no``),
like cubequeue, which keeps everything in memory. The floor (bench/floor.py) is a bare
uvloop responder that answers ``SELECT 1`` with prebuilt bytes: the round trip's floor.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.pgcluster import as_postgres, free_port, init_cluster

__all__ = [
    "PG_BIN",
    "PG_SETTINGS",
    "Peer",
    "free_port",
    "have_postgres",
    "have_redis",
    "start_cubequeue",
    "start_floor",
    "start_postgres",
    "start_redis",
]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
PG_USER = "bench"

#: what differs from PostgreSQL 15's defaults, and why (reported in RESULTS.md)
PG_SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("listen_addresses", "127.0.0.1", "loopback only"),
    ("max_connections", "300", "64 clients + workers + 64 busy clients + pgbench"),
    ("shared_buffers", "256MB", "the whole working set stays in memory"),
    ("synchronous_commit", "off",
     "a queue's state is recoverable: commits do not wait for the WAL flush "
     "(still crash-consistent; fsync stays on)"),
    ("max_wal_size", "2GB", "no forced checkpoints during a run"),
)  # fmt: skip


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def have_postgres() -> bool:
    return (PG_BIN / "postgres").exists() and (PG_BIN / "initdb").exists()


def have_redis() -> bool:
    return Path(REDIS_SERVER).exists()


@dataclass
class Peer:
    """A started system. ``pid`` roots the process tree whose CPU we count."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    version: str
    http_port: int = 0
    pg_pid: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.pg_pid or self.process.pid

    @property
    def dsn(self) -> str:
        user = PG_USER if self.name == "postgres" else "cube"
        db = "postgres" if self.name == "postgres" else "cube"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def log(self) -> str:
        path = self.workdir / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            # postgres: SIGINT = fast shutdown; the others exit on SIGTERM
            sig = signal.SIGINT if self.name == "postgres" else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait(peer: Peer, ready: object, timeout: float = 30.0) -> Peer:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if peer.process.poll() is not None:
            raise RuntimeError(f"{peer.name} exited at startup:\n{peer.log()[-3000:]}")
        if callable(ready) and ready():
            return peer
        time.sleep(0.05)
    peer.stop()
    raise RuntimeError(f"{peer.name} did not start within {timeout:.0f} s:\n{peer.log()[-3000:]}")


def start_cubequeue(*args: str, tree: Path | None = None) -> Peer:
    """``python -m cubequeue.server`` with its defaults on free ports; ``tree`` is a
    directory holding ``cubequeue/{grammar,server,storage}`` to import the server from
    instead of the installed one (an A/B's base, bench/ab.py)."""
    from importlib.metadata import version

    workdir = Path(tempfile.mkdtemp(prefix="cqbench-cq-"))
    port, http_port = free_port(), free_port()
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - owned by the child
    cmd = [sys.executable, "-m", "cubequeue.server", "--port", str(port),
           "--http-port", str(http_port), *args]  # fmt: skip
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env)  # fmt: skip
    log.close()
    peer = Peer("cubequeue", port, proc, workdir, version("cubequeue"), http_port=http_port)
    return _wait(peer, lambda: _accepts(port) and _accepts(http_port))


def start_floor() -> Peer:
    """``python -m bench.floor`` on a free port (bench/floor.py), from this repository."""
    from importlib.metadata import version

    workdir = Path(tempfile.mkdtemp(prefix="cqbench-floor-"))
    port = free_port()
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - owned by the child
    cmd = [sys.executable, "-m", "bench.floor", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    log.close()
    peer = Peer("floor", port, proc, workdir, f"uvloop {version('uvloop')}")
    return _wait(peer, lambda: _accepts(port))


def start_redis() -> Peer:
    workdir = Path(tempfile.mkdtemp(prefix="cqbench-redis-"))
    port = free_port()
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - owned by the child
    cmd = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    out = subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True).stdout
    ver = next((w[2:] for w in out.split() if w.startswith("v=")), out.strip())
    peer = Peer("redis", port, proc, workdir, ver)
    return _wait(peer, lambda: _redis_ping(port))


def _redis_ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")
    return False


def start_postgres() -> Peer:
    """initdb a throwaway cluster and start ``postgres`` with ``PG_SETTINGS``."""
    workdir = init_cluster(PG_BIN, PG_USER, prefix="cqbench-pg-")
    data = workdir / "data"
    port = free_port()
    settings = [a for name, value, _ in PG_SETTINGS for a in ("-c", f"{name}={value}")]
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        as_postgres([str(PG_BIN / "postgres"), "-D", str(data), "-k", str(workdir),
                     "-p", str(port), *settings]),
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.close()
    out = subprocess.run([str(PG_BIN / "postgres"), "--version"], capture_output=True, text=True)
    # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)" → "15.18"
    words = out.stdout.split()
    peer = Peer("postgres", port, proc, workdir, words[2] if len(words) > 2 else out.stdout)

    def ready() -> bool:
        pidfile = data / "postmaster.pid"
        if not pidfile.exists() or not _accepts(port):
            return False
        lines = pidfile.read_text().splitlines()
        if len(lines) < 8 or "ready" not in lines[7]:
            return False
        peer.pg_pid = int(lines[0])
        return True

    return _wait(peer, ready)
