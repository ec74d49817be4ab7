"""``python -m bench.ab BASE [--new NEW]``: an A/B of two source trees over real sockets.

Each side runs a fresh ``python -m cubequeue.server`` imported from its own tree on
loopback, and is measured the way ``make bench`` measures (server CPU of the server's
process tree from /proc, bench/cpu.py):

* **per Cube cycle**: the QueryQueue cycle over asyncpg (bench/cycle.py's ``run_cycle``),
  for each ``-c`` and ``--mode``;
* **per round trip**: pgbench's ``SELECT 1``, steady state (bench/wire.py's
  ``run_pgbench``), for each ``--wire-modes`` and ``--wire-clients``, and the same against
  the floor server (bench/floor.py) so each side's ratio to the floor is shown too.

Runs alternate: repetition 1 runs base, new, floor; repetition 2 floor, new, base; and so
on, each side on a fresh server, so drift on a shared machine falls on both sides alike.
Reported per measure: each side's median and min–max over the repetitions, new ÷ base
(ratio of the medians, and the min–max of the ratios of the runs of one repetition), and
for round trips each side ÷ the floor. A run that fails its correctness check is left out
and said so. The last lines are a Markdown table for bench/RESULTS-notes.md.

BASE and NEW are each a git revision of this repository (exported with ``git archive``
into a temporary directory), a checkout (a directory holding ``server/``, ``grammar/``
and ``storage/``), or a directory holding ``cubequeue/{server,grammar,storage}``. NEW
defaults to the installed tree (the work tree, for an editable install).

    python -m bench.ab HEAD~3                       # the work tree against HEAD~3
    python -m bench.ab main --new my-branch --reps 7 -c 1 64 --wire-modes prepared
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import peers
from bench.adapters import Target, setup
from bench.cycle import CycleConfig, run_cycle
from bench.wire import MODES, Workload, run_pgbench

__all__ = ["Measure", "main", "prepared_tree", "summary"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "grammar", "storage")
FLOOR = "floor"


@contextlib.contextmanager
def prepared_tree(spec: str | None) -> Iterator[Path | None]:
    """A directory holding ``cubequeue/{server,grammar,storage}`` for ``spec`` (module
    doc), removed afterwards if it was made here; None (the installed tree) for None."""
    if spec is None:
        yield None
        return
    given = Path(spec)
    if given.is_dir() and all((given / "cubequeue" / p).is_dir() for p in PACKAGES):
        yield given.resolve()
        return
    tmp = Path(tempfile.mkdtemp(prefix="cqbench-ab-"))
    try:
        (tmp / "cubequeue").mkdir()
        if given.is_dir() and all((given / p).is_dir() for p in PACKAGES):
            for p in PACKAGES:
                (tmp / "cubequeue" / p).symlink_to((given / p).resolve())
        else:
            rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                                  f"{spec}^{{commit}}"], capture_output=True, text=True)  # fmt: skip
            if rev.returncode != 0:
                raise SystemExit(f"{spec!r} is neither a source tree nor a git revision")
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--prefix=cubequeue/",
                                      rev.stdout.strip(), *PACKAGES],
                                     capture_output=True, check=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Measure:
    """One figure measured on every side, run by run (µs of server CPU)."""

    label: str
    unit: str
    runs: dict[str, list[float]] = field(default_factory=dict)
    #: the repetition each figure came from, to pair the sides' runs
    reps: dict[str, list[int]] = field(default_factory=dict)

    def add(self, side: str, rep: int, value: float) -> None:
        self.runs.setdefault(side, []).append(value)
        self.reps.setdefault(side, []).append(rep)

    def median(self, side: str) -> float | None:
        vals = self.runs.get(side)
        return statistics.median(vals) if vals else None

    def spread(self, side: str) -> str:
        vals = self.runs.get(side)
        if not vals:
            return "—"
        return f"{statistics.median(vals):.1f} ({min(vals):.1f}–{max(vals):.1f})"

    def ratio(self, top: str, bottom: str) -> str:
        """top ÷ bottom: ratio of the medians (min–max of same-repetition ratios)."""
        a, b = self.median(top), self.median(bottom)
        if a is None or b is None or b <= 0:
            return "—"
        by_rep = dict(zip(self.reps[bottom], self.runs[bottom], strict=True))
        pairs = [v / by_rep[r] for r, v in zip(self.reps[top], self.runs[top], strict=True)
                 if by_rep.get(r, 0) > 0]  # fmt: skip
        span = f" ({min(pairs):.2f}–{max(pairs):.2f})" if len(pairs) > 1 else ""
        return f"{a / b:.2f}×{span}"


def summary(measures: list[Measure], base: str, new: str) -> list[str]:
    """Markdown table: each side's median (min–max), new ÷ base, and ÷ the floor."""
    out = [f"| measure | base ({base}) | new ({new}) | new ÷ base | base ÷ floor | new ÷ floor |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for m in measures:
        floor = FLOOR in m.runs
        out.append(f"| {m.label}, {m.unit} | {m.spread('base')} | {m.spread('new')} "
                   f"| {m.ratio('new', 'base')} | {m.ratio('base', FLOOR) if floor else ''} "
                   f"| {m.ratio('new', FLOOR) if floor else ''} |")  # fmt: skip
    return out


def _log(text: str) -> None:
    print(text, flush=True)


def _side(side: str, tree: Path | None, rep: int, cycles: list[CycleConfig],
          wires: list[tuple[str, int]], seconds: int, measures: dict[str, Measure],
          floor: peers.Peer | None) -> None:  # fmt: skip
    """One side's runs of one repetition, on a fresh server (the floor's: a shared one)."""
    peer = floor if side == FLOOR else peers.start_cubequeue(tree=tree)
    assert peer is not None
    try:
        if side != FLOOR:
            target = Target("cubequeue", "127.0.0.1", peer.port, peer.dsn)
            asyncio.run(setup(target))
            for cfg in cycles:
                label = f"cycle C={cfg.clients} conc={cfg.concurrency} {cfg.mode}"
                run = run_cycle(target, peer.pid, cfg, f"ab{rep}{side}{cfg.clients}{cfg.mode[0]}")
                verdict = "" if run.ok else f" REJECTED {'; '.join(run.errors)[:200]}"
                _log(f"#{rep + 1} {side:5} {label:32} {run.server_cpu_us:8.1f} µs/cycle "
                     f"{run.cycles_per_s:6.0f}/s{verdict}")  # fmt: skip
                if run.ok:
                    measures.setdefault(label, Measure(label, "server µs/cycle")).add(
                        side, rep, run.server_cpu_us)
        w = Workload(peer.name, "SELECT 1", "SELECT 1", "SELECT 1")
        for mode, clients in wires:
            label = f"SELECT 1 -M {mode} -c {clients}"
            wire = run_pgbench(peer, w, mode, clients, seconds)
            verdict = "" if wire.ok else f" REJECTED {'; '.join(wire.errors)[:200]}"
            _log(f"#{rep + 1} {side:5} {label:32} {wire.us_per_statement:8.1f} µs/round trip "
                 f"{wire.tps:6.0f}/s{verdict}")  # fmt: skip
            if wire.ok:
                measures.setdefault(label, Measure(label, "server µs/round trip")).add(
                    side, rep, wire.us_per_statement)
    finally:
        if side != FLOOR:
            peer.stop()


def run_ab(base: Path | None, new: Path | None, reps: int, cycles: list[CycleConfig],
           wires: list[tuple[str, int]], seconds: int, with_floor: bool,
           log: Callable[[str], None] = _log) -> list[Measure]:  # fmt: skip
    """Alternated repetitions (module doc); the measures in the order first measured."""
    measures: dict[str, Measure] = {}
    trees = {"base": base, "new": new}
    floor = peers.start_floor() if with_floor and wires else None
    sides = ["base", "new", *([FLOOR] if floor is not None else [])]
    try:
        for rep in range(reps):
            order = sides if rep % 2 == 0 else sides[::-1]
            log(f"repetition {rep + 1}/{reps}: {' → '.join(order)}")
            for side in order:
                _side(side, trees.get(side), rep, cycles, wires, seconds, measures, floor)
    finally:
        if floor is not None:
            floor.stop()
    return list(measures.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0],
                                 epilog="See the module docstring (bench/ab.py) for the method.")  # fmt: skip
    ap.add_argument("base", metavar="BASE", help="git revision or source tree (the A side)")
    ap.add_argument("--new", metavar="NEW", help="git revision or source tree (default: installed)")
    ap.add_argument("--reps", type=int, default=5, help="alternated repetitions (default 5)")
    ap.add_argument("-c", "--clients", type=int, nargs="*", default=[1, 8],
                    help="cycle client counts (none: no cycle runs)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--mode", nargs="+", choices=("normal", "fast"), default=["normal", "fast"])
    ap.add_argument("--queries", type=int, default=400, help="queries per cycle run")
    ap.add_argument("--wire-modes", nargs="*", choices=MODES, default=list(MODES),
                    help="pgbench -M modes of SELECT 1 (none: no round-trip runs)")
    ap.add_argument("--wire-clients", type=int, nargs="+", default=[1, 64])
    ap.add_argument("-T", "--seconds", type=int, default=5, help="pgbench -T per run")
    ap.add_argument("--no-floor", action="store_true", help="skip the floor server's runs")
    args = ap.parse_args(argv)
    cycles = [CycleConfig(c, args.concurrency, mode == "fast", args.queries)
              for c in args.clients for mode in args.mode]  # fmt: skip
    wires = [(mode, c) for c in args.wire_clients for mode in args.wire_modes]
    new_name = args.new or "installed tree"
    with prepared_tree(args.base) as base, prepared_tree(args.new) as new:
        measures = run_ab(base, new, args.reps, cycles, wires, args.seconds, not args.no_floor)
    reps = f"{args.reps} alternated repetition{'s' if args.reps != 1 else ''}"
    _log(f"\nA/B over real sockets, {reps}; median (min–max) "
         "of server CPU; ratios: of the medians (min–max of same-repetition ratios)\n")  # fmt: skip
    for line in summary(measures, args.base, new_name):
        _log(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
