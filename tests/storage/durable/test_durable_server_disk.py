"""The real server on a data directory: kill -9 restarts add no segments, a first start
fits a small tmpfs (a mounted one, when the tests run as root), and deleting LOCK does
not let a second server in."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

MiB = 1 << 20


def _add(server: CubequeueServer, life: int, count: int) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for i in range(count):
            conn.execute(f"QUEUE ADD PRIORITY 1 'q:{life}-{i}' '{'x' * 100}'").fetchall()


def _files(data_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in data_dir.iterdir() if p.is_file()}


@pytest.mark.slow
def test_kill_9_restarts_add_no_segments(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    args = ("--data-dir", str(data_dir), "--segment-bytes", str(1 << 16))
    listings = []
    for life in range(6):
        server = start_cubequeue(*args)
        try:
            _add(server, life, 20)
            os.kill(server.process.pid, signal.SIGKILL)
            assert server.process.wait(30) == -signal.SIGKILL
        finally:
            server.stop()
        listings.append(_files(data_dir))
    logs = [sorted(n for n in listing if n.startswith("log-")) for listing in listings]
    assert all(names == logs[0] for names in logs), logs  # the same one segment
    totals = [sum(listing.values()) for listing in listings]
    assert max(totals) == totals[0], totals
    server = start_cubequeue(*args)
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert len(conn.execute("QUEUE PENDING 'q'").fetchall()) == 6 * 20
    finally:
        server.stop()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs, as a CI runner's small volume (root only); unmounted after."""
    where = tmp_path / "tmpfs"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(where)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_first_start_with_the_defaults_fits_a_small_tmpfs(small_tmpfs: Path) -> None:
    data_dir = small_tmpfs / "data"
    server = start_cubequeue("--data-dir", str(data_dir))  # --segment-bytes 64 MiB
    try:
        _add(server, 0, 10)
    finally:
        server.stop()
    assert sum(_files(data_dir).values()) <= 4 * MiB


def test_a_second_server_is_refused_after_lock_was_deleted(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = start_cubequeue("--data-dir", str(data_dir))
    try:
        (data_dir / "LOCK").unlink()
        with pytest.raises(RuntimeError, match="is in use by another process"):
            second = start_cubequeue("--data-dir", str(data_dir))
            second.stop()
        _add(first, 0, 1)  # the first one still serves
    finally:
        first.stop()


def test_a_data_dir_naming_a_file_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "afile"
    path.write_text("not a directory")
    with pytest.raises(RuntimeError) as err:
        start_cubequeue("--data-dir", str(path)).stop()
    assert f"--data-dir {path}: is a file, not a directory" in str(err.value)
    assert "File exists" not in str(err.value)
