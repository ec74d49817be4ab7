"""Cube's own QueryQueue from npm over the path Cube really uses.

``python -m bench.cube_queue [--quick] [--seconds S]``. Several node processes
(``bench/queryqueue/workload.cjs``) share one queue and call ``executeInQueue`` from
``concurrency`` loops each, with a query handler that returns at once:

* ``redis``: the 0.35 line's ``RedisQueueDriver`` against Redis 7 (no persistence);
* ``cubequeue 0.35``: the 0.35 line's Cube Store queue driver over the WebSocket;
* ``cubequeue 1.7 normal|fast``: the 1.7.43 driver (tests/node) with
  ``CUBEJS_QUEUE_FAST_TRACK`` off or on; the server advertises 1.7.25, so with the switch
  on the driver's ``queueAddAndRetrieve`` capability holds and every query (priority 10,
  Interactive) is added with ``QUEUE ADD_AND_RETRIEVE``.

Every process connects and finishes its warm-up queries before the window opens; the
server's CPU (whole process tree, ``cpu.py``) is read when the driver says "go" and when
the last process has had all its queries answered, and each node process reports its own
``process.cpuUsage()`` over its window. A run whose queries were not each executed once
and answered once with their own result is not a result (``check.py``).

``--probe N`` measures instead the cheapest A/B of the WebSocket path: N statements sent
one after another over one socket (each answer read before the next is sent), the
server's CPU per statement from /proc (``sequential_probe``). The client is Python's
websockets; its CPU is not counted.

``--account`` splits the server's CPU per query of one run (``--line``, ``--fast``,
``--concurrency``) by what the server does: the server runs with CPU-time counters
(``time.process_time``, so descheduling on a loaded machine is not counted) around the
WebSocket path's parts and call counters on the rest (frames out, pings and pongs,
tasks, waits, connections, HTTP requests), read at the window's start and end; the
server's statements per query come from /metrics. The counters cost a few µs per
statement, so read the split, not the total, from it.

``--ab BASE`` alternates runs of the same configuration against the server imported
from another source tree (``BASE/cubequeue/{grammar,server,storage}``, e.g. the files
of an earlier commit) and the current one, and reports the medians and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench import peers
from bench.check import Check, check_run
from bench.cpu import tree_cpu_s
from bench.stats import agg, pct

__all__ = ["CONFIGS", "PROBES", "PROCESSES", "QQConfig", "QQRun", "deps_missing", "run_queryqueue",
           "sequential_probe", "server_statements", "table"]  # fmt: skip

ROOT = Path(__file__).resolve().parent
WORKLOAD = ROOT / "queryqueue" / "workload.cjs"
NODE_MODULES = (ROOT / "queryqueue" / "node_modules", ROOT.parent / "tests" / "node" / "node_modules")
NODE = "node"
PROCESSES = 3
WARMUP_QUERIES = 8
READY_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class QQConfig:
    """One column of the table: which server, which Cube line, which switches."""

    system: str  # "cubequeue" | "redis"
    line: str  # "0.35" | "1.7"
    fast: bool
    concurrency: int
    processes: int = PROCESSES

    @property
    def driver(self) -> str:
        return "redis" if self.system == "redis" else "cubestore"

    @property
    def label(self) -> str:
        track = (" fast" if self.fast else " normal") if self.line == "1.7" else ""
        return f"{self.system} {self.line}{track}"


#: the configurations of the table, in the order they are interleaved
CONFIGS: tuple[tuple[str, str, bool], ...] = (
    ("redis", "0.35", False),
    ("cubequeue", "0.35", False),
    ("cubequeue", "1.7", False),
    ("cubequeue", "1.7", True),
)


@dataclass(slots=True)
class QQRun:
    config: QQConfig
    seconds: float
    queries: int
    server_cpu_s: float
    client_cpu_s: float
    latencies_ms: list[float]
    retries: int
    #: cubequeue only: statements run in the window, by command (from /metrics)
    statements: Counter[str] = field(default_factory=Counter)
    check: Check | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and self.queries > 0 and self.check is not None and self.check.ok

    @property
    def qps(self) -> float:
        return self.queries / self.seconds if self.seconds else 0.0

    @property
    def server_us_per_query(self) -> float:
        return self.server_cpu_s / self.queries * 1e6 if self.queries else 0.0

    @property
    def client_us_per_query(self) -> float:
        return self.client_cpu_s / self.queries * 1e6 if self.queries else 0.0

    @property
    def statements_per_query(self) -> float:
        return sum(self.statements.values()) / self.queries if self.queries else 0.0

    @property
    def p50_ms(self) -> float:
        return pct(self.latencies_ms, 50)

    @property
    def p99_ms(self) -> float:
        return pct(self.latencies_ms, 99)


def deps_missing() -> str | None:
    """Why the bench cannot run here, or None (``make bench-deps`` installs both trees)."""
    for tree in NODE_MODULES:
        if not tree.is_dir():
            return f"{tree} is missing (make bench-deps)"
    return None


class _Lines:
    """A node process's stdout lines through a reader thread, so every wait has a deadline
    (Cube's driver retries a refused WebSocket forever, silently)."""

    def __init__(self, proc: subprocess.Popen[str], stderr: Path) -> None:
        self.proc, self.stderr = proc, stderr
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line)
        self._q.put("")  # EOF

    def event(self, want: str, deadline: float) -> dict[str, Any]:
        """The next ``want`` event; the node side writes nothing but JSON lines to stdout."""
        while True:
            try:
                line = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {want!r} from the workload within its timeout") from None
            if not line:
                tail = self.stderr.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"workload exited ({self.proc.wait()}) before {want!r}: {tail}")
            event: dict[str, Any] = json.loads(line)
            if event.get("event") == "error":
                raise RuntimeError(f"workload failed: {event.get('error')}")
            if event.get("event") == want:
                return event


