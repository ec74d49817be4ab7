"""What the server reports as it happens: connections opened, closed and refused per
protocol or cap, silent connections shed by the PostgreSQL wire's accept loop, logins
refused before authentication, HTTP requests refused, and commands by name and outcome with their
latency, kept as plain numbers and exported at scrape time.

The ``command`` label is the parsed command's name or a PostgreSQL verb
(:func:`command_label`), fewer than ``MAX_COMMAND_LABELS`` values in all: a client
inventing first words gets ``command="unknown"``, not a label value (and a 24-series
histogram) per word.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from cubequeue.grammar.commands import Command

MAX_COMMAND_LABELS = 200
#: the ``command`` label of a statement whose first word is no command we know
UNKNOWN_COMMAND = "unknown"
PROTOCOLS = ("pg", "ws")
#: the options whose caps refuse connections (``cubequeue_connections_refused``)
CONNECTION_CAPS = ("max_connections", "max_connections_per_user",
                   "max_unauthenticated_connections")
#: why the PostgreSQL wire's accept loop closed a silent connection
#: (``cubequeue_connections_shed``, server/pgwire/acceptor.py): to let a client waiting
#: past --max-unauthenticated-connections in, or to free a descriptor when they run short
SHED_FOR_WAITING_CLIENT = "waiting_client"
SHED_FOR_DESCRIPTORS = "descriptors"
SHED_REASONS = (SHED_FOR_WAITING_CLIENT, SHED_FOR_DESCRIPTORS)
#: why a login was refused before authentication (``cubequeue_logins_refused``): a
#: plaintext startup packet under --tls-required (28000)
LOGIN_REFUSAL_REASONS = ("tls_required",)
#: queue commands take micro- to milliseconds; RESULT_BLOCKING may wait up to the cap
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)


def _dialect_tags() -> frozenset[str]:
    """Every dialect command's name (``QUEUE ADD``…), from the parsed command classes."""
    tags: set[str] = set()
    todo: list[type[Command]] = [Command]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.tag:
            tags.add(cls.tag)
    return frozenset(tags)


#: PostgreSQL's statement verbs (the first words of its SQL commands): plain SQL is
#: counted under its verb, answered or refused, since the set is fixed and small
SQL_VERBS = frozenset((
    "ABORT", "ALTER", "ANALYZE", "BEGIN", "CALL", "CHECKPOINT", "CLOSE", "CLUSTER",
    "COMMENT", "COMMIT", "COPY", "CREATE", "DEALLOCATE", "DECLARE", "DELETE", "DISCARD",
    "DO", "DROP", "END", "EXECUTE", "EXPLAIN", "FETCH", "GRANT", "IMPORT", "INSERT",
    "LISTEN", "LOAD", "LOCK", "MERGE", "MOVE", "NOTIFY", "PREPARE", "REASSIGN", "REFRESH",
    "REINDEX", "RELEASE", "RESET", "REVOKE", "ROLLBACK", "SAVEPOINT", "SECURITY", "SELECT",
    "SET", "SHOW", "START", "TABLE", "TRUNCATE", "UNLISTEN", "UPDATE", "VACUUM", "VALUES",
    "WITH"))
#: the executor's names for a statement that did not parse and for an empty one
_PSEUDO = frozenset(("(parse)", "(empty)"))
_KNOWN_COMMANDS = _dialect_tags() | SQL_VERBS | _PSEUDO
assert len(_KNOWN_COMMANDS) < MAX_COMMAND_LABELS, "the command label's values are bounded"


def command_label(name: str) -> str:
    """The ``command`` label of a statement the executor names ``name``: a dialect
    command's name, a PostgreSQL verb, ``(parse)`` or ``(empty)``; anything else (a
    first word nobody knows, ``XYZZY0``) is ``unknown``, so junk cannot mint label values."""
    return name if name in _KNOWN_COMMANDS else UNKNOWN_COMMAND


#: the histogram's upper bounds, +Inf last: a latency's bucket is the first bound >= it
_BOUNDS: tuple[float, ...] = (*LATENCY_BUCKETS, float("inf"))


class _Latency:
    """One command label's latency histogram: per-bucket (not cumulative) counts and
    the sum, as prometheus-client's ``Histogram`` keeps them."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * len(_BOUNDS)
        self.sum = 0.0


class _Tally:
    """One (command label, outcome)'s count, with its command's histogram."""

    __slots__ = ("count", "latency")

    def __init__(self, latency: _Latency) -> None:
        self.count = 0
        self.latency = latency


class _CommandCollector:
    """``cubequeue_commands_total`` and ``cubequeue_command_duration_seconds`` as plain
    numbers exported at scrape time. prometheus-client's ``Counter.inc`` and
    ``Histogram.observe`` take a lock per value (three per statement, a noticeable share
    of a ``SELECT 1`` round trip: bench/RESULTS-notes.md); these are updated by the
    event loop alone. The exposition
    is the same families, samples and order as those classes produce."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], _Tally] = {}
        self._latency: dict[str, _Latency] = {}

    def tally(self, command: str, outcome: str) -> _Tally:
        tally = self._counts.get((command, outcome))
        if tally is None:
            latency = self._latency.get(command)
            if latency is None:
                latency = self._latency[command] = _Latency()
            tally = self._counts[(command, outcome)] = _Tally(latency)
        return tally

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily("cubequeue_commands", _COMMANDS_HELP,
                                  labels=["command", "outcome"])
        yield HistogramMetricFamily("cubequeue_command_duration_seconds", _LATENCY_HELP,
                                    labels=["command"])

    def collect(self) -> Iterator[Metric]:
        counts = CounterMetricFamily("cubequeue_commands", _COMMANDS_HELP,
                                     labels=["command", "outcome"])
        for (command, outcome), tally in list(self._counts.items()):
            counts.add_metric([command, outcome], float(tally.count))
        yield counts
        latency = HistogramMetricFamily("cubequeue_command_duration_seconds", _LATENCY_HELP,
                                        labels=["command"])
        for command, hist in list(self._latency.items()):
            running, buckets = 0, []
            for bound, n in zip(_LE, hist.buckets, strict=True):
                running += n
                buckets.append((bound, float(running)))
            latency.add_metric([command], buckets, hist.sum)
        yield latency


