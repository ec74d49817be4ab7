"""The option table as data, and the one function that settles a Config.

Every option is a CLI flag and a ``CUBEQUEUE_*`` variable; a few also accept Cube Store's
``CUBESTORE_*`` name in Cube Store's unit (the option table). Precedence is fixed:
the flag, then ``CUBEQUEUE_*``, then ``CUBESTORE_*``, then the default (the default is the
:class:`~cubequeue.server.config.Config` field default, so the two cannot drift apart).

A bad value raises :class:`ConfigError` whose message is one line naming the option, where
the value came from and the value ("A bad value stops startup with one line that
names the option and the value"). An empty environment variable counts as unset, because
``docker run -e X=`` and compose files produce them by accident.

This module is imported by the console script before the server starts, so it imports only
the standard library (fast start).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cubequeue.server.browsers import normalize_hosts, normalize_origins
from cubequeue.server.config import Config
from cubequeue.server.option_values import (
    AUTH_METHODS,
    CONSOLE_AUTH_METHODS,
    FSYNC_POLICIES,
    LOG_FORMATS,
    LOG_LEVELS,
    METRICS_AUTH_METHODS,
    RECOVERY_POLICIES,
    RESULTS_EXPIRE_MAX_S,
    WS_AUTH_METHODS,
    BadValue,
    ConfigError,
    Parser,
    any_text,
    choice,
    directory,
    integer,
    listed,
    mib_to_bytes,
    networks,
    non_empty,
    parse_bool,
    parse_store,
    postgres_url,
    read_password_file,
    read_users_file,
    readable_file,
    version_text,
)

__all__ = [
    "OPTIONS",
    "ConfigError",
    "Option",
    "add_arguments",
    "build_parser",
    "config_from",
    "load_config",
    "option_value",
    "parse_bool",
    "parse_store",
    "read_password_file",
    "read_users_file",
]

# --- the table ------------------------------------------------------------------------

#: --help's sections, in the order it prints them: every option names one
LISTENING = "listening"
ACCESS = "authentication, TLS and who may connect"
LIMITS = "limits"
QUEUE_AND_CACHE = "queue and cache"
DURABLE = "durable mode (--data-dir)"
POSTGRESQL_STORE = "PostgreSQL store (--store)"
OBSERVING = "logs, console and metrics"
TOPICS = (LISTENING, ACCESS, LIMITS, QUEUE_AND_CACHE, DURABLE, POSTGRESQL_STORE, OBSERVING)


@dataclass(frozen=True, slots=True)
class Option:
    """One row of the option table."""

    field: str
    help: str
    parse: Parser
    #: Cube Store's variable for the same setting, and its parser into our unit
    cubestore_env: str | None = None
    cubestore_parse: Parser | None = None
    cubestore_unit: str = ""
    metavar: str | None = None
    #: shown in --help as the unit of the default
    unit: str = ""
    is_bool: bool = False
    #: --help's words for a default that depends on other options (the field is None)
    default_help: str = ""
    #: the --help section it is listed in (one of :data:`TOPICS`)
    topic: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def env(self) -> str:
        return "CUBEQUEUE_" + self.field.upper()

    @property
    def default(self) -> object:
        return _DEFAULTS[self.field]


_DEFAULTS: dict[str, object] = {
    f.name: f.default for f in dataclasses.fields(Config)
}

_PORT = integer(1, 65535)
_POSITIVE = integer(1)
_NON_NEGATIVE = integer(0)

OPTIONS: tuple[Option, ...] = (
    Option("host", "listen address for both ports (the image sets 0.0.0.0)", non_empty,
           metavar="ADDR", topic=LISTENING),
    Option("port", "PostgreSQL wire port", _PORT, metavar="PORT", topic=LISTENING),
    Option("http_port", "Cube Store WebSocket /ws, /healthz, /readyz and /metrics port", _PORT,
           cubestore_env="CUBESTORE_HTTP_PORT", cubestore_parse=_PORT, metavar="PORT",
           topic=LISTENING),
    Option("log_level", "one of " + ", ".join(LOG_LEVELS), choice(LOG_LEVELS),
           metavar="LEVEL", topic=OBSERVING),
    Option("log_format", "plain or json (one JSON object per line)", choice(LOG_FORMATS),
           metavar="FORMAT", topic=OBSERVING),
    Option("slow_command_ms", "log commands slower than this", _NON_NEGATIVE, metavar="MS",
           unit="ms", topic=OBSERVING),
    Option("auth", "PostgreSQL wire authentication: " + ", ".join(AUTH_METHODS),
           choice(AUTH_METHODS), metavar="METHOD", topic=ACCESS),
    Option("password", "the password of every user, when no users file is given", any_text,
           metavar="PASSWORD", topic=ACCESS),
    Option("users_file", "file of user:password lines; a line starting with # is a "
           "comment (a # inside a password is part of it)", readable_file,
           metavar="PATH", topic=ACCESS),
    Option("ws_auth", "WebSocket authentication: none or basic (Cube's driver sends no "
           "credentials, so keep none for Cube)", choice(WS_AUTH_METHODS), metavar="METHOD",
           topic=ACCESS),
    Option("tls_cert", "TLS certificate (PEM) for the PostgreSQL wire; needs --tls-key",
           readable_file, metavar="PATH", topic=ACCESS),
    Option("tls_key", "TLS private key (PEM) for the PostgreSQL wire; needs --tls-cert",
           readable_file, metavar="PATH", topic=ACCESS),
    Option("max_connections", "connections on both wires together; beyond it, 53300",
           _POSITIVE, metavar="N", topic=LIMITS),
    Option("max_connections_per_user", "connections per user name; beyond it, 53300",
           _POSITIVE, metavar="N", topic=LIMITS),
    Option("max_message_size", "largest PostgreSQL or WebSocket message", _POSITIVE,
           cubestore_env="CUBESTORE_TRANSPORT_MAX_MESSAGE_SIZE", cubestore_parse=_POSITIVE,
           cubestore_unit="bytes", metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_blocking_timeout", "RESULT_BLOCKING timeouts are capped here", _POSITIVE,
           metavar="MS", unit="ms", topic=LIMITS),
    Option("ws_dedup_ttl", "how long a completed WebSocket (connection_id, message_id) "
           "result is kept for a resend", _NON_NEGATIVE, metavar="S", unit="s",
           topic=QUEUE_AND_CACHE),
    Option("cubestore_version", "the X-CubeStore-Version advertised to Cube's driver",
           version_text, metavar="VERSION", topic=QUEUE_AND_CACHE),
    Option("results_expire", "results are deleted this long after their ACK (1 to "
           f"{RESULTS_EXPIRE_MAX_S})", integer(1, RESULTS_EXPIRE_MAX_S),
           cubestore_env="CUBESTORE_QUEUE_RESULTS_EXPIRE",
           cubestore_parse=integer(1, RESULTS_EXPIRE_MAX_S), cubestore_unit="s",
           metavar="S", unit="s", topic=QUEUE_AND_CACHE),
    Option("cache_max_entry_bytes", "CACHE SET larger than this: 54000", _POSITIVE,
           cubestore_env="CUBESTORE_CACHE_MAX_ENTRY_SIZE", cubestore_parse=_POSITIVE,
           cubestore_unit="bytes", metavar="BYTES", unit="bytes", topic=QUEUE_AND_CACHE),
    Option("cache_max_keys", "LRU eviction beyond this many cache keys", _POSITIVE,
           cubestore_env="CUBESTORE_CACHE_MAX_KEYS", cubestore_parse=_POSITIVE,
           cubestore_unit="keys", metavar="N", topic=QUEUE_AND_CACHE),
    Option("cache_max_bytes", "LRU eviction beyond this many cache bytes", _POSITIVE,
           cubestore_env="CUBESTORE_CACHE_MAX_SIZE", cubestore_parse=mib_to_bytes,
           cubestore_unit="MiB", metavar="BYTES", unit="bytes", topic=QUEUE_AND_CACHE),
    Option("max_items", "queued items in total; beyond it, ADD is refused with 54000",
           _POSITIVE, metavar="N", topic=LIMITS),
    Option("max_payload_bytes", "ADD payloads and ACK results larger than this: 54000",
           _POSITIVE, metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_sql_statement_bytes", "plain SQL statements (SELECT ..., not QUEUE/CACHE) "
           "larger than this: 54000", integer(1024), metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_sql_rows", "rows a plain SELECT may read from one system table (plain SQL is "
           "evaluated in one step on the event loop); beyond it: 54000", _POSITIVE, metavar="N",
           topic=LIMITS),
    Option("queue_log_size", "rows kept in system.queue_log", _NON_NEGATIVE, metavar="N",
           topic=QUEUE_AND_CACHE),
    Option("test_clock", "allow SYS CLOCK ... (tests only)", parse_bool, is_bool=True,
           topic=QUEUE_AND_CACHE),
    Option("shutdown_grace", "after SIGTERM, open connections end with 57P01 within this time",
           _NON_NEGATIVE, metavar="S", unit="s", topic=LISTENING),
    Option("console_auth", "the web console at / and its JSON under /api/v1 on the HTTP "
           "port: none (open), basic (the PostgreSQL wire's users) or off (removed)",
           choice(CONSOLE_AUTH_METHODS), metavar="METHOD",
           default_help="basic when --auth is not trust, else none", topic=ACCESS),
    Option("password_file", "read the password of every user from this file (one line; "
           "keeps it out of the process list); not with --password", readable_file,
           metavar="PATH", topic=ACCESS),
    Option("metrics_auth", "GET /metrics: none (open), basic (the PostgreSQL wire's "
           "users) or loopback (only scrapers on a loopback address)",
           choice(METRICS_AUTH_METHODS), metavar="METHOD",
           default_help="basic when --auth is not trust, else none", topic=ACCESS),
    Option("max_metrics_label_bytes", "longest label value on /metrics (a prefix name, "
           "say); longer ones are cut and end in '...'", integer(16), metavar="BYTES",
           unit="bytes", topic=OBSERVING),
    Option("ws_allow", "peer networks allowed on /ws, comma-separated (10.0.0.0/8,::1, "
           "as pg_hba's address column); others get 403; /healthz and /readyz stay open",
           networks, metavar="CIDRS", default_help="any", topic=ACCESS),
    Option("max_unauthenticated_connections", "connections not yet authenticated (they "
           "count against no other cap); beyond it new ones wait in the listen backlog, and "
           "the oldest that sent nothing is closed for them", _POSITIVE, metavar="N", topic=LIMITS),
    Option("startup_timeout", "a PostgreSQL connection that sends nothing for this long "
           "is closed (authentication itself has 60 s), and so is an HTTP connection whose "
           "request and answer take longer", _POSITIVE, metavar="S", unit="s",
           topic=LISTENING),
    Option("message_timeout", "a PostgreSQL message whose first bytes arrived must be "
           "complete within this time, or the connection gets 08P01 and is closed",
           _POSITIVE, metavar="S", unit="s", topic=LISTENING),
    Option("tls_required", "refuse PostgreSQL connections without TLS with 28000 (as "
           "hostssl); needs --tls-cert", parse_bool, is_bool=True, topic=ACCESS),
    Option("http_tls", "serve the HTTP port over TLS (https, wss) with --tls-cert",
           parse_bool, is_bool=True, topic=ACCESS),
    Option("unix_socket_dir", "also listen on DIR/.s.PGSQL.PORT (psql -h DIR)", directory,
           metavar="DIR", topic=LISTENING),
    Option("store", "where the queue and cache live: memory, or postgresql://user@host:port/db "
           "for stateless front ends over one PostgreSQL database", parse_store,
           metavar="STORE", topic=POSTGRESQL_STORE),
    Option("store_session_dsn", "PostgreSQL store: a direct connection (not through a "
           "transaction pooler) for LISTEN and the housekeeping lock", postgres_url,
           metavar="URL", default_help="the --store URL", topic=POSTGRESQL_STORE),
    Option("data_dir", "durable mode: keep a log and snapshots in DIR (created if missing) "
           "and recover them at startup; unset keeps everything in memory", non_empty,
           cubestore_env="CUBESTORE_DATA_DIR", cubestore_parse=non_empty, metavar="DIR",
           default_help="none (in memory)", topic=DURABLE),
    Option("fsync", "durable mode: reply after fdatasync (always), after write(2) with an "
           "fdatasync every second (everysec) or after write(2) only (no)",
           choice(FSYNC_POLICIES), metavar="POLICY", topic=DURABLE),
    Option("recovery", "durable mode: a corrupt frame before the log's tail is skipped and "
           "quarantined (salvage), stops startup (strict) or ends the replay there "
           "(point-in-time)", choice(RECOVERY_POLICIES), metavar="POLICY", topic=DURABLE),
    Option("max_disk_bytes", "durable mode: above this many bytes in the data directory, "
           "commands that grow state get 53100", integer(1 << 20), metavar="BYTES",
           unit="bytes", default_help="none", topic=DURABLE),
    Option("segment_bytes", "durable mode: the size preallocated log segments grow to "
           "(the first is 1 MiB, or this if smaller; each after a full one is twice as large)",
           integer(1 << 16), metavar="BYTES", unit="bytes", topic=DURABLE),
    Option("snapshot_min_log_bytes", "durable mode: snapshot once the log since the last "
           "snapshot is this large (and at least that snapshot's size)", integer(1 << 16),
           metavar="BYTES", unit="bytes", topic=DURABLE),
    Option("snapshot_interval", "durable mode: snapshot at least this often when anything "
           "changed", _POSITIVE, metavar="S", unit="s", topic=DURABLE),
    Option("max_ws_resend_bytes", "answers kept for a WebSocket resend, per connection_id; "
           "a resend of an answer dropped for it gets an HttpError naming it", _POSITIVE,
           metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_ws_resend_total_bytes", "answers kept for WebSocket resends, all "
           "connections together", _POSITIVE, metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_ws_blocking_waits", "QUEUE RESULT_BLOCKING waits one WebSocket may hold; "
           "beyond it, an HttpError naming it", _POSITIVE, metavar="N", topic=LIMITS),
    Option("max_blocking_message_bytes", "largest WebSocket message that may wait as "
           "QUEUE RESULT_BLOCKING (a waiter holds its message)", integer(1024),
           metavar="BYTES", unit="bytes", topic=LIMITS),
    Option("max_prepared_statements", "named prepared statements, and named portals, per "
           "PostgreSQL connection; beyond it, 53400", _POSITIVE, metavar="N", topic=LIMITS),
    Option("statement_timeout", "default statement_timeout of every session (0: none): a "
           "step that waits longer is canceled with 57014; RESULT_BLOCKING has its own cap",
           _NON_NEGATIVE, metavar="MS", unit="ms", topic=LIMITS),
    Option("ws_allowed_origins", "origins a browser page may open /ws from, comma-separated "
           "(https://app.example.com), or * for any; an upgrade carrying another Origin gets "
           "403 (one without Origin, as Cube's driver sends, is served)",
           listed(normalize_origins), metavar="ORIGINS", default_help="none", topic=ACCESS),
    Option("allowed_hosts", "host names the console and /metrics answer besides localhost, "
           "IP addresses, --host and names no public DNS serves (one label, .local, "
           ".internal, .home.arpa), comma-separated (.example.com: it and its subdomains), "
           "or * for any; another Host header gets 403 (DNS rebinding)",
           listed(normalize_hosts), metavar="HOSTS",
           default_help="localhost, IP addresses, --host and names no public DNS serves",
           topic=ACCESS),
)

_BY_FIELD = {opt.field: opt for opt in OPTIONS}
assert all(opt.topic in TOPICS for opt in OPTIONS), "every option is listed under a topic"
assert set(_BY_FIELD) == set(_DEFAULTS), "the option table and Config fields disagree"


# --- argparse glue --------------------------------------------------------------------


def _help_text(opt: Option) -> str:
    parts = [opt.help]
    env = f"env {opt.env}"
    if opt.cubestore_env:
        unit = f" in {opt.cubestore_unit}" if opt.cubestore_unit else ""
        env += f", or {opt.cubestore_env}{unit}"
    parts.append(env)
    default = opt.default
    if opt.default_help:
        parts.append("default: " + opt.default_help)
    elif default is None:
        parts.append("default: none")
    elif opt.is_bool:
        parts.append("default: " + ("on" if default else "off"))
    else:
        parts.append("default: " + in_units(default, opt.unit))
    return "; ".join(parts).replace("%", "%%")


_BINARY_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_DURATIONS = ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s"))


def in_units(value: object, unit: str) -> str:
    """A default as a person reads it: ``67108864`` bytes is ``64 MiB``, ``60000`` ms is
    ``1 min``; a value a larger unit does not divide exactly keeps the smaller one."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return f"{value} {unit}".rstrip()
    if unit == "bytes":
        for size, name in _BINARY_UNITS:
            if value % size == 0:
                return f"{value // size} {name}"
        return f"{value} bytes"
    if unit in ("ms", "s"):
        ms = value if unit == "ms" else value * 1000
        for size, name in _DURATIONS:
            if ms % size == 0:
                return f"{ms // size} {name}"
        return f"{value} {unit}"
    return f"{value} {unit}".rstrip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option of the table to ``parser``, one argument group per topic (what
    --help prints as its sections); unset flags stay absent (SUPPRESS)."""
    groups = {topic: parser.add_argument_group(topic) for topic in TOPICS}
    for opt in OPTIONS:
        group = groups[opt.topic]
        if opt.is_bool:
            group.add_argument(opt.flag, dest=opt.field, action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=_help_text(opt))
        else:
            group.add_argument(opt.flag, dest=opt.field, metavar=opt.metavar,
                               default=argparse.SUPPRESS, help=_help_text(opt))


def _settle(opt: Option, flags: Mapping[str, object], environ: Mapping[str, str]) -> object:
    if opt.field in flags:
        raw = flags[opt.field]
        if isinstance(raw, bool):  # --test-clock / --no-test-clock
            return raw
        return _parse(opt, opt.parse, str(raw), opt.flag)
    value = environ.get(opt.env, "")
    if value != "":
        return _parse(opt, opt.parse, value, f"{opt.flag} ({opt.env})")
    if opt.cubestore_env and opt.cubestore_parse:
        value = environ.get(opt.cubestore_env, "")
        if value != "":
            unit = f" in {opt.cubestore_unit}" if opt.cubestore_unit else ""
            return _parse(opt, opt.cubestore_parse, value,
                          f"{opt.flag} ({opt.cubestore_env}{unit})")
    return opt.default


def option_value(field: str, flags: Mapping[str, object], environ: Mapping[str, str]) -> object:
    """One option settled alone (the healthcheck needs only host, port and credentials)."""
    return _settle(_BY_FIELD[field], flags, environ)


def _parse(opt: Option, parse: Parser, raw: str, source: str) -> object:
    try:
        return parse(raw)
    except BadValue as err:
        shown = "***" if opt.field == "password" else repr(raw)
        raise ConfigError(f"invalid value for {source}: {shown} {err}") from None


def _check_together(cfg: Config) -> None:
    """Rules that span two options (auth needs a password source; TLS pairs)."""
    if cfg.auth != "trust" and cfg.password is None and cfg.users_file is None:
        raise ConfigError(f"invalid value for --auth: {cfg.auth!r} needs --password or "
                          "--users-file")
    if cfg.ws_auth == "basic" and cfg.password is None and cfg.users_file is None:
        raise ConfigError("invalid value for --ws-auth: 'basic' needs --password or "
                          "--users-file")
    if cfg.console_auth == "basic" and cfg.password is None and cfg.users_file is None:
        raise ConfigError("invalid value for --console-auth: 'basic' needs --password or "
                          "--users-file")
    if (cfg.tls_cert is None) != (cfg.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if cfg.tls_key is None else (
            "--tls-key", "--tls-cert")
        raise ConfigError(f"invalid value for {given}: it needs {missing} as well")
    if cfg.users_file is not None:
        read_users_file(cfg.users_file)
    if cfg.store == "memory" and cfg.store_session_dsn is not None:
        raise ConfigError("invalid value for --store-session-dsn: it needs --store "
                          "postgresql://…")
    if cfg.store != "memory" and cfg.data_dir is not None:
        raise ConfigError("invalid value for --data-dir: --store postgresql://… keeps the "
                          "data in PostgreSQL; give one of the two")
    for flag, on in (("--tls-required", cfg.tls_required), ("--http-tls", cfg.http_tls)):
        if on and cfg.tls_cert is None:
            raise ConfigError(f"invalid value for {flag}: it needs --tls-cert and --tls-key")


def _check_ws_auth_chosen(cfg: Config, flags: Mapping[str, object],
                          environ: Mapping[str, str]) -> None:
    """With a password on the PostgreSQL wire, an open /ws must be chosen, not defaulted:
    Cube's driver sends no credentials, so the server cannot silently demand them."""
    if cfg.auth == "trust" or "ws_auth" in flags or environ.get("CUBEQUEUE_WS_AUTH", ""):
        return
    raise ConfigError(f"--auth {cfg.auth} protects only the PostgreSQL wire: give --ws-auth "
                      "basic (clients send the password) or --ws-auth none (open /ws, limit "
                      "it with --ws-allow) explicitly")


