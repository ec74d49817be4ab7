"""The wire floor: pgbench driving one statement per transaction.

``pgbench -n -f script -M simple|extended|prepared -c 1|16|64 -T seconds -l`` against
cubequeue (``SELECT 1``, ``QUEUE ADD``, ``QUEUE RETRIEVE``, ``QUEUE ACK``,
``CACHE GET``) and against PostgreSQL (``SELECT 1``, and the single statements its queue
would run instead: an INSERT for ADD, an UPDATE for the claim, a primary-key SELECT for
CACHE GET). Reported: tps and the server's CPU µs per statement (whole process tree,
``cpu.py``), so pgbench's own CPU on the same machine does not count. Both are steady
state (``run_pgbench``): measured between a read of /proc one second into the run and one
shortly before its end, against the transactions pgbench logged as completed in between.

Placeholders. pgbench turns every ``:name`` of a script into ``$n`` in extended and
prepared mode, even inside quotes, and substitutes the value as text in simple mode; a
``:`` directly followed by a letter or digit always starts a variable. Hence:

* paths are bare numbers (prefix ``""``), written ``':k'`` in simple mode (the value is
  pasted inside the quotes) and ``:k`` otherwise (bound as a text parameter, which the
  key slot reads as a path, dialect doc §8 rule 5);
* ACK takes the queue id: ``:k`` in simple mode (a number literal), ``:k::int8`` in the
  others (the cast makes the bound text an id);
* JSON payloads keep a space after every ``:`` so pgbench leaves them alone.

Each transaction picks a random key (``\\set k random(lo, hi)``) from a pool filled
before the runs, so later RETRIEVEs and ACKs may find their item already claimed or
gone; the hit rate is reported next to the numbers. Nothing ACKs the RETRIEVEd items,
so each RETRIEVE run starts after ``QUEUE PURGE ACTIVE ''`` (every RETRIEVE answers with
the prefix's whole active-key list, which grows during the run).

For A/B pairs on a shared machine, ``python -m bench.wire inproc [simple extended
prepared]`` feeds one pgbench transaction's bytes at a time to the real listener
protocol in-process (session, executor, metrics, logging; answers to a sink) and reports
CPU µs per transaction (where time goes; it proves nothing on its own), and ``python -m
bench.wire pgbench MODE -c N`` runs the steady-state pgbench ``SELECT 1`` against a fresh
server. ``python -m bench.ab BASE`` is the A/B over real sockets: base and new trees
alternated on fresh servers, round trips and Cube cycles, against the floor server
(bench/floor.py), with ranges.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from bench.cpu import tree_cpu_s
from bench.peers import Peer

__all__ = ["CLIENTS", "MODES", "SELECT1_CLIENTS", "WireRun", "Workload", "cubequeue_workloads", "postgres_workloads",
           "run_pgbench"]  # fmt: skip

PGBENCH = "/usr/bin/pgbench"
MODES = ("simple", "extended", "prepared")
CLIENTS = (1, 16)
#: the round-trip targets are at 1 and 64 clients
SELECT1_CLIENTS = (1, 16, 64)
POOL = 60_000
CACHE_KEYS = 10_000
PAYLOAD = json.dumps({"queryKey": ["SELECT sum(amount) FROM orders GROUP BY 1", []],
                      "external": None, "requestId": "wire-floor", "pad": "p" * 180})  # fmt: skip
RESULT = json.dumps({"rows": [{"n": 1}], "pad": "r" * 900})


@dataclass(frozen=True, slots=True)
class Workload:
    """One statement; ``simple`` and ``bound`` are the two spellings (see module doc)."""

    system: str
    name: str
    simple: str
    bound: str
    lo: int = 0
    hi: int = 0
    #: statements whose pool is consumed report a hit rate
    hits_sql: str = ""

    def script(self, mode: str) -> str:
        body = self.simple if mode == "simple" else self.bound
        head = f"\\set k random({self.lo}, {self.hi})\n" if self.hi else ""
        return head + body + "\n"


@dataclass(slots=True)
class WireRun:
    system: str
    name: str
    mode: str
    clients: int
    seconds: float
    transactions: int
    tps: float
    server_cpu_s: float
    #: the whole run's, warm-up and tail included (the hit rate's denominator)
    total_transactions: int = 0
    hits: float | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and self.transactions > 0

    @property
    def us_per_statement(self) -> float:
        return self.server_cpu_s / self.transactions * 1e6 if self.transactions else 0.0


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


async def _cubequeue_fill(dsn: str) -> tuple[int, int]:
    """Pending items ``r1..rN`` (RETRIEVE), items to ACK, cache keys; returns the ACK id range."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    try:
        await conn.executemany("QUEUE ADD PRIORITY 1 $1 $2",
                               [(str(i), PAYLOAD) for i in range(1, POOL + 1)])  # fmt: skip
        first = await conn.fetchrow("QUEUE ADD PRIORITY 1 'ack:0' $1", PAYLOAD)
        await conn.executemany("QUEUE ADD PRIORITY 1 $1 $2",
                               [(f"ack:{i}", PAYLOAD) for i in range(1, POOL)])  # fmt: skip
        await conn.executemany("CACHE SET $1 $2",
                               [(str(i), RESULT) for i in range(1, CACHE_KEYS + 1)])  # fmt: skip
        lo = int(first[0])
        return lo, lo + POOL - 1
    finally:
        await conn.close()