_COMMANDS_HELP = "Commands run, by command and outcome (ok or the SQLSTATE)"
_LATENCY_HELP = "Command latency, RESULT_BLOCKING waits included"
#: the ``le`` label of each bound, spelled as prometheus-client spells these bounds
#: (``floatToGoString``: repr of the float, ``+Inf``)
_LE = tuple("+Inf" if b == float("inf") else repr(float(b)) for b in _BOUNDS)


class EventCounts:
    """The event families on a registry and the calls that count them (a base of
    :class:`~cubequeue.server.metrics.registry.Metrics`, so the per-statement
    :meth:`observe_command` is one bound method, no delegation)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._connections = Gauge("cubequeue_connections_open",
                                  "Open client connections by protocol (pg or ws)",
                                  ["protocol"], registry=registry)
        self._connections_total = Counter("cubequeue_connections",
                                          "Client connections accepted by protocol",
                                          ["protocol"], registry=registry)
        self._http_refusals = Counter(
            "cubequeue_http_refusals",
            "HTTP requests refused because a browser sent them: origin (a /ws upgrade "
            "whose Origin is not in --ws-allowed-origins), host (a console or /metrics "
            "request whose Host is not in --allowed-hosts)",
            ["reason"], registry=registry)
        for reason in ("origin", "host"):
            self._http_refusals.labels(reason)
        self._refused = Counter("cubequeue_connections_refused",
                                "Connections refused with 53300, by the cap that refused "
                                "them (the option's name)", ["cap"], registry=registry)
        for cap in CONNECTION_CAPS:
            self._refused.labels(cap)
        self._shed = Counter("cubequeue_connections_shed",
                             "Silent PostgreSQL connections (nothing sent yet) closed by the "
                             "accept loop: waiting_client (to let a client waiting past "
                             "--max-unauthenticated-connections in), descriptors (they ran "
                             "short)", ["reason"], registry=registry)
        for reason in SHED_REASONS:
            self._shed.labels(reason)
        self._logins_refused = Counter("cubequeue_logins_refused",
                                       "Logins refused before authentication, by reason: "
                                       "tls_required (a plaintext startup packet under "
                                       "--tls-required, 28000)", ["reason"],
                                       registry=registry)
        for reason in LOGIN_REFUSAL_REASONS:
            self._logins_refused.labels(reason)
        self._commands = _CommandCollector()
        registry.register(self._commands)
        for protocol in PROTOCOLS:  # export zeros before the first connection
            self._connections.labels(protocol)
            self._connections_total.labels(protocol)
        self._tallies: dict[tuple[str, str], _Tally] = {}

    def connection_opened(self, protocol: str) -> None:
        self._connections.labels(protocol).inc()
        self._connections_total.labels(protocol).inc()

    def connection_closed(self, protocol: str) -> None:
        self._connections.labels(protocol).dec()

    def connection_refused(self, cap: str) -> None:
        """Count one connection refused by a connection cap (server/context.py)."""
        self._refused.labels(cap).inc()

    def connection_shed(self, reason: str) -> None:
        """Count one silent connection the accept loop closed (a :data:`SHED_REASONS`
        value; server/pgwire/acceptor.py)."""
        self._shed.labels(reason).inc()

    def login_refused(self, reason: str) -> None:
        """Count one login refused before authentication (a
        :data:`LOGIN_REFUSAL_REASONS` value; server/pgwire/connection.py)."""
        self._logins_refused.labels(reason).inc()

    def http_refused(self, reason: str) -> None:
        """Count one request refused by the Origin or Host rule (server/browsers.py)."""
        self._http_refusals.labels(reason).inc()

    def observe_command(self, name: str, outcome: str, seconds: float) -> None:
        """Count one command and its latency. Runs for every statement, so it is a few
        attribute updates and one bisect (:class:`_CommandCollector`); called from the
        event loop only (the executor's thread)."""
        tally = self._tallies.get((name, outcome))
        if tally is None:
            tally = self._tally(name, outcome)
        tally.count += 1
        latency = tally.latency
        latency.sum += seconds
        latency.buckets[bisect_left(_BOUNDS, seconds)] += 1

    def _tally(self, name: str, outcome: str) -> _Tally:
        tally = self._commands.tally(command_label(name), outcome)
        if len(self._tallies) < MAX_COMMAND_LABELS * 8:
            self._tallies[(name, outcome)] = tally
        return tally
