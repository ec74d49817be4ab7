"""Server CPU from /proc, summed over a whole process tree ("server CPU µs").

PostgreSQL forks a backend per connection and background workers, so the postmaster's
own counters say little. For every live process in the tree we add
``utime + stime + cutime + cstime``: a process's own time plus the time of children it
has already reaped. Summed over the live tree, every CPU tick is counted exactly once,
including backends that exited between two snapshots (their time moved into the
postmaster's ``cutime``). Threads (Redis' bio threads, Python's executor threads) are
already included in a process's ``utime``/``stime``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["TICKS_PER_S", "process_tree", "self_cpu_s", "tree_cpu_s"]

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm is in parentheses and may hold spaces: split after the last ')'
    return raw[raw.rfind(")") + 2 :].split()


def _all_ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is not None:
            out[int(name)] = int(fields[1])  # field 4 overall: ppid
    return out


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants (walks every /proc/*/stat ppid)."""
    ppids = _all_ppids()
    children: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in ppids or pid == root:
            out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _cpu_ticks(pids: Iterable[int]) -> int:
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None:
            continue  # exited between the walk and the read: its time is in the parent
        # fields[11..14] = utime, stime, cutime, cstime (stat fields 14..17)
        total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return total


def tree_cpu_s(root: int) -> float:
    """CPU seconds used so far by ``root``'s process tree (see the module docstring)."""
    return _cpu_ticks(process_tree(root)) / TICKS_PER_S


def self_cpu_s() -> float:
    """CPU seconds of this process (all threads), at nanosecond resolution."""
    t = os.times()
    return t.user + t.system