def cubequeue_workloads(dsn: str) -> list[Workload]:
    ack_lo, ack_hi = asyncio.run(_cubequeue_fill(dsn))
    p = _q(PAYLOAD)
    r = _q(RESULT)
    add_lo, add_hi = 10**9, 2 * 10**9
    return [
        Workload("cubequeue", "SELECT 1", "SELECT 1", "SELECT 1"),
        Workload("cubequeue", "QUEUE ADD", f"QUEUE ADD PRIORITY 1 ':k' {p}",
                 f"QUEUE ADD PRIORITY 1 :k {p}", add_lo, add_hi),
        Workload("cubequeue", "QUEUE RETRIEVE",
                 "QUEUE RETRIEVE EXTENDED CONCURRENCY 1000000000 ':k'",
                 "QUEUE RETRIEVE EXTENDED CONCURRENCY 1000000000 :k", 1, POOL,
                 hits_sql="active"),
        Workload("cubequeue", "QUEUE ACK", f"QUEUE ACK :k {r}", f"QUEUE ACK :k::int8 {r}",
                 ack_lo, ack_hi, hits_sql="acked"),
        Workload("cubequeue", "CACHE GET", "CACHE GET ':k'", "CACHE GET :k", 1, CACHE_KEYS),
    ]  # fmt: skip


PG_WIRE_SCHEMA = f"""
DROP TABLE IF EXISTS wire_item, wire_cache;
CREATE TABLE wire_item (
    path text PRIMARY KEY, priority int NOT NULL, active boolean NOT NULL DEFAULT false,
    heartbeat timestamptz, payload text NOT NULL
) WITH (fillfactor = 70);
INSERT INTO wire_item (path, priority, payload)
SELECT g::text, 1, {_q(PAYLOAD)} FROM generate_series(1, {POOL}) g;
CREATE TABLE wire_cache (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO wire_cache SELECT g::text, {_q(RESULT)} FROM generate_series(1, {CACHE_KEYS}) g;
"""


