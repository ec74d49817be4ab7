"""A throwaway PostgreSQL cluster on loopback, for the PostgreSQL store's tests and benchmarks.

Debian's PostgreSQL binaries (``/usr/lib/postgresql/<major>/bin``) run in a temporary
directory on a free port; initdb and postgres refuse to run as root, so under root they run
as the ``postgres`` user through ``runuser``. A :class:`Cluster` can also start a streaming
standby of itself (``pg_basebackup -R``) and make it synchronous, which is what the
failover test needs: kill the primary, promote the standby, and check that every
acknowledged write is there; or :meth:`Cluster.freeze` it (SIGSTOP of every process, as
a hung or partitioned host) and promote the standby. Test support, not part of the
package (``bench/`` imports it as ``tests.support.pgcluster``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cluster", "as_postgres", "find_bin", "free_port", "init_cluster", "start_cluster"]

#: the database user and the password-less trust the throwaway clusters use
USER = "cq"
_SETTINGS = (
    ("listen_addresses", "127.0.0.1"),
    ("max_connections", "200"),
    ("shared_buffers", "64MB"),
    ("fsync", "off"),  # a throwaway cluster: durability across a host crash is not tested
    ("wal_level", "replica"),
    ("max_wal_senders", "5"),
    ("hot_standby", "on"),
)
_READY_TIMEOUT_S = 60.0


def find_bin() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/<major>/bin`` with initdb, or None."""
    root = Path("/usr/lib/postgresql")
    if not root.is_dir():
        return None
    majors = sorted((p for p in root.iterdir() if (p / "bin" / "initdb").exists()),
                    key=lambda p: int(p.name) if p.name.isdigit() else 0)
    return majors[-1] / "bin" if majors else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def as_postgres(cmd: list[str]) -> list[str]:
    """``cmd`` as the ``postgres`` user when we are root (initdb and postgres refuse root)."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.getuid() == 0 else cmd


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Cluster:
    """One running postgres: its data directory, port and process."""

    bin: Path
    workdir: Path
    data: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    standbys: list[Cluster] = field(default_factory=list)
    owns_workdir: bool = True
    #: the pids :meth:`freeze` stopped (:meth:`stop` and :meth:`kill` continue them first)
    frozen: list[int] = field(default_factory=list)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    @property
    def log(self) -> str:
        path = self.workdir / f"server-{self.port}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run_psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", database, "-c", sql],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr}")
        return out.stdout

    def create_database(self, name: str) -> str:
        self.run_psql(f'create database "{name}"')
        return self.dsn(name)

    def _start(self, *extra: str) -> None:
        log = open(self.workdir / f"server-{self.port}.log", "ab")  # noqa: SIM115 - the child's
        settings = [a for name, value in _SETTINGS for a in ("-c", f"{name}={value}")]
        self.proc = subprocess.Popen(
            as_postgres([str(self.bin / "postgres"), "-D", str(self.data), "-k",
                         str(self.workdir), "-p", str(self.port), *settings, *extra]),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited at start:\n{self.log}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"postgres did not become ready:\n{self.log}")

    def start_standby(self, *, synchronous: bool = True, name: str = "standby1",
                      port: int | None = None) -> Cluster:
        """A streaming standby of this cluster; ``synchronous`` makes every commit wait for
        it (``synchronous_standby_names``), so an acknowledged write survives a promote."""
        data = self.workdir / f"data-{name}"
        if os.getuid() == 0:
            shutil.chown(self.workdir, "postgres", "postgres")
        base = subprocess.run(
            as_postgres([str(self.bin / "pg_basebackup"), "-h", "127.0.0.1", "-p",
                         str(self.port), "-U", USER, "-D", str(data), "-R", "-X", "stream",
                         "--no-sync", "--checkpoint=fast", "-d",
                         f"application_name={name}"]),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if base.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {base.stderr}")
        standby = Cluster(self.bin, self.workdir, data, port or free_port(), owns_workdir=False)
        standby._start()
        self.standbys.append(standby)
        if synchronous:
            self.run_psql(f"alter system set synchronous_standby_names = '{name}'")
            self.run_psql("select pg_reload_conf()")
        return standby

    def promote(self) -> None:
        out = subprocess.run(
            as_postgres([str(self.bin / "pg_ctl"), "promote", "-w", "-D", str(self.data)]),
            capture_output=True, text=True, timeout=120,
        )
        if out.returncode != 0:
            raise RuntimeError(f"pg_ctl promote failed: {out.stderr}")

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid (under root ``proc`` is runuser, its parent)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def processes(self) -> list[int]:
        """The postmaster and its children (backends, walsender, checkpointer, …)."""
        root = self.postmaster_pid()
        if root is None:
            return []
        found = [root]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == root:
                    found.append(int(stat.parent.name))
        return found

    def freeze(self) -> None:
        """SIGSTOP every process of the cluster: it accepts TCP (the kernel does) and
        answers nothing, like a hung or partitioned host. :meth:`thaw` undoes it."""
        self.frozen = self.processes()
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        # under root ``proc`` is runuser, which stops itself when its child stops (job
        # control, as su does) and continues the child only when it is continued itself
        runuser = [self.proc.pid] if self.frozen and self.proc is not None else []
        for pid in [*runuser, *self.frozen]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []

    def kill(self) -> None:
        """SIGKILL the postmaster: a crashed primary (its backends notice the postmaster's
        death and exit on their own)."""
        if self.proc is None:
            return
        self._signal(signal.SIGKILL)
        self.thaw()
        self.proc.wait(timeout=30)
        with contextlib.suppress(FileNotFoundError):
            (self.data / "postmaster.pid").unlink()
        self.proc = None

    def stop(self) -> None:
        for standby in self.standbys:
            standby.stop()
        self.thaw()
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def init_cluster(binary: Path, user: str, *, prefix: str) -> Path:
    """A new temporary directory (named ``prefix…``) whose ``data/`` is a fresh cluster
    (initdb with ``user`` as its superuser, password-less trust, UTF8, the C locale); on
    failure the directory is removed. ``bench/peers.py`` starts its PostgreSQL from one too.
    """
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    if os.getuid() == 0:
        shutil.chown(workdir, "postgres", "postgres")
    init = subprocess.run(
        as_postgres([str(binary / "initdb"), "-D", str(workdir / "data"), "-U", user,
                     "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"]),
        capture_output=True, text=True,
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        raise RuntimeError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
    return workdir


def start_cluster(bin_dir: Path | None = None) -> Cluster:
    """initdb a cluster in a new temporary directory and start it on a free port."""
    binary = bin_dir or find_bin()
    if binary is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    workdir = init_cluster(binary, USER, prefix="cq-pgstore-")
    data = workdir / "data"
    with open(data / "pg_hba.conf", "a") as hba:
        hba.write("host replication all 127.0.0.1/32 trust\n")
    cluster = Cluster(binary, workdir, data, free_port())
    try:
        cluster._start()
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return cluster
