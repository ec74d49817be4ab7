"""``quarantine/``: where recovery sets aside what it will not load.

Bad bytes are copied here, invalid records appended to ``records.jsonl``, a bad snapshot or
a foreign segment moved here whole, and each is noted in ``report.jsonl`` (see
:mod:`.recovery` for when each happens).
"""

from __future__ import annotations

import json
import time
import zlib

from cubequeue.storage.durable.files import Files

__all__ = ["QUARANTINE", "QUARANTINE_MAX_BYTES", "RECORDS", "REPORT", "Quarantine"]

QUARANTINE = "quarantine"
REPORT = "report.jsonl"
RECORDS = "records.jsonl"
#: copies into quarantine/ stop at this many bytes in it (moved files always move)
QUARANTINE_MAX_BYTES = 64 * 1024 * 1024
#: room kept for the report line that says a copy was not kept
_NOTE_BYTES = 1024


class Quarantine:
    """``quarantine/``: copies of bad bytes, bad records and a report, each set aside once.

    Damage that recovery leaves in place (bytes salvage skips, records that fail
    validation) is met again at every restart until a snapshot prunes its segment, so
    each copy is remembered by its identity (file, offset or lsn, length, checksum) in
    ``report.jsonl`` and not made again. Copies stop at ``max_bytes`` for the whole
    directory (the report says what was not kept); a file moved here (a bad snapshot, a
    foreign segment) takes no new space and is always moved.
    """

    def __init__(self, files: Files, data_dir: str,
                 max_bytes: int = QUARANTINE_MAX_BYTES) -> None:
        self._files = files
        self._dir = f"{data_dir}/{QUARANTINE}"
        self._max_bytes = max_bytes
        #: the files this run copied or moved here, in order (the recovery report's list)
        self.set_aside: list[str] = []
        #: how many records this run found invalid (the recovery report's count)
        self.records = 0
        self._known: set[str] = set()
        self._used = 0
        if files.exists(self._dir):
            for name in files.listdir(self._dir):
                self._used += files.size(f"{self._dir}/{name}")
            if files.exists(f"{self._dir}/{REPORT}"):
                self._known = _known_keys(files.read(f"{self._dir}/{REPORT}"))

    def _room(self, size: int) -> bool:
        return self._used + size <= self._max_bytes

    def _write(self, name: str, data: bytes, append: bool = False) -> str:
        self._files.makedirs(self._dir)
        path = f"{self._dir}/{name}"
        exists = self._files.exists(path)
        handle = self._files.open(path, create=not exists)
        try:
            offset = self._files.size(path) if (exists and append) else 0
            if exists and not append:
                self._used -= self._files.size(path)
                self._files.truncate(handle, 0)
            self._files.pwrite(handle, data, offset)
            self._files.datasync(handle)
        finally:
            self._files.close(handle)
        self._files.sync_dir(self._dir)
        self._used += len(data)
        return path

    def bytes(self, source: str, offset: int, data: bytes, reason: str) -> bool:
        """Copy ``data`` (from ``source`` at ``offset``) unless it was copied before;
        True when this call set it aside."""
        key = f"{source}@{offset}+{len(data)}:{zlib.crc32(data):08x}"
        if key in self._known:
            return False
        entry: dict[str, object] = {"file": source, "offset": offset, "bytes": len(data),
                                    "reason": reason}
        if not data:
            pass  # nothing to copy (zeros): the note says what happened
        elif self._room(len(data) + _NOTE_BYTES):
            name = f"{source}.{offset}.{time.time_ns() // 1_000_000}.broken"
            self.set_aside.append(self._write(name, data))
            entry["copy"] = name
        else:
            entry["copy"] = None
            entry["not_kept"] = f"quarantine/ holds its limit of {self._max_bytes} bytes"
        self.note(entry, key)
        return True

    def record(self, source: str, lsn: int, raw: object, reason: str) -> None:
        self.records += 1
        line = json.dumps({"file": source, "lsn": lsn, "reason": reason, "record": raw},
                          ensure_ascii=False, default=repr)
        data = (line + "\n").encode("utf-8", "surrogatepass")
        key = f"{source}#{lsn}:{zlib.crc32(data):08x}"
        if key in self._known:
            return
        entry: dict[str, object] = {"file": source, "lsn": lsn, "reason": reason}
        if self._room(len(data) + _NOTE_BYTES):
            self._write(RECORDS, data, append=True)
            entry["copy"] = RECORDS
        else:
            entry["copy"] = None
        self.note(entry, key)

    def move(self, path: str, name: str, reason: str) -> None:
        """Move the file at ``path`` here as ``name`` (no new space: always done)."""
        self.note({"file": name, "reason": reason, "moved": True})
        self._files.makedirs(self._dir)
        self._used += self._files.size(path)
        self._files.rename(path, f"{self._dir}/{name}")
        self._files.sync_dir(self._dir)
        self._files.sync_dir(path.rsplit("/", 1)[0])
        self.set_aside.append(name)

    def note(self, entry: dict[str, object], key: str | None = None) -> None:
        if key is not None:
            entry["key"] = key
            self._known.add(key)
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        if self._room(len(line)):
            self._write(REPORT, line, append=True)


def _known_keys(report: bytes) -> set[str]:
    """The identities ``report.jsonl`` remembers (a line cut by a crash is skipped)."""
    keys: set[str] = set()
    for line in report.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            keys.add(entry["key"])
    return keys
