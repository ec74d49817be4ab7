"""Profile the cubequeue server with py-spy while it runs the cycle ("where a
target is missed, profile"). The profiled run is not a measurement (py-spy's sampling
costs the server CPU) and is reported only as the share of samples per function.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.adapters import Target
from bench.cycle import CycleConfig, run_cycle

__all__ = ["profile_cycle", "py_spy", "summarize"]


def py_spy() -> str | None:
    venv = Path(sys.executable).parent / "py-spy"
    return str(venv) if venv.exists() else shutil.which("py-spy")


def _ours(frame: str) -> bool:
    return any(part in frame for part in ("server/", "storage/", "grammar/", "prometheus"))


def summarize(raw: str, top: int = 18) -> list[tuple[str, float, float]]:
    """(function, % self, % inclusive) for the server's own functions, by inclusive share.

    ``self`` attributes each sample to its innermost cubequeue frame, so time spent in
    C code (uvloop's socket write, the libc calls below it) counts for the Python
    function that called it.
    """
    self_n: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1] + ")"
                  for f in stack.split(";") if _ours(f)]  # fmt: skip
        if frames:
            self_n[frames[-1]] += n
        else:
            self_n["(event loop, outside cubequeue code)"] += n
        for f in set(frames):
            incl[f] += n
    if not total:
        return []
    names = [n for n, _ in incl.most_common(top)]
    names += [n for n, _ in self_n.most_common(top) if n not in names][: top // 2]
    return [(n, 100 * self_n[n] / total, 100 * incl[n] / total) for n in names]


def profile_cycle(target: Target, server_pid: int, cfg: CycleConfig,
                  seconds: int = 6) -> list[tuple[str, float, float]]:  # fmt: skip
    exe = py_spy()
    if exe is None:
        return []
    out = Path(tempfile.mkdtemp(prefix="cqbench-prof-")) / "profile.txt"
    spy = subprocess.Popen(
        [exe, "record", "--native", "-r", "500", "-f", "raw", "-o", str(out),
         "--pid", str(server_pid), "-d", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.5)
    deadline = time.monotonic() + seconds - 1
    i = 0
    while time.monotonic() < deadline:
        run_cycle(target, server_pid, cfg, f"prof{i}")
        i += 1
    spy.wait(60)
    if not out.exists():
        return []
    rows = summarize(out.read_text())
    shutil.rmtree(out.parent, ignore_errors=True)
    return rows
