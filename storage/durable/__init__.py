"""Durable single-node mode: a log of state records, snapshots, fsync policy, recovery.

The in-memory store stays the only thing reads are answered from; every step that changes
state also emits state records (:mod:`.records`), which one writer thread appends, framed
and checksummed (:mod:`.frames`), to preallocated segments (:mod:`.segments`) with group
commit (:mod:`.log`). Snapshots bound the log; recovery (:mod:`.recovery`) loads the newest
valid snapshot and the later log, quarantines what does not validate and enforces expiry.
Everything goes through a file layer (:mod:`.files`) so tests can simulate power loss.
"""

from __future__ import annotations

from cubequeue.storage.durable.files import Files, OsFiles
from cubequeue.storage.durable.image import Image
from cubequeue.storage.durable.log import DurableLog, FsyncPolicy
from cubequeue.storage.durable.recovery import Policy, Recovered, RecoveryRefused, recover

__all__ = [
    "DurableLog",
    "Files",
    "FsyncPolicy",
    "Image",
    "OsFiles",
    "Policy",
    "Recovered",
    "RecoveryRefused",
    "recover",
]