def parse_flags(argv: Sequence[str], *, prog: str = "cubequeue") -> dict[str, object]:
    """The flags actually given on the command line (argparse exits 2 on unknown flags)."""
    parser = build_parser(prog=prog)
    return vars(parser.parse_args(list(argv)))


def build_parser(*, prog: str = "cubequeue") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A queue and cache server speaking Cube Store's QUEUE/CACHE dialect "
        "over the PostgreSQL wire and Cube Store's WebSocket protocol.",
        epilog="Precedence: the flag, then CUBEQUEUE_*, then CUBESTORE_* (in Cube Store's "
        "unit), then the default. Empty variables count as unset. "
        "Subcommand: 'cubequeue healthcheck --help'.",
    )
    add_arguments(parser)
    return parser


def config_from(flags: Mapping[str, object], environ: Mapping[str, str]) -> Config:
    """Settle every option from already-parsed flags, the environment and the defaults."""
    values = {opt.field: _settle(opt, flags, environ) for opt in OPTIONS}
    _resolve_password_file(values)
    cfg = Config(**values)  # type: ignore[arg-type]  # each parser returns its field's type
    _check_together(cfg)
    _check_ws_auth_chosen(cfg, flags, environ)
    if cfg.metrics_auth == "basic" and cfg.password is None and cfg.users_file is None:
        raise ConfigError("invalid value for --metrics-auth: 'basic' needs --password or "
                          "--users-file")
    return cfg


def _resolve_password_file(values: dict[str, object]) -> None:
    """``--password-file`` becomes the password itself, so every reader of the password
    (the wire's authentication, the console, the healthcheck) needs no change."""
    path = values.get("password_file")
    if path is None:
        return
    if values.get("password") is not None:
        raise ConfigError("invalid value for --password-file: give --password or "
                          "--password-file, not both")
    values["password"] = read_password_file(str(path))


def load_config(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """The Config for ``argv`` (no program name) and ``environ`` (the documented precedence)."""
    return config_from(parse_flags(argv), environ)
