"""The data directory's lock (storage/durable/lock.py): a second server is refused even
after ``LOCK`` was deleted, and a ``--data-dir`` that names a file gets a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cubequeue.storage.durable.errors import DataDirLocked
from cubequeue.storage.durable.lock import DirectoryLock


def test_a_second_lock_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    first = DirectoryLock(str(tmp_path))
    try:
        with pytest.raises(DataDirLocked, match=f"in use by process {os.getpid()}"):
            DirectoryLock(str(tmp_path))
    finally:
        first.release()
    DirectoryLock(str(tmp_path)).release()  # free again once released


def test_deleting_lock_does_not_let_a_second_server_in(tmp_path: Path) -> None:
    """flock locks open file descriptions, so a second lock in this process conflicts as
    a second server's would."""
    first = DirectoryLock(str(tmp_path))
    try:
        os.unlink(tmp_path / "LOCK")
        with pytest.raises(DataDirLocked, match="LOCK file was removed") as err:
            DirectoryLock(str(tmp_path))
        assert str(tmp_path) in str(err.value)
        assert not (tmp_path / "LOCK").exists()  # refused before touching LOCK
    finally:
        first.release()
    DirectoryLock(str(tmp_path)).release()


@pytest.mark.parametrize("below", [False, True])
def test_a_data_dir_naming_a_file_names_the_option(tmp_path: Path, below: bool) -> None:
    path = tmp_path / "afile"
    path.write_text("x")
    target = path / "sub" if below else path
    with pytest.raises(NotADirectoryError) as err:
        DirectoryLock(str(target))
    assert "--data-dir" in str(err.value) and str(target) in str(err.value)
    assert "File exists" not in str(err.value)
    assert err.value.strerror is not None and "not a directory" in err.value.strerror
