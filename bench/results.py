"""Write bench/RESULTS.md: the date, the machine, every table (median and min–max over
the runs), the ratio lines against the targets, the profile, and the storage and
grammar micro-benchmarks' own output.
"""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.cube_queue import PROCESSES as QQ_PROCESSES
from bench.cube_queue import QQRun
from bench.cube_queue import table as queryqueue_table
from bench.cycle import CycleRun
from bench.fasttrack import FastTrackRow, fast_track_rows, seed_table
from bench.peers import PG_SETTINGS
from bench.stats import agg, pct
from bench.wake import WakeRun
from bench.wire import WireRun

__all__ = ["FLOOR_TARGET", "FloorRatio", "Report", "floor_ratio", "machine_info", "ratio_lines",
           "write_results"]  # fmt: skip

CycleKey = tuple[str, int, int, str]  # system, clients, concurrency, mode
WireKey = tuple[str, str, str, int]  # system, statement, mode, clients
QQKey = tuple[str, int]  # configuration label (QQConfig.label), concurrency


@dataclass
class Report:
    started: str
    quick: bool
    reps: int
    systems: tuple[str, ...]
    machine: dict[str, str]
    cycle: dict[CycleKey, list[CycleRun]] = field(default_factory=dict)
    wire: dict[WireKey, list[WireRun]] = field(default_factory=dict)
    wake: dict[tuple[str, bool], list[WakeRun]] = field(default_factory=dict)
    queryqueue: dict[QQKey, list[QQRun]] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    extras: dict[str, str] = field(default_factory=dict)
    profile: list[tuple[str, float, float]] = field(default_factory=list)
    profile_config: str = ""
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _cmd(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine_info(versions: dict[str, str]) -> dict[str, str]:
    model = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = next((int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                   if ln.startswith("MemTotal")), 0)  # fmt: skip
    return {
        "nproc": str(os.cpu_count()),
        "CPU": model,
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "Python": platform.python_version(),
        **versions,
    }


def _geomean(values: list[float]) -> float:
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0


def _cpu_ratios(report: Report, other: str) -> list[tuple[CycleKey, float]]:
    out = []
    for key, runs in sorted(report.cycle.items()):
        if key[0] != "cubequeue":
            continue
        peer = report.cycle.get((other, *key[1:]))
        if runs and peer:
            ours = agg([r.server_cpu_us for r in runs]).median
            theirs = agg([r.server_cpu_us for r in peer]).median
            out.append((key, ours / theirs))
    return out


def _verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def ratio_lines(report: Report) -> list[str]:
    lines = []
    for other, target in (("postgres", 0.5), ("redis", 1.5)):
        ratios = _cpu_ratios(report, other)
        if not ratios:
            continue
        g = _geomean([r for _, r in ratios])
        lo, hi = min(r for _, r in ratios), max(r for _, r in ratios)
        lines.append(
            f"server CPU per cycle, cubequeue ÷ {other}: {g:.2f}× geomean over "
            f"{len(ratios)} configs (range {lo:.2f}–{hi:.2f}); target ≤ {target}× → "
            f"{_verdict(hi <= target)}"
        )
    lines.extend(_round_trip_lines(report))
    lines.extend(_queryqueue_lines(report))
    idle = report.wake.get(("cubequeue", False))
    if idle:
        p99 = agg([pct(w.samples_ms, 99) for w in idle])
        p50 = agg([pct(w.samples_ms, 50) for w in idle])
        lines.append(
            f"blocking wake latency at idle, cubequeue: p50 {p50.fmt(3)} ms, p99 "
            f"{p99.fmt(3)} ms; target p99 ≤ 1 ms → {_verdict(p99.median <= 1.0)}"
        )
    ft = [r for r in fast_track_rows(report.cycle, ("cubequeue",)) if r.load.startswith("idle")]
    if ft:
        r = ft[0]
        ok = r.rt_fast.median <= 1.0 and r.rt_normal.median >= 3 and r.p50_saving >= 25
        lines.append(
            f"fast track, cubequeue idle C=1 concurrency 2: add→execution "
            f"{r.rt_fast.median:.2f} RT vs {r.rt_normal.median:.2f} RT normal; p50 "
            f"{r.p50_fast.median:.2f} ms vs {r.p50_normal.median:.2f} ms "
            f"({r.p50_saving:.0f}% lower); target 1 RT vs ≥ 3 and ≥ 25% lower → {_verdict(ok)}"
        )
    lines.extend(_extra_ratio_lines(report))
    return lines


#: issue 28: cubequeue's SELECT 1 round trip at most this many times the floor's
FLOOR_TARGET = 1.25
FLOOR_CLIENTS = (1, 64)
MODES = ("simple", "extended", "prepared")


@dataclass(frozen=True, slots=True)
class FloorRatio:
    """One system's round trip against the floor's at the same -M and -c: the ratio of
    the medians, and the range of the ratios of runs made side by side (same repetition)."""

    us: float
    floor_us: float
    ratio: float
    lo: float
    hi: float

    def fmt(self) -> str:
        span = f" ({self.lo:.2f}–{self.hi:.2f})" if self.lo != self.hi else ""
        return f"{self.ratio:.2f}×{span}"


def floor_ratio(wire: dict[WireKey, list[WireRun]], system: str, name: str, mode: str,
                clients: int) -> FloorRatio | None:  # fmt: skip
    """``system``'s ``name`` against the floor's ``SELECT 1`` (Redis's PING against the
    floor's simple query: one message each way)."""
    runs = wire.get((system, name, mode, clients))
    floor = wire.get(("floor", "SELECT 1", "simple" if mode == "RESP" else mode, clients))
    if not runs or not floor:
        return None
    ours = agg([r.us_per_statement for r in runs]).median
    base = agg([r.us_per_statement for r in floor]).median
    if base <= 0:
        return None
    pairs = [a.us_per_statement / b.us_per_statement for a, b in zip(runs, floor, strict=False)
             if b.us_per_statement > 0] or [ours / base]  # fmt: skip
    return FloorRatio(ours, base, ours / base, min(pairs), max(pairs))


def _floor_lines(report: Report) -> list[str]:
    """SELECT 1 server CPU per round trip against the floor's: cubequeue at most
    ``FLOOR_TARGET``× at 1 and 64 clients in every mode; PostgreSQL and Redis beside it."""
    lines = []
    for clients in FLOOR_CLIENTS:
        ours = [(m, r) for m in MODES
                if (r := floor_ratio(report.wire, "cubequeue", "SELECT 1", m, clients))]  # fmt: skip
        if not ours:
            continue
        detail = ", ".join(f"{m} {r.us:.1f}/{r.floor_us:.1f} µs {r.fmt()}" for m, r in ours)
        peers = [f"postgres {m} {r.ratio:.2f}×" for m in MODES
                 if (r := floor_ratio(report.wire, "postgres", "SELECT 1", m, clients))]  # fmt: skip
        if ping := floor_ratio(report.wire, "redis", "PING", "RESP", clients):
            peers.append(f"redis PING {ping.us:.1f} µs {ping.ratio:.2f}×")
        beside = f" (beside it: {', '.join(peers)})" if peers else ""
        worst = max(r.ratio for _, r in ours)
        lines.append(
            f"SELECT 1 round trip at {clients} client{'s' if clients > 1 else ''}, server CPU "
            f"cubequeue ÷ the floor (bench/floor.py, same run): {detail}{beside}; target "
            f"≤ {FLOOR_TARGET}× → {_verdict(worst <= FLOOR_TARGET)}"
        )
    return lines


def _floor_table(report: Report) -> list[str]:
    out = [
        "| -c | -M | floor µs | cubequeue µs | cubequeue ÷ floor | target | PostgreSQL µs "
        "| PostgreSQL ÷ floor | Redis PING µs | Redis ÷ floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    clients = sorted({c for (s, n, _, c) in report.wire if s == "floor" and n == "SELECT 1"})
    for c in clients:
        ping = floor_ratio(report.wire, "redis", "PING", "RESP", c)
        for mode in MODES:
            floor = report.wire.get(("floor", "SELECT 1", mode, c))
            if not floor:
                continue
            cq = floor_ratio(report.wire, "cubequeue", "SELECT 1", mode, c)
            pg = floor_ratio(report.wire, "postgres", "SELECT 1", mode, c)
            target = f"≤ {FLOOR_TARGET}× → {_verdict(cq.ratio <= FLOOR_TARGET)}" if (
                cq and c in FLOOR_CLIENTS) else ""  # fmt: skip
            out.append(
                f"| {c} | {mode} | {agg([r.us_per_statement for r in floor]).fmt(1)} "
                f"| {_us(report, 'cubequeue', 'SELECT 1', mode, c)} | {cq.fmt() if cq else ''} "
                f"| {target} | {_us(report, 'postgres', 'SELECT 1', mode, c)} "
                f"| {pg.fmt() if pg else ''} | {_us(report, 'redis', 'PING', 'RESP', c)} "
                f"| {ping.fmt() if ping else ''} |"
            )
    return out


def _us(report: Report, system: str, name: str, mode: str, clients: int) -> str:
    runs = report.wire.get((system, name, mode, clients))
    return agg([r.us_per_statement for r in runs]).fmt(1) if runs else ""


def _round_trip_lines(report: Report) -> list[str]:
    """SELECT 1 server CPU per round trip: at most PostgreSQL's at 1 client, at most 1.5×
    at 64 (16 clients is shown, without a target); and against the floor (issue 28)."""
    lines = _floor_lines(report)
    for clients, target in ((1, 1.0), (16, None), (64, 1.5)):
        sel = []
        for mode in ("simple", "extended", "prepared"):
            ours = report.wire.get(("cubequeue", "SELECT 1", mode, clients))
            theirs = report.wire.get(("postgres", "SELECT 1", mode, clients))
            if ours and theirs:
                a = agg([r.us_per_statement for r in ours]).median
                b = agg([r.us_per_statement for r in theirs]).median
                if b > 0:
                    sel.append((mode, a, b))
        if not sel:
            continue
        detail = ", ".join(f"{m} {a:.1f}/{b:.1f} µs {a / b:.2f}×" for m, a, b in sel)
        worst = max(a / b for _, a, b in sel)
        tail = f"target ≤ {target}× → {_verdict(worst <= target)}" if target else "no target"
        lines.append(
            f"SELECT 1 round trip at {clients} client{'s' if clients > 1 else ''}, server CPU "
            f"cubequeue ÷ postgres (steady state): {detail}; {tail}"
        )
    return lines


def _queryqueue_lines(report: Report) -> list[str]:
    """Cube's QueryQueue over the WebSocket: server CPU per query at most 1.5× Redis's,
    the same 0.35 client against both; the 1.7 driver's figures are shown beside it."""
    lines = []
    for conc in sorted({c for _, c in report.queryqueue}):
        redis = report.queryqueue.get(("redis 0.35", conc))
        ours = report.queryqueue.get(("cubequeue 0.35", conc))
        if not redis or not ours:
            continue
        base = agg([r.server_us_per_query for r in redis]).median
        if base <= 0:
            continue
        ratio = agg([r.server_us_per_query for r in ours]).median / base
        others = []
        for label in ("cubequeue 1.7 normal", "cubequeue 1.7 fast"):
            runs = report.queryqueue.get((label, conc))
            if runs:
                others.append(f"{label.split()[-1]} "
                              f"{agg([r.server_us_per_query for r in runs]).median / base:.2f}×")  # fmt: skip
        extra = f" (1.7.43 driver: {', '.join(others)})" if others else ""
        lines.append(
            f"Cube QueryQueue over the WebSocket, concurrency {conc}: server CPU per query "
            f"cubequeue ÷ redis (0.35 line both) {ratio:.2f}×{extra}; target ≤ 1.5× → "
            f"{_verdict(ratio <= 1.5)}"
        )
    return lines


def _extra_number(report: Report, section: str, pattern: str) -> float | None:
    """A figure printed by one of the extra micro-benchmarks (grammar, start-up)."""
    for title, text in report.extras.items():
        if title.startswith(section):
            found = re.search(pattern, text)
            if found:
                return float(found.group(1))
    return None


def _extra_ratio_lines(report: Report) -> list[str]:
    lines = []
    add_us = _extra_number(report, "Grammar", r"QUEUE ADD, [^\n]*\(uncached\)\s+([\d.]+) µs")
    select = report.wire.get(("cubequeue", "SELECT 1", "simple", 1))
    if add_us is not None and select:
        round_trip_us = 1e6 / agg([r.tps for r in select]).median
        share = add_us / round_trip_us * 100
        lines.append(
            f"uncached QUEUE ADD parse {add_us:.1f} µs vs a SELECT 1 round trip "
            f"{round_trip_us:.0f} µs (pgbench simple -c 1): {share:.1f}%; target < 15% → "
            f"{_verdict(share < 15)}"
        )
    start_ms = _extra_number(report, "Start-up", r"median (\d+) ms")
    if start_ms is not None:
        lines.append(
            f"start-up to first SELECT 1: median {start_ms:.0f} ms; target < 1000 ms → "
            f"{_verdict(start_ms < 1000)}"
        )
    return lines


def _cycle_table(report: Report) -> list[str]:
    out = [
        "| C | conc. | mode | system | cycles/s | p50 ms | p99 ms | RT/cycle | "
        "server CPU µs/cycle | client CPU µs/cycle | waits retried |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(report.cycle, key=lambda k: (k[1], k[2], k[3] != "normal",
                                              report.systems.index(k[0])))  # fmt: skip
    for key in keys:
        runs = report.cycle[key]
        system, c, conc, mode = key
        out.append(
            f"| {c} | {conc} | {mode} | {system} "
            f"| {agg([r.cycles_per_s for r in runs]).fmt()} "
            f"| {agg([pct(r.latencies_ms, 50) for r in runs]).fmt(2)} "
            f"| {agg([pct(r.latencies_ms, 99) for r in runs]).fmt(2)} "
            f"| {agg([r.rt_per_cycle for r in runs]).fmt(2)} "
            f"| {agg([r.server_cpu_us for r in runs]).fmt()} "
            f"| {agg([r.client_cpu_us for r in runs]).fmt()} "
            f"| {sum(r.timeouts for r in runs)} |"
        )
    return out


def _wire_table(report: Report) -> list[str]:
    out = ["| system | statement | -M | -c | tps | server CPU µs/stmt | ÷ floor | hit rate |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    order = {"cubequeue": 0, "floor": 1, "postgres": 2, "redis": 3}
    for (system, name, mode, c), runs in sorted(report.wire.items(),
                                                key=lambda kv: order.get(kv[0][0], 4)):  # fmt: skip
        hits = [r.hits for r in runs if r.hits is not None]
        hit = f"{100 * agg(hits).median:.0f}%" if hits else ""
        ratio = floor_ratio(report.wire, system, name, mode, c) if system != "floor" else None
        out.append(
            f"| {system} | {name} | {mode} | {c} | {agg([r.tps for r in runs]).fmt()} "
            f"| {agg([r.us_per_statement for r in runs]).fmt(1)} "
            f"| {ratio.fmt() if ratio else ''} | {hit} |"
        )
    return out


def _wake_table(report: Report) -> list[str]:
    out = ["| system | load | p50 ms | p99 ms | max ms | samples |", "|---|---|---|---|---|---|"]
    for (system, busy), runs in sorted(report.wake.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        out.append(
            f"| {system} | {'64 busy clients' if busy else 'idle'} "
            f"| {agg([pct(w.samples_ms, 50) for w in runs]).fmt(3)} "
            f"| {agg([pct(w.samples_ms, 99) for w in runs]).fmt(3)} "
            f"| {agg([max(w.samples_ms) for w in runs]).fmt(3)} "
            f"| {sum(len(w.samples_ms) for w in runs)} |"
        )
    return out


def _fast_table(rows: list[FastTrackRow]) -> list[str]:
    out = [
        "| system | load | RT add→exec normal | RT add→exec fast | fast-tracked | "
        "add→claim p50 ms normal | fast | query p50 ms normal | fast | p50 saving |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r.system} | {r.load} | {r.rt_normal.fmt(2)} | {r.rt_fast.fmt(2)} "
            f"| {r.fast_share.fmt()}% | {r.claim_normal.fmt(2)} | {r.claim_fast.fmt(2)} "
            f"| {r.p50_normal.fmt(2)} | {r.p50_fast.fmt(2)} | {r.p50_saving:.0f}% |"
        )
    return out


def write_results(report: Report, path: Path) -> None:
    m = report.machine
    ft_rows = fast_track_rows(report.cycle, report.systems)
    cq_idle = next((r for r in ft_rows if r.system == "cubequeue" and r.load.startswith("idle")),
                   None)  # fmt: skip
    lines = [
        "# cubequeue benchmarks: against PostgreSQL 15 and Redis 7, side by side",
        "",
        f"Generated by `{'make bench-quick' if report.quick else 'make bench'}` "
        f"(`python -m bench.run{' --quick' if report.quick else ''}`) on {report.started}, "
        f"{report.duration_s / 60:.1f} min. Every figure is the median over "
        f"{report.reps} runs with the range (min–max) in parentheses, all three systems "
        "measured in the same run on the same machine.",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in m.items()],
        "",
        "Everything (servers, load generators, pgbench) shares these cores over loopback.",
        "",
        "## Ratios against the targets",
        "",
        *[f"- {line}" for line in ratio_lines(report)],
        "",
        "## How the systems are set up",
        "",
        "- **cubequeue**: `python -m cubequeue.server` with its defaults; the adapter sends "
        "exactly Cube's QueryQueue commands over the PostgreSQL wire (asyncpg, statements "
        "prepared once per connection): `QUEUE RESULT`, `QUEUE ADD PRIORITY` (or "
        "`QUEUE ADD_AND_RETRIEVE`), reconcile = `QUEUE LIST` + `QUEUE RETRIEVE EXTENDED "
        "CONCURRENCY` per claim, `QUEUE MERGE_EXTRA` ×2, `QUEUE HEARTBEAT`, `QUEUE ACK`, "
        "`QUEUE RESULT_BLOCKING 5000`.",
        "- **PostgreSQL** (bench/adapters/postgres.py): tables, PL/pgSQL functions `q_add`, "
        "`q_claim` (per-prefix advisory lock + `FOR NO KEY UPDATE SKIP LOCKED`: reconcile "
        "and claim in one round trip), `q_add_claim` (fast track), `q_ack` (delete, store "
        "result, `pg_notify` each waiter with the result as payload), `q_wait` (register "
        "the client's LISTEN channel under a `FOR KEY SHARE` lock, or return the stored "
        "result). Settings changed from the defaults (fsync, full_page_writes and WAL-logged "
        "tables stay on):",
        *[f"  - `{name} = {value}`: {why}" for name, value, why in PG_SETTINGS],
        "- **Redis** (bench/adapters/redis_queue.py): `--save '' --appendonly no`; Lua "
        "scripts via EVALSHA over a pending zset (score −priority·10¹³ + id), an active zset "
        "(heartbeats), an item hash and a dedup hash; claim = one script (ZCARD active + "
        "ZPOPMIN pending); ACK RPUSHes the result per waiter, the client BLPOPs it.",
        "- **The floor** (bench/floor.py, `python -m bench.floor`): a bare uvloop "
        "PostgreSQL-wire server answering `SELECT 1` with reply bytes built once per message "
        "type; it runs the round trips only (see \"Round trip against the floor\").",
        "- Load: each configuration's clients are spread over min(C, 2) processes (uvloop), "
        "each with a debounced reconciler and min(concurrency, 8) worker connections; "
        "every connection is opened, prepared and warmed up before the window. Server CPU "
        "is utime+stime+cutime+cstime summed over the server's live process tree from "
        "/proc (PostgreSQL's backends included), client CPU is the load processes' own.",
        "- Correctness: after every run each query must have been claimed (executed) "
        "exactly once and its client must have received exactly one result, its own. A run "
        "with a duplicate, a loss, a wrong result or a lost wake-up is rejected and re-run "
        f"(rejected runs: {len(report.rejected)}).",
        "",
        "## The QueryQueue cycle",
        "",
        "Per query: result lookup (miss), ADD with priority 0–10 and a 300 B payload, "
        "reconcile, MERGE_EXTRA ×2, HEARTBEAT, execute (0 ms), ACK with a 1 KB result, "
        "blocking wait (5 s). \"waits retried\" counts blocking waits that timed out "
        "(priority starvation under a tight budget) and were retried after a reconcile, "
        "as Cube's ContinueWaitError is.",
        "",
        *_cycle_table(report),
        "",
        "## Fast track",
        "",
        *_fast_table(ft_rows),
        "",
        "The seed's table with our numbers:",
        "",
        *seed_table(cq_idle),
        "",
        "## Cube's QueryQueue over the WebSocket (bench/cube_queue.py)",
        "",
        f"Cube's own `QueryQueue` from npm, unmodified: {QQ_PROCESSES} node processes share "
        "one queue (as several Cube API instances do), each with `concurrency` and as many "
        "loops calling `executeInQueue` (priority 10, a query handler that returns at once, "
        "Cube's logger silenced); a `ContinueWaitError` is asked again and counted. "
        "`redis 0.35` and `cubequeue 0.35` are the same client, "
        "@cubejs-backend/query-orchestrator 0.35.81, with `RedisQueueDriver` (node-redis "
        "pool, Cube's defaults) against Redis 7 and with the Cube Store queue driver over "
        "cubequeue's WebSocket. `cubequeue 1.7` is the 1.7.43 driver of tests/node with "
        "`CUBEJS_QUEUE_FAST_TRACK` off (`normal`) or on (`fast`: the server advertises "
        "1.7.25, so the driver's `queueAddAndRetrieve` capability holds and each add is a "
        "`QUEUE ADD_AND_RETRIEVE`). Every process has opened its connections and answered "
        "its warm-up queries before the window; server CPU is the server's whole process "
        "tree from /proc from \"go\" until the last process has all its queries answered, "
        "the node clients' CPU is their `process.cpuUsage()` over the same window. After "
        "each run every query must have been executed once and answered once with its own "
        "result, or the run is rejected.",
        "",
        *queryqueue_table(report.queryqueue),
        "",
        "## Round trip against the floor (bench/floor.py)",
        "",
        "The floor is a bare uvloop PostgreSQL-wire server that answers `SELECT 1` with "
        "reply bytes built once (bench/floor.py): the least a Python asyncio server can "
        "spend on a round trip. pgbench's `SELECT 1` runs against cubequeue, the floor and "
        "PostgreSQL in turn within each mode and client count (the order reversed every "
        "other repetition), measured as in the next section; Redis's round trip is "
        "`redis-benchmark -t ping_mbulk` (one PING per round trip, no pipelining) with the "
        "same steady window, per command Redis counted (`INFO stats`). A ratio is the "
        "ratio of the medians; the range in parentheses is the lowest and highest ratio of "
        "runs made side by side. Redis's PING is set against the floor's simple query (one "
        f"message each way). Target (issue 28): cubequeue ≤ {FLOOR_TARGET}× the floor at 1 "
        "and 64 clients.",
        "",
        *_floor_table(report),
        "",
        "## Wire floor (pgbench)",
        "",
        "Steady state: `pgbench -n -f <one statement> -M <mode> -c <c> -j min(c,2) -T <s> "
        "-l`, connections opened once per client (no `--connect`). The server's CPU is read "
        "from /proc 1 s after pgbench starts (every connection is open and warm) and again "
        "0.25 s before its `-T` ends (pgbench still running, so no disconnect is counted); "
        "tps and µs per statement use the transactions that pgbench's per-transaction log "
        "shows completed between the two reads; \"÷ floor\" divides by the floor's `SELECT 1` "
        "at the same -M and -c. `SELECT 1` runs `-T 5` (a 3.75 s window) "
        "in every repetition, the other statements `-T 3` once each. cubequeue paths are bare numbers (prefix \"\") because pgbench "
        "rewrites every `:name` inside quotes into a parameter in extended/prepared mode "
        "(bench/wire.py); in prepared mode the QUEUE statements take `$n` from `\\set` "
        "variables and run unchanged. Hit rate = share of RETRIEVEs that claimed a pending "
        "item / ACKs that found their item (random keys from a 60 000-item pool).",
        "",
        *_wire_table(report),
        "",
        "## Blocking wake latency",
        "",
        "ACK sent → waiting client has its row (one event loop, one monotonic clock).",
        "",
        *_wake_table(report),
        "",
    ]
    if report.profile:
        lines += [
            "## Profile of the cubequeue server",
            "",
            f"py-spy (`record --native`, 500 Hz) on the server during {report.profile_config}; "
            "share of the server's samples. \"self\" charges C code (uvloop's socket "
            "writes, libc) to the calling cubequeue function.",
            "",
            "| function | self % | inclusive % |",
            "|---|---|---|",
            *[f"| `{n}` | {s:.1f} | {i:.1f} |" for n, s, i in report.profile],
            "",
        ]
    for note in report.notes:
        lines += [note, ""]
    for name, text in report.extras.items():
        lines += [f"## {name}", "", "```", text.rstrip(), "```", ""]
    if report.rejected:
        lines += ["## Rejected runs", "", *[f"- {r}" for r in report.rejected[:30]], ""]
    path.write_text("\n".join(lines))