def _send(proc: subprocess.Popen[str], line: str) -> None:
    stdin: IO[str] | None = proc.stdin
    assert stdin is not None
    stdin.write(line + "\n")
    stdin.flush()


def _spawn(cfg: QQConfig, port: int, seconds: float, tag: str, i: int,
           workdir: Path) -> tuple[subprocess.Popen[str], _Lines]:  # fmt: skip
    args = {"line": cfg.line, "driver": cfg.driver, "host": "127.0.0.1", "port": port,
            "concurrency": cfg.concurrency, "callers": cfg.concurrency, "seconds": seconds,
            "warmup": min(cfg.concurrency, WARMUP_QUERIES), "prefix": f"bench_{tag}",
            "tag": f"{tag}.{i}"}  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUBEJS_")}
    env["CUBEJS_QUEUE_FAST_TRACK"] = "true" if cfg.fast else "false"
    err = workdir / f"node-{i}.err"
    with open(err, "w") as fh:
        proc = subprocess.Popen([NODE, str(WORKLOAD), json.dumps(args)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=fh, text=True, env=env,
                                cwd=WORKLOAD.parent)  # fmt: skip
    return proc, _Lines(proc, err)


_COMMAND_RE = re.compile(r'^cubequeue_commands_total\{command="([^"]*)",[^}]*\} ([0-9.e+]+)$', re.M)


def server_statements(peer: peers.Peer) -> Counter[str]:
    """Statements cubequeue has run so far, by command (its /metrics); empty for Redis."""
    if peer.name != "cubequeue":
        return Counter()
    url = f"http://127.0.0.1:{peer.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: Counter[str] = Counter()
    for command, value in _COMMAND_RE.findall(text):
        out[command] += int(float(value))
    return out


def run_queryqueue(peer: peers.Peer, cfg: QQConfig, seconds: float, tag: str,
                   ready_timeout_s: float = READY_TIMEOUT_S) -> QQRun:  # fmt: skip
    """One bounded run of ``cfg`` against ``peer`` (cubequeue's WebSocket or Redis)."""
    port = peer.http_port if cfg.system == "cubequeue" else peer.port
    run = QQRun(cfg, 0.0, 0, 0.0, 0.0, [], 0)
    procs: list[tuple[subprocess.Popen[str], _Lines]] = []
    with tempfile.TemporaryDirectory(prefix="cqbench-qq-") as tmp:
        try:
            procs = [_spawn(cfg, port, seconds, tag, i, Path(tmp)) for i in range(cfg.processes)]
            deadline = time.monotonic() + ready_timeout_s
            for _, lines in procs:
                lines.event("ready", deadline)
            stmts0 = server_statements(peer)  # read outside the CPU window
            cpu0, t0 = tree_cpu_s(peer.pid), time.perf_counter()
            for proc, _ in procs:
                _send(proc, "go")
            deadline = time.monotonic() + seconds + DRAIN_TIMEOUT_S
            done = [lines.event("done", deadline) for _, lines in procs]
            run.seconds = time.perf_counter() - t0
            run.server_cpu_s = tree_cpu_s(peer.pid) - cpu0
            run.statements = server_statements(peer) - stmts0
            run.client_cpu_s = sum(float(d["cpu_s"]) for d in done)
            submitted: list[str] = []
            executed: list[str] = []
            answered: list[tuple[str, bool]] = []
            for proc, lines in procs:
                _send(proc, "report")
                rep = lines.event("report", deadline)
                submitted += rep["submitted"]
                executed += rep["executed"]
                answered += [(str(p), bool(ok)) for p, ok in rep["answered"]]
                run.latencies_ms += [float(v) for v in rep["latencies_ms"]]
                run.retries += int(rep["retries"])
                run.errors += [str(e) for e in rep["errors"]]
            run.queries = len(submitted)
            run.check = check_run(submitted, executed, answered)
        except (RuntimeError, TimeoutError, OSError, json.JSONDecodeError) as exc:
            run.errors.append(str(exc))
        finally:
            for proc, _ in procs:
                if proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()
            for proc, _ in procs:
                try:
                    proc.wait(0 if run.errors else 20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return run


#: the statements of ``--probe``: (label, text, typed parameters)
PROBES: tuple[tuple[str, str, list[str] | None], ...] = (
    ("QUEUE LIST (empty prefix)", "QUEUE LIST 'probe'", None),
    ("CACHE GET ? (absent key)", "CACHE GET ?", ["probe:k"]),
)
PROBE_WARMUP = 300


def sequential_probe(peer: peers.Peer, sql: str, n: int, params: list[str] | None = None) -> float:
    """Server CPU µs per statement for ``n`` sequential ``sql`` over one WebSocket."""
    from websockets.sync.client import connect

    from cubequeue.server.cubews.codec import encode_query

    url = f"ws://127.0.0.1:{peer.http_port}/ws"
    frames = [encode_query(i + 1, "bench-probe", sql, parameters=params)
              for i in range(PROBE_WARMUP + n)]  # fmt: skip
    with connect(url, compression=None, max_size=2**28) as ws:
        for frame in frames[:PROBE_WARMUP]:
            ws.send(frame)
            ws.recv()
        cpu0 = tree_cpu_s(peer.pid)
        for frame in frames[PROBE_WARMUP:]:
            ws.send(frame)
            ws.recv()
        return (tree_cpu_s(peer.pid) - cpu0) / n * 1e6


def table(runs: dict[tuple[str, int], list[QQRun]]) -> list[str]:
    """Markdown rows: median over the runs of each (configuration, concurrency)."""

    out = ["| concurrency | client | queries/s | p50 ms | p99 ms | server CPU µs/query "
           "| node clients' CPU µs/query | statements/query | waits retried |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (label, conc), rs in sorted(runs.items(), key=lambda kv: (kv[0][1], _order(kv[0][0]))):
        out.append(
            f"| {conc} | {label} | {agg([r.qps for r in rs]).fmt()} "
            f"| {agg([r.p50_ms for r in rs]).fmt(2)} | {agg([r.p99_ms for r in rs]).fmt(2)} "
            f"| {agg([r.server_us_per_query for r in rs]).fmt()} "
            f"| {agg([r.client_us_per_query for r in rs]).fmt()} "
            f"| {_statements(rs)} | {sum(r.retries for r in rs)} |"
        )
    return out


def _statements(runs: list[QQRun]) -> str:
    """Statements per query and the three most frequent commands (cubequeue only)."""

    total: Counter[str] = sum((r.statements for r in runs), Counter())
    if not total:
        return ""
    queries = sum(r.queries for r in runs)
    top = ", ".join(f"{c.removeprefix('QUEUE ')} {n / queries:.1f}" for c, n in total.most_common(3))
    return f"{agg([r.statements_per_query for r in runs]).fmt(1)} ({top})"


def _order(label: str) -> int:
    labels = [QQConfig(s, ln, f, 2).label for s, ln, f in CONFIGS]
    return labels.index(label) if label in labels else len(labels)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 s per configuration")
    ap.add_argument("--seconds", type=float, default=0.0, help="window per run (default 10)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--probe", type=int, default=0, metavar="N",
                    help="only the sequential probe: N statements over one socket")
    ap.add_argument("--account", action="store_true",
                    help="split the server's CPU per query of one run by part")
    ap.add_argument("--ab", type=Path, metavar="BASE",
                    help="alternate runs against the server from BASE and the current one")
    ap.add_argument("--ab-new", type=Path, metavar="NEW",
                    help="with --ab: the other tree (default: the current one)")
    ap.add_argument("--line", default="1.7", choices=("0.35", "1.7"))
    ap.add_argument("--fast", action="store_true", help="1.7: the fast track on")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--serve-accounted", metavar="OUT", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args(argv)
    if args.serve_accounted:
        return serve_accounted(args.serve_accounted, [a for a in rest if a != "--"])
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.probe:
        return _probe(args.probe, args.reps)
    if args.account or args.ab:
        cfg = QQConfig("cubequeue", args.line, args.fast, args.concurrency)
        seconds = args.seconds or (3.0 if args.quick else 10.0)
        if args.ab:
            print("| configuration | base µs/query | new µs/query | new/base |\n|---|---|---|---|")
            print("\n".join(ab_runs(args.ab, cfg, seconds, max(2, args.reps), args.ab_new)))
        else:
            print("\n".join(account(cfg, seconds)))
        return 0
    missing = deps_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    cq = peers.start_cubequeue()
    redis = peers.start_redis() if peers.have_redis() else None
    runs: dict[tuple[str, int], list[QQRun]] = {}
    try:
        for conc in (2, 64):
            for rep in range(args.reps):
                for system, line, fast in CONFIGS:
                    peer = redis if system == "redis" else cq
                    if peer is None:
                        continue
                    cfg = QQConfig(system, line, fast, conc)
                    tag = f"{system[0]}{line.replace('.', '')}{'f' if fast else 'n'}c{conc}r{rep}"
                    r = run_queryqueue(peer, cfg, seconds, tag)
                    status = "ok" if r.ok else f"REJECTED {r.errors or r.check}"
                    print(f"{cfg.label:24} conc={conc:2} {r.qps:7.0f} q/s server "
                          f"{r.server_us_per_query:6.0f} µs/q nodes {r.client_us_per_query:6.0f} "
                          f"µs/q p50 {r.p50_ms:.2f} p99 {r.p99_ms:.2f} ms {status}", flush=True)
                    if r.ok:
                        runs.setdefault((cfg.label, conc), []).append(r)
    finally:
        cq.stop()
        if redis is not None:
            redis.stop()
    print("\n".join(table(runs)))
    return 0


#: the parts ``--account`` times: (module, class or None, function, label)
ACCOUNT_TIMED: tuple[tuple[str, str | None, str, str], ...] = (
    ("cubequeue.server.cubews.inline_frames", "InlineFrames", "data_received", "transport callback (all below)"),
    ("cubequeue.server.cubews.session", None, "decode_message", "  decode the request"),
    ("cubequeue.server.executor", "Executor", "statement", "  run the statement"),
    ("cubequeue.server.cubews.session", None, "encode_result_set", "  encode the answer"),
    ("cubequeue.server.cubews.inline_frames", "InlineFrames", "flush", "  write to the socket"),
    ("cubequeue.server.cubews.inline_frames", "InlineFrames", "_feed", "  library parser (ping/pong/close)"),
    ("cubequeue.server.cubews.session", "WsSession", "settle", "a wait's answer (settle)"),
)
#: the events ``--account`` counts: (module, class, function, label)
ACCOUNT_COUNTED: tuple[tuple[str, str | None, str, str], ...] = (
    ("cubequeue.server.cubews.inline_frames", "InlineFrames", "send", "answer frames out"),
    ("websockets.protocol", "Protocol", "send_frame", "library frames out (pings, pongs, close)"),
    ("websockets.asyncio.connection", "Connection", "ping", "pings sent"),
    ("websockets.asyncio.connection", "Connection", "acknowledge_pings", "pongs received"),
    ("cubequeue.server.cubews.endpoint", "_Socket", "_spawn", "tasks created"),
    ("cubequeue.server.executor", "Executor", "complete", "waits (executor.complete)"),
    ("cubequeue.server.cubews.endpoint", "WsEndpoint", "handle", "new WebSocket connections"),
    ("cubequeue.server.http", None, "process_request", "HTTP requests"),
)


def serve_accounted(out: str, argv: list[str]) -> int:
    """The server with the ``--account`` counters; SIGUSR1/SIGUSR2 snapshot them (the
    window's start and end), the second into ``out`` as JSON."""
    import functools
    import importlib
    import resource
    import signal

    clock = time.process_time
    spent: dict[str, float] = {}
    calls: Counter[str] = Counter()

    def patch(module: str, owner: str | None, name: str, label: str, timed: bool) -> None:
        mod = importlib.import_module(module)
        holder = getattr(mod, owner) if owner else mod
        inner = getattr(holder, name)
        if timed:
            @functools.wraps(inner)
            def wrapper(*a: Any, **k: Any) -> Any:
                t0 = clock()
                try:
                    return inner(*a, **k)
                finally:
                    spent[label] = spent.get(label, 0.0) + clock() - t0
                    calls[label] += 1
        else:
            @functools.wraps(inner)
            def wrapper(*a: Any, **k: Any) -> Any:
                calls[label] += 1
                return inner(*a, **k)
        setattr(holder, name, wrapper)

    for module, owner, name, label in ACCOUNT_TIMED:
        patch(module, owner, name, label, True)
    for module, owner_c, name, label in ACCOUNT_COUNTED:
        with contextlib.suppress(ImportError, AttributeError):
            patch(module, owner_c, name, label, False)
    snaps: dict[str, Any] = {}

    def snap(tag: str) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        snaps[tag] = {"cpu": ru.ru_utime + ru.ru_stime, "sys": ru.ru_stime,
                      "spent": dict(spent), "calls": dict(calls)}  # fmt: skip
        if tag == "end":
            Path(out).write_text(json.dumps(snaps))

    signal.signal(signal.SIGUSR1, lambda *_: snap("start"))
    signal.signal(signal.SIGUSR2, lambda *_: snap("end"))
    from cubequeue.server.cli import main as server_main

    return server_main(argv)


def account(cfg: QQConfig, seconds: float) -> list[str]:
    """One run of ``cfg`` against an accounted server: markdown rows per query."""
    import signal

    with tempfile.TemporaryDirectory(prefix="cqbench-acct-") as tmp:
        out = Path(tmp) / "account.json"
        workdir = Path(tmp) / "server"
        workdir.mkdir()
        port, http_port = peers.free_port(), peers.free_port()
        cmd = [sys.executable, "-m", "bench.cube_queue", "--serve-accounted", str(out), "--",
               "--port", str(port), "--http-port", str(http_port)]  # fmt: skip
        with open(workdir / "server.log", "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=ROOT.parent)  # fmt: skip
        peer = peers.Peer("cubequeue", port, proc, workdir, "accounted", http_port=http_port)
        peers._wait(peer, lambda: peers._accepts(port) and peers._accepts(http_port))
        marks = iter((signal.SIGUSR1, signal.SIGUSR2))
        global tree_cpu_s
        plain = tree_cpu_s

        def marked(root: int) -> float:  # the window's CPU reads also snapshot the counters
            value = plain(root)
            os.kill(root, next(marks))
            return value

        tree_cpu_s = marked
        try:
            run = run_queryqueue(peer, cfg, seconds, "acct")
            deadline = time.monotonic() + 10
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            tree_cpu_s = plain
            peer.stop()
        if not run.ok or not out.exists():
            return [f"run rejected: {run.errors or run.check}"]
        snaps = json.loads(out.read_text())
    return account_rows(run, snaps["start"], snaps["end"])


def account_rows(run: QQRun, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    q = run.queries
    cpu = (b["cpu"] - a["cpu"]) / q * 1e6
    rows = [f"{run.config.label}, concurrency {run.config.concurrency}: {q} queries, "
            f"{run.qps:.0f}/s; server CPU {cpu:.0f} µs/query (kernel "
            f"{(b['sys'] - a['sys']) / q * 1e6:.0f}), {run.statements_per_query:.2f} "
            f"statements/query ({_statements([run])})", "",
            "| part | µs/query | share | calls/query | µs/call |", "|---|---|---|---|---|"]  # fmt: skip
    inside = 0.0
    for _, _, _, label in ACCOUNT_TIMED:
        us = (b["spent"].get(label, 0.0) - a["spent"].get(label, 0.0)) / q * 1e6
        n = (b["calls"].get(label, 0) - a["calls"].get(label, 0)) / q
        if not label.startswith(" "):
            inside += us
        rows.append(f"| {label.strip() if not label.startswith(' ') else '↳ ' + label.strip()} "
                    f"| {us:.0f} | {us / cpu:.0%} | {n:.2f} | {us / n if n else 0:.1f} |")  # fmt: skip
    rest = cpu - inside
    rows.append(f"| everything else (event loop, syscalls, timers, GC) | {rest:.0f} "
                f"| {rest / cpu:.0%} | | |")  # fmt: skip
    rows += ["", "| event | per query |", "|---|---|"]
    for _, _, _, label in ACCOUNT_COUNTED:
        n = (b["calls"].get(label, 0) - a["calls"].get(label, 0)) / q
        rows.append(f"| {label} | {n:.2f} |")
    return rows


def ab_runs(base: Path, cfg: QQConfig, seconds: float, reps: int,
            new: Path | None = None) -> list[str]:  # fmt: skip
    """``reps`` pairs of runs, base and new (default: the current tree) alternated:
    medians and their ratio."""
    figures: dict[str, list[float]] = {"base": [], "new": []}
    for rep in range(reps):
        for side in ("base", "new") if rep % 2 == 0 else ("new", "base"):
            old = os.environ.get("PYTHONPATH")
            tree = base if side == "base" else new
            if tree is not None:
                os.environ["PYTHONPATH"] = str(tree)
            try:
                peer = peers.start_cubequeue()
            finally:
                if old is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = old
            try:
                run = run_queryqueue(peer, cfg, seconds, f"ab{side}{rep}")
            finally:
                peer.stop()
            if run.ok:
                figures[side].append(run.server_us_per_query)
            print(f"{side:4} {cfg.label} conc={cfg.concurrency} {run.server_us_per_query:6.0f} "
                  f"µs/query {run.qps:6.0f} q/s {'ok' if run.ok else run.errors}", flush=True)
    b, n = agg(figures["base"]), agg(figures["new"])
    ratio = n.median / b.median if b.median else 0.0
    return [f"| {cfg.label} conc {cfg.concurrency} | {b.fmt()} | {n.fmt()} | {ratio:.2f} |"]


def _probe(n: int, reps: int) -> int:
    cq = peers.start_cubequeue()
    try:
        for label, sql, params in PROBES:
            figures = [sequential_probe(cq, sql, n, params) for _ in range(reps)]
            print(f"{label:28} server CPU {agg(figures).fmt(1)} µs/statement ({n} sequential)")
    finally:
        cq.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