async def _pg_fill(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(PG_WIRE_SCHEMA)
        await conn.execute("VACUUM ANALYZE wire_item, wire_cache")
    finally:
        await conn.close()


def postgres_workloads(dsn: str) -> list[Workload]:
    asyncio.run(_pg_fill(dsn))
    p = _q(PAYLOAD)
    return [
        Workload("postgres", "SELECT 1", "SELECT 1", "SELECT 1"),
        Workload("postgres", "INSERT (≈ QUEUE ADD)",
                 f"INSERT INTO wire_item (path, priority, payload) VALUES (':k', 1, {p}) "
                 "ON CONFLICT (path) DO NOTHING",
                 f"INSERT INTO wire_item (path, priority, payload) VALUES (:k, 1, {p}) "
                 "ON CONFLICT (path) DO NOTHING", 10**9, 2 * 10**9),
        Workload("postgres", "UPDATE (≈ QUEUE RETRIEVE)",
                 "UPDATE wire_item SET active = true, heartbeat = now() WHERE path = ':k'",
                 "UPDATE wire_item SET active = true, heartbeat = now() WHERE path = :k",
                 1, POOL),
        Workload("postgres", "SELECT by key (≈ CACHE GET)",
                 "SELECT value FROM wire_cache WHERE key = ':k'",
                 "SELECT value FROM wire_cache WHERE key = :k", 1, CACHE_KEYS),
    ]  # fmt: skip


async def _cubequeue_counts(dsn: str, purge_active: bool = False) -> tuple[int, int]:
    """(active items in prefix "", items left under prefix "ack")."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    try:
        if purge_active:
            await conn.execute("QUEUE PURGE ACTIVE ''")
        rows = await conn.fetch("SELECT prefix, pending, active FROM system.queue_prefixes")
        by = {r[0]: (int(r[1]), int(r[2])) for r in rows}
        return by.get("", (0, 0))[1], sum(by.get("ack", (0, 0)))
    finally:
        await conn.close()


_TX_RE = re.compile(r"number of transactions actually processed: (\d+)")

#: seconds of every run before the measured window opens (connections, caches, JIT)
WARMUP_S = 1.0
#: the window closes this long before pgbench's -T ends, so no disconnect is counted
TAIL_S = 0.25


def _window_transactions(log_dir: Path, start: float, end: float) -> int:
    """Transactions that completed in [start, end) (wall clock), from pgbench's ``-l`` logs.

    Each line is ``client_id transaction_no time script_no time_epoch time_us …``; the last
    two are the transaction's completion time (pgbench docs, "Per-Transaction Logging").
    """
    n = 0
    for log in log_dir.glob("pgbench_log*"):
        for line in log.read_text().splitlines():
            f = line.split()
            if len(f) >= 6 and start <= int(f[4]) + int(f[5]) / 1e6 < end:
                n += 1
    return n


def _sleep_until(t: float) -> None:
    left = t - time.time()
    if left > 0:
        time.sleep(left)


def run_pgbench(peer: Peer, w: Workload, mode: str, clients: int, seconds: int) -> WireRun:
    """Steady state: the server's CPU is read at ``WARMUP_S`` after the start (every
    connection is open and has run statements) and ``TAIL_S`` before the end (pgbench is
    still running), and divided by the transactions that completed between the two reads,
    counted from pgbench's per-transaction log. Connection set-up and tear-down fall
    outside the window."""
    if seconds < WARMUP_S + TAIL_S + 1:
        raise ValueError(f"pgbench runs need at least {WARMUP_S + TAIL_S + 1:.2f} s")
    user, db = ("bench", "postgres") if peer.name == "postgres" else ("cube", "cube")
    with tempfile.TemporaryDirectory(prefix="cqbench-pgbench-") as tmp:
        script = Path(tmp) / "script.sql"
        script.write_text(w.script(mode))
        cmd = [PGBENCH, "-n", "-f", str(script), "-M", mode, "-c", str(clients),
               "-j", str(min(clients, 2)), "-T", str(seconds), "-l",
               f"--log-prefix={tmp}/pgbench_log", "-h", "127.0.0.1",
               "-p", str(peer.port), "-U", user, db]  # fmt: skip
        # RETRIEVE answers with every active key of the prefix (dialect §3.3), and nothing
        # ACKs here: start each run with no active items so runs stay comparable
        purge = w.hits_sql == "active"
        before = asyncio.run(_cubequeue_counts(peer.dsn, purge)) if w.hits_sql else None
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _sleep_until(started + WARMUP_S)
        t0, cpu0 = time.time(), tree_cpu_s(peer.pid)
        _sleep_until(started + seconds - TAIL_S)
        t1, cpu1 = time.time(), tree_cpu_s(peer.pid)
        try:
            stdout, stderr = proc.communicate(timeout=seconds + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        out = stdout + stderr
        total = int(m.group(1)) if (m := _TX_RE.search(out)) else 0
        tx = _window_transactions(Path(tmp), t0, t1)
    run = WireRun(peer.name, w.name, mode, clients, t1 - t0, tx, tx / (t1 - t0), cpu1 - cpu0,
                  total_transactions=total)  # fmt: skip
    if proc.returncode != 0 or "aborted" in out or "error" in out.lower():
        lines = [ln for ln in out.splitlines() if "error" in ln.lower() or "abort" in ln]
        run.errors.append("; ".join(lines[:3]) or f"pgbench exit {proc.returncode}")
    if before is not None and total:
        after = asyncio.run(_cubequeue_counts(peer.dsn))
        done = after[0] - before[0] if w.hits_sql == "active" else before[1] - after[1]
        run.hits = done / total
    return run


# --- in-process: bytes in → bytes out, the cheapest stable A/B on a shared machine ---------

#: what one pgbench transaction sends for ``SELECT 1`` in each ``-M`` mode
INPROC_SQL = "SELECT 1"


class _SinkTransport:
    """Enough of an asyncio transport for :class:`PgProtocol`: writes are counted, kept last."""

    def __init__(self, port: int = 40000) -> None:
        self.port = port
        self.writes = 0
        self.last = b""

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = data

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None

    def close(self) -> None:
        return None


def inproc_messages(mode: str, sql: str = INPROC_SQL) -> tuple[bytes, bytes]:
    """(set-up bytes, one transaction's bytes) as pgbench sends them in ``mode``."""
    from cubequeue.server.pgwire import messages as m
    from cubequeue.server.pgwire.client import encode_frontend

    def enc(*msgs: m.FrontendMessage) -> bytes:
        return b"".join(encode_frontend(x) for x in msgs)

    if mode == "simple":
        return b"", enc(m.Query(sql))
    if mode == "extended":
        return b"", enc(m.Parse("", sql, ()), m.Bind("", "", (), (), ()), m.Describe("P", ""),
                        m.Execute("", 0), m.Sync())
    if mode == "prepared":
        return (enc(m.Parse("P0_1", sql, ()), m.Sync()),
                enc(m.Bind("", "P0_1", (), (), ()), m.Describe("P", ""), m.Execute("", 0),
                    m.Sync()))
    raise ValueError(f"unknown mode {mode!r}")


def inproc_us(mode: str, n: int = 20_000, sql: str = INPROC_SQL, *,
              profile: str | None = None) -> float:
    """Server CPU µs per transaction, in-process: the real listener protocol, session,
    executor, metrics and logging, fed one transaction's bytes per ``data_received``
    (as pgbench's round trip delivers them), answers to a sink transport. ``profile``
    names a file for a cProfile dump of the timed loop."""
    from cubequeue.server.app import build_context
    from cubequeue.server.options import load_config
    from cubequeue.server.pgwire import messages as m
    from cubequeue.server.pgwire.client import BackendDecoder, encode_frontend
    from cubequeue.server.pgwire.connection import PgProtocol

    async def run() -> float:
        ctx = build_context(load_config(["--auth", "trust"], {}))
        proto = PgProtocol(ctx, None)
        sink = _SinkTransport()
        proto.connection_made(sink)  # type: ignore[arg-type]  # a stand-in transport
        proto.data_received(encode_frontend(m.StartupMessage(
            196608, (("user", "cube"), ("database", "cube")))))
        setup, tx = inproc_messages(mode, sql)
        if setup:
            proto.data_received(setup)
        for _ in range(500):  # caches warm
            proto.data_received(tx)
        answer = BackendDecoder().feed(sink.last)
        if any(isinstance(x, m.ErrorResponse) for x in answer):
            raise RuntimeError(f"the server answered an error: {answer!r}")
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0 = time.process_time()
        for _ in range(n):
            proto.data_received(tx)
        spent = time.process_time() - t0
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        proto.connection_lost(None)
        return spent / n * 1e6

    return asyncio.run(run())


# --- in-process: one QueryQueue cycle, as bench/cycle.py's asyncpg clients send it -------

#: ``inproc`` modes that drive the QueryQueue cycle (normal track, fast track)
CYCLE_MODES = ("cycle", "cycle-fast")
#: the in-process cycle's queue prefix
CYCLE_PREFIX = "inproc"
_SYNC = b"S\x00\x00\x00\x04"
_EXECUTE = b"E\x00\x00\x00\x09\x00\x00\x00\x00\x00"


def _param(oid: int, value: int | str) -> bytes:
    """One parameter in asyncpg's binary format for the type the server described."""
    if oid == 20:
        return struct.pack("!q", int(value))
    if oid == 23:
        return struct.pack("!i", int(value))
    if oid == 21:
        return struct.pack("!h", int(value))
    return str(value).encode()


class _CycleConn:
    """One asyncpg-like connection in-process: a real :class:`PgProtocol` on the shared
    server context, its statements prepared by name (Parse, Describe, Sync as asyncpg's
    ``prepare``), each step one Bind/Execute/Sync with binary parameters and results."""

    def __init__(self, ctx: object, port: int) -> None:
        from cubequeue.server.pgwire import messages as m
        from cubequeue.server.pgwire.client import encode_frontend
        from cubequeue.server.pgwire.connection import PgProtocol

        self.proto = PgProtocol(ctx, None)  # type: ignore[arg-type]  # a ServerContext
        self.sink = _SinkTransport(port)
        self.proto.connection_made(self.sink)  # type: ignore[arg-type]  # a stand-in transport
        self.proto.data_received(encode_frontend(m.StartupMessage(
            196608, (("user", "cube"), ("database", "cube")))))
        self.oids: dict[str, tuple[int, ...]] = {}

    def prepare(self, sql: dict[str, str]) -> None:
        from cubequeue.server.pgwire import messages as m
        from cubequeue.server.pgwire.client import BackendDecoder, encode_frontend

        for name, text in sql.items():
            self.proto.data_received(encode_frontend(m.Parse(f"bench_{name}", text, ()))
                                     + encode_frontend(m.Describe("S", f"bench_{name}"))
                                     + _SYNC)
            answer = BackendDecoder().feed(self.sink.last)
            desc = [x for x in answer if isinstance(x, m.ParameterDescription)]
            if not desc:
                raise RuntimeError(f"preparing {text!r}: {answer!r}")
            self.oids[name] = desc[0].type_oids

    def bind(self, name: str, *values: int | str) -> bytes:
        """Bind (binary parameters, binary results) + Execute + Sync, as asyncpg sends."""
        stmt = f"bench_{name}".encode()
        oids = self.oids[name]
        parts = [b"\x00", stmt, b"\x00", struct.pack("!hh", 1, 1), struct.pack("!h", len(values))]
        for oid, value in zip(oids, values, strict=True):
            data = _param(oid, value)
            parts += [struct.pack("!i", len(data)), data]
        parts.append(struct.pack("!hh", 1, 1))
        body = b"".join(parts)
        return b"B" + struct.pack("!i", len(body) + 4) + body + _EXECUTE + _SYNC

    def bind_id(self, name: str, *values: int | str) -> tuple[bytes, bytes]:
        """The Bind of a statement whose last parameter is a queue id, split around the
        id's 8 bytes, so a cycle's messages cost one concatenation each."""
        whole = self.bind(name, *values, 0)
        cut = whole.index(_EXECUTE) - 4 - 8  # ... id(8), result formats(4), Execute
        return whole[:cut], whole[cut + 8 :]


def _first_int8(reply: bytes) -> int:
    """The first column (binary int8) of the first DataRow after BindComplete."""
    if reply[5:6] != b"D":
        raise RuntimeError(f"expected a row, got {reply[:200]!r}")
    return int(struct.unpack_from("!q", reply, 5 + 1 + 4 + 2 + 4)[0])


#: one cycle's messages that do not depend on the id: lookup, ADD, RETRIEVE; the ACK by id
_Cycle = tuple[bytes, bytes, bytes, Callable[[int], bytes]]


def inproc_cycle_us(fast: bool = False, n: int = 2_000, *, profile: str | None = None,
                    check: bool = True) -> float:  # fmt: skip
    """Server CPU µs per QueryQueue cycle, in-process: bench/cycle.py's C=1 cycle (a
    client, the reconciler and a worker, each its own connection) fed as bytes to three
    real :class:`PgProtocol` on one server context, the store's waiter and wake-up
    included: lookup (a miss), ADD (or ADD_AND_RETRIEVE), RESULT_BLOCKING (registers),
    LIST + RETRIEVE EXTENDED (normal track), MERGE_EXTRA ×2, HEARTBEAT, ACK (wakes the
    waiter: the loop runs until the client's answer is written), LIST (the reconcile
    after the ACK): 10 round trips (8 on the fast track), as bench/cycle.py counts them.
    The driver's own work (a concatenation per message, reading the id) is inside the
    figure."""
    from bench.adapters.cubequeue import SQL
    from bench.cycle import payload_for, result_for
    from cubequeue.server.app import build_context
    from cubequeue.server.options import load_config

    async def run() -> float:
        ctx = build_context(load_config(["--auth", "trust"], {}))
        client, recon, worker = (_CycleConn(ctx, 40000 + i) for i in range(3))
        for conn in (client, recon, worker):
            conn.prepare(SQL)
        extra1 = json.dumps({"startQueryTime": 1764590000000})
        extra2 = json.dumps({"cancelHandler": "queryCancel"})
        def by_id(conn: _CycleConn, name: str, *lead: int | str,
                  trail: tuple[int | str, ...] = ()) -> Callable[[int], bytes]:  # fmt: skip
            if trail:  # the id comes first: MERGE_EXTRA id json, ACK id json
                a = conn.bind(name, 0, *trail)
                b = conn.bind(name, 1, *trail)
                cut = next(i for i in range(len(a)) if a[i] != b[i]) - 7
                head, tail = a[:cut], a[cut + 8 :]
            else:  # the id is last: HEARTBEAT id, RESULT_BLOCKING timeout id
                head, tail = conn.bind_id(name, *lead)
            if conn.bind(name, *lead, 12345, *trail) != head + struct.pack("!q", 12345) + tail:
                raise RuntimeError(f"{name}: the id is not where it was looked for")
            return lambda qid: head + struct.pack("!q", qid) + tail

        merge_a = by_id(worker, "merge_extra", trail=(extra1,))
        merge_b = by_id(worker, "merge_extra", trail=(extra2,))
        heartbeat = by_id(worker, "heartbeat")
        wait = by_id(client, "wait", 5000)

        def plan(tag: str, count: int) -> list[_Cycle]:
            out: list[_Cycle] = []
            for i in range(count):
                path = f"{CYCLE_PREFIX}{tag}:k{i}"
                prio = i % 11
                add = (client.bind("add_and_claim", prio, path, payload_for(path, prio), 2)
                       if fast else client.bind("add", prio, path, payload_for(path, prio)))
                out.append((client.bind("lookup", path), add,
                            recon.bind("retrieve", 2, path),
                            by_id(worker, "ack", trail=(result_for(path),))))
            return out

        list_msg = recon.bind("list", f"{CYCLE_PREFIX}{'f' if fast else 'n'}")
        list_warm = recon.bind("list", f"{CYCLE_PREFIX}w")

        async def cycle(msgs: _Cycle, listing: bytes) -> None:
            lookup, add, retrieve, ack = msgs
            client.proto.data_received(lookup)
            client.proto.data_received(add)
            qid = _first_int8(client.sink.last)
            writes = client.sink.writes
            client.proto.data_received(wait(qid))
            await asyncio.sleep(0)  # the waiter's task registers with the store
            if not fast:
                recon.proto.data_received(listing)
                recon.proto.data_received(retrieve)
            worker.proto.data_received(merge_a(qid))
            worker.proto.data_received(merge_b(qid))
            worker.proto.data_received(heartbeat(qid))
            worker.proto.data_received(ack(qid))
            while client.sink.writes < writes + 2:  # BindComplete, then the woken answer
                await asyncio.sleep(0)
            recon.proto.data_received(listing)

        warm = plan("w", 300)
        for msgs in warm:
            await cycle(msgs, list_warm)
        _check_cycle_answers(client, recon, worker)
        timed = plan("f" if fast else "n", n)
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0 = time.process_time()
        for msgs in timed:
            await cycle(msgs, list_msg)
        spent = time.process_time() - t0
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        if check:
            _check_cycle_answers(client, recon, worker)
            if b"inproc" not in client.sink.last:
                raise RuntimeError(f"the last wait did not answer its result: {client.sink.last[:200]!r}")
        for conn in (client, recon, worker):
            conn.proto.connection_lost(None)
        return spent / n * 1e6

    return asyncio.run(run())


def _check_cycle_answers(*conns: _CycleConn) -> None:
    from cubequeue.server.pgwire import messages as m
    from cubequeue.server.pgwire.client import BackendDecoder

    for conn in conns:
        answer = BackendDecoder().feed(conn.sink.last)
        if any(isinstance(x, m.ErrorResponse) for x in answer):
            raise RuntimeError(f"the server answered an error: {answer!r}")


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.wire inproc [mode…]``: in-process µs per ``SELECT 1`` transaction
    (median of ``--reps``); ``python -m bench.wire pgbench [mode…]``: steady-state pgbench
    ``SELECT 1`` against a fresh cubequeue (server CPU µs per statement)."""
    import argparse
    import statistics

    ap = argparse.ArgumentParser(prog="python -m bench.wire")
    ap.add_argument("what", choices=("inproc", "pgbench"))
    ap.add_argument("modes", nargs="*", default=list(MODES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-n", type=int, default=20_000,
                    help="transactions per in-process rep (cycles: a tenth of it)")
    ap.add_argument("-c", "--clients", type=int, default=1)
    ap.add_argument("-T", "--seconds", type=int, default=5)
    ap.add_argument("--sql", default=INPROC_SQL)
    ap.add_argument("--profile", help="cProfile dump file (inproc, last rep)")
    ap.add_argument("--postgres", action="store_true",
                    help="pgbench against a fresh PostgreSQL 15 instead (the same script)")
    ap.add_argument("--floor", action="store_true",
                    help="pgbench against the floor server instead (bench/floor.py)")
    args = ap.parse_intermixed_args(argv)
    w = Workload("cubequeue", args.sql, args.sql, args.sql)
    for mode in args.modes:
        if args.what == "inproc" and mode in CYCLE_MODES:
            figures = [inproc_cycle_us(mode == "cycle-fast", max(1, args.n // 10),
                                       profile=args.profile if i == args.reps - 1 else None)
                       for i in range(args.reps)]
            unit = "µs/cycle in-process"
        elif args.what == "inproc":
            figures = [inproc_us(mode, args.n, args.sql,
                                 profile=args.profile if i == args.reps - 1 else None)
                       for i in range(args.reps)]
            unit = "µs/tx in-process"
        else:
            from bench.peers import start_cubequeue, start_floor, start_postgres

            start = start_postgres if args.postgres else start_floor if args.floor else start_cubequeue
            peer = start()
            try:
                figures = [run_pgbench(peer, w, mode, args.clients, args.seconds).us_per_statement
                           for _ in range(args.reps)]
            finally:
                peer.stop()
            unit = f"{peer.name} server µs/stmt pgbench -c {args.clients}"
        print(f"{mode:9} {statistics.median(figures):7.2f} {unit} "
              f"(min {min(figures):.2f}, max {max(figures):.2f})", flush=True)


if __name__ == "__main__":
    main()
