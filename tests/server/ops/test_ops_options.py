"""The option table (the option table): every row, the precedence, Cube Store's units, bad values."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from cubequeue.server.config import Config
from cubequeue.server.options import (
    OPTIONS,
    ConfigError,
    Option,
    build_parser,
    in_units,
    load_config,
    read_users_file,
)

MIB = 1024 * 1024

#: the option table, copied by hand: (flag, env, Cube Store env, default). A change to
#: either side must be made on purpose in both.
CONFIG_MD = [
    ("--host", "CUBEQUEUE_HOST", None, "127.0.0.1"),
    ("--port", "CUBEQUEUE_PORT", None, 5432),
    ("--http-port", "CUBEQUEUE_HTTP_PORT", "CUBESTORE_HTTP_PORT", 3030),
    ("--log-level", "CUBEQUEUE_LOG_LEVEL", None, "info"),
    ("--log-format", "CUBEQUEUE_LOG_FORMAT", None, "plain"),
    ("--slow-command-ms", "CUBEQUEUE_SLOW_COMMAND_MS", None, 1000),
    ("--auth", "CUBEQUEUE_AUTH", None, "trust"),
    ("--password", "CUBEQUEUE_PASSWORD", None, None),
    ("--users-file", "CUBEQUEUE_USERS_FILE", None, None),
    ("--ws-auth", "CUBEQUEUE_WS_AUTH", None, "none"),
    ("--tls-cert", "CUBEQUEUE_TLS_CERT", None, None),
    ("--tls-key", "CUBEQUEUE_TLS_KEY", None, None),
    ("--max-connections", "CUBEQUEUE_MAX_CONNECTIONS", None, 1000),
    ("--max-connections-per-user", "CUBEQUEUE_MAX_CONNECTIONS_PER_USER", None, 500),
    ("--max-message-size", "CUBEQUEUE_MAX_MESSAGE_SIZE", "CUBESTORE_TRANSPORT_MAX_MESSAGE_SIZE",
     67108864),
    ("--max-blocking-timeout", "CUBEQUEUE_MAX_BLOCKING_TIMEOUT", None, 600000),
    ("--ws-dedup-ttl", "CUBEQUEUE_WS_DEDUP_TTL", None, 120),
    ("--cubestore-version", "CUBEQUEUE_CUBESTORE_VERSION", None, "1.7.25"),
    ("--results-expire", "CUBEQUEUE_RESULTS_EXPIRE", "CUBESTORE_QUEUE_RESULTS_EXPIRE", 60),
    ("--cache-max-entry-bytes", "CUBEQUEUE_CACHE_MAX_ENTRY_BYTES", "CUBESTORE_CACHE_MAX_ENTRY_SIZE",
     66060288),
    ("--cache-max-keys", "CUBEQUEUE_CACHE_MAX_KEYS", "CUBESTORE_CACHE_MAX_KEYS", 100000),
    ("--cache-max-bytes", "CUBEQUEUE_CACHE_MAX_BYTES", "CUBESTORE_CACHE_MAX_SIZE", 4294967296),
    ("--max-items", "CUBEQUEUE_MAX_ITEMS", None, 1000000),
    ("--max-payload-bytes", "CUBEQUEUE_MAX_PAYLOAD_BYTES", None, 66060288),
    ("--max-sql-statement-bytes", "CUBEQUEUE_MAX_SQL_STATEMENT_BYTES", None, 1048576),
    ("--max-sql-rows", "CUBEQUEUE_MAX_SQL_ROWS", None, 100000),
    ("--queue-log-size", "CUBEQUEUE_QUEUE_LOG_SIZE", None, 10000),
    ("--test-clock", "CUBEQUEUE_TEST_CLOCK", None, False),
    ("--shutdown-grace", "CUBEQUEUE_SHUTDOWN_GRACE", None, 5),
    ("--console-auth", "CUBEQUEUE_CONSOLE_AUTH", None, None),
    ("--password-file", "CUBEQUEUE_PASSWORD_FILE", None, None),
    ("--metrics-auth", "CUBEQUEUE_METRICS_AUTH", None, None),
    ("--max-metrics-label-bytes", "CUBEQUEUE_MAX_METRICS_LABEL_BYTES", None, 200),
    ("--ws-allow", "CUBEQUEUE_WS_ALLOW", None, None),
    ("--max-unauthenticated-connections", "CUBEQUEUE_MAX_UNAUTHENTICATED_CONNECTIONS", None, 100),
    ("--startup-timeout", "CUBEQUEUE_STARTUP_TIMEOUT", None, 10),
    ("--message-timeout", "CUBEQUEUE_MESSAGE_TIMEOUT", None, 60),
    ("--tls-required", "CUBEQUEUE_TLS_REQUIRED", None, False),
    ("--http-tls", "CUBEQUEUE_HTTP_TLS", None, False),
    ("--unix-socket-dir", "CUBEQUEUE_UNIX_SOCKET_DIR", None, None),
    ("--store", "CUBEQUEUE_STORE", None, "memory"),
    ("--store-session-dsn", "CUBEQUEUE_STORE_SESSION_DSN", None, None),
    ("--data-dir", "CUBEQUEUE_DATA_DIR", "CUBESTORE_DATA_DIR", None),
    ("--fsync", "CUBEQUEUE_FSYNC", None, "everysec"),
    ("--recovery", "CUBEQUEUE_RECOVERY", None, "salvage"),
    ("--max-disk-bytes", "CUBEQUEUE_MAX_DISK_BYTES", None, None),
    ("--segment-bytes", "CUBEQUEUE_SEGMENT_BYTES", None, 67108864),
    ("--snapshot-min-log-bytes", "CUBEQUEUE_SNAPSHOT_MIN_LOG_BYTES", None, 67108864),
    ("--snapshot-interval", "CUBEQUEUE_SNAPSHOT_INTERVAL", None, 600),
    ("--max-ws-resend-bytes", "CUBEQUEUE_MAX_WS_RESEND_BYTES", None, 67108864),
    ("--max-ws-resend-total-bytes", "CUBEQUEUE_MAX_WS_RESEND_TOTAL_BYTES", None, 268435456),
    ("--max-ws-blocking-waits", "CUBEQUEUE_MAX_WS_BLOCKING_WAITS", None, 1000),
    ("--max-blocking-message-bytes", "CUBEQUEUE_MAX_BLOCKING_MESSAGE_BYTES", None, 65536),
    ("--max-prepared-statements", "CUBEQUEUE_MAX_PREPARED_STATEMENTS", None, 10000),
    ("--statement-timeout", "CUBEQUEUE_STATEMENT_TIMEOUT", None, 60000),
    ("--ws-allowed-origins", "CUBEQUEUE_WS_ALLOWED_ORIGINS", None, None),
    ("--allowed-hosts", "CUBEQUEUE_ALLOWED_HOSTS", None, None),
]


def test_table_matches_config_md() -> None:
    got = [(o.flag, o.env, o.cubestore_env, o.default) for o in OPTIONS]
    assert got == CONFIG_MD


def test_defaults_are_config_defaults() -> None:
    assert load_config([], {}) == Config()


# --- precedence, option by option ------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in [("users1", "alice:one\n"), ("users2", "bob:two\n"),
                       ("cert1", "c1"), ("cert2", "c2"), ("key1", "k1"), ("key2", "k2")]:
        path = tmp_path / name
        path.write_text(text)
        paths[name] = str(path)
    return paths


def _samples(field: str, files: dict[str, str]) -> tuple[str, str, list[str]]:
    """Two valid non-default values for ``field`` and the flags it needs to be valid."""
    table: dict[str, tuple[str, str, list[str]]] = {
        "host": ("10.1.1.1", "10.2.2.2", []),
        "port": ("1111", "2222", []),
        "http_port": ("1111", "2222", []),
        "log_level": ("debug", "warning", []),
        "log_format": ("json", "json", []),
        "slow_command_ms": ("7", "8", []),
        "auth": ("md5", "scram-sha-256", ["--password", "pw", "--ws-auth", "none"]),
        "password": ("pw1", "pw2", []),
        "users_file": (files["users1"], files["users2"], []),
        "ws_auth": ("basic", "basic", ["--password", "pw"]),
        "tls_cert": (files["cert1"], files["cert2"], ["--tls-key", files["key1"]]),
        "tls_key": (files["key1"], files["key2"], ["--tls-cert", files["cert1"]]),
        "max_connections": ("11", "12", []),
        "max_connections_per_user": ("21", "22", []),
        "max_message_size": ("31", "32", []),
        "max_blocking_timeout": ("41", "42", []),
        "ws_dedup_ttl": ("51", "52", []),
        "cubestore_version": ("1.3.0", "1.4.0", []),
        "results_expire": ("61", "62", []),
        "cache_max_entry_bytes": ("71", "72", []),
        "cache_max_keys": ("81", "82", []),
        "cache_max_bytes": ("91", "92", []),
        "max_items": ("101", "102", []),
        "max_payload_bytes": ("111", "112", []),
        "queue_log_size": ("121", "122", []),
        "shutdown_grace": ("131", "132", []),
        "console_auth": ("off", "none", []),
        "password_file": (files["users1"], files["users2"], []),
        "metrics_auth": ("loopback", "none", []),
        "max_metrics_label_bytes": ("141", "142", []),
        "ws_allow": ("10.0.0.0/8", "::1/128", []),
        "max_unauthenticated_connections": ("151", "152", []),
        "startup_timeout": ("161", "162", []),
        "message_timeout": ("163", "164", []),
        "unix_socket_dir": (str(Path(files["users1"]).parent), "/", []),
        "max_sql_statement_bytes": ("2048", "4096", []),
        "max_sql_rows": ("171", "172", []),
        "store": ("postgresql://a@127.0.0.1:1/a", "postgres://b@127.0.0.1:2/b", []),
        "store_session_dsn": ("postgresql://c@127.0.0.1:3/c", "postgresql://d@127.0.0.1:4/d",
                              ["--store", "postgresql://a@127.0.0.1:1/a"]),
        "data_dir": ("/tmp/a", "/tmp/b", []),
        "fsync": ("always", "no", []),
        "recovery": ("strict", "point-in-time", []),
        "max_disk_bytes": ("2097152", "3145728", []),
        "segment_bytes": ("65536", "131072", []),
        "snapshot_min_log_bytes": ("65536", "131072", []),
        "snapshot_interval": ("7", "8", []),
        "max_ws_resend_bytes": ("181", "182", []),
        "max_ws_resend_total_bytes": ("191", "192", []),
        "max_ws_blocking_waits": ("201", "202", []),
        "max_blocking_message_bytes": ("2048", "4096", []),
        "max_prepared_statements": ("221", "222", []),
        "statement_timeout": ("231", "232", []),
        "ws_allowed_origins": ("https://a.example", "http://localhost:8080", []),
        "allowed_hosts": ("cubequeue.example.com", ".corp.example", []),
    }
    return table[field]


VALUED = [o for o in OPTIONS if not o.is_bool]


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Config)}


def _typed(field: str, text: str) -> object:
    return int(text) if _FIELD_TYPES[field] in ("int", int, "int | None") else text


@pytest.mark.parametrize("opt", VALUED, ids=[o.field for o in VALUED])
def test_precedence_flag_over_env_over_default(opt: Option, files: dict[str, str]) -> None:
    a, b, companions = _samples(opt.field, files)
    paired = opt.field in ("tls_cert", "tls_key")  # alone, one half of the pair is invalid
    if not paired:
        assert getattr(load_config(companions, {}), opt.field) == opt.default
    # env alone
    got = getattr(load_config(companions, {opt.env: b}), opt.field)
    assert got == _typed(opt.field, b)
    # flag beats env
    got = getattr(load_config([opt.flag, a, *companions], {opt.env: b}), opt.field)
    assert got == _typed(opt.field, a)
    # an empty variable is unset
    if not paired:
        assert getattr(load_config(companions, {opt.env: ""}), opt.field) == opt.default


def test_companion_free_defaults_are_table_defaults() -> None:
    cfg = load_config([], {})
    for opt in OPTIONS:
        assert getattr(cfg, opt.field) == opt.default


# --- Cube Store's names and units --------------------------------------------------------

CUBESTORE_CASES = [
    # (field, CUBESTORE value, expected in our unit)
    ("http_port", "3131", 3131),
    ("max_message_size", "1048576", 1048576),
    ("results_expire", "120", 120),
    ("cache_max_entry_bytes", "5000", 5000),
    ("cache_max_keys", "77", 77),
    ("cache_max_bytes", "3", 3 * MIB),
    ("data_dir", "/var/lib/cubestore", "/var/lib/cubestore"),
]


@pytest.mark.parametrize(("field", "raw", "expected"), CUBESTORE_CASES)
def test_cubestore_env_in_cubestore_units(field: str, raw: str, expected: int | str) -> None:
    opt = next(o for o in OPTIONS if o.field == field)
    assert opt.cubestore_env is not None
    assert getattr(load_config([], {opt.cubestore_env: raw}), field) == expected
    # CUBEQUEUE_* beats CUBESTORE_*, and the flag beats both
    env = {opt.cubestore_env: raw, opt.env: "9"}
    typed = type(expected)
    assert getattr(load_config([], env), field) == typed("9")
    assert getattr(load_config([opt.flag, "8"], env), field) == typed("8")


def test_every_cubestore_name_is_tested() -> None:
    assert {o.field for o in OPTIONS if o.cubestore_env} == {c[0] for c in CUBESTORE_CASES}


def test_cache_max_size_mib_is_bytes_in_our_option() -> None:
    cfg = load_config([], {"CUBESTORE_CACHE_MAX_SIZE": "4096"})
    assert cfg.cache_max_bytes == 4 * 1024**3 == Config().cache_max_bytes


# --- booleans ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["1", "true", "YES", "on", "True"])
def test_test_clock_env_true(raw: str) -> None:
    assert load_config([], {"CUBEQUEUE_TEST_CLOCK": raw}).test_clock is True


@pytest.mark.parametrize("raw", ["0", "false", "no", "OFF"])
def test_test_clock_env_false(raw: str) -> None:
    assert load_config([], {"CUBEQUEUE_TEST_CLOCK": raw}).test_clock is False


def test_test_clock_flag_beats_env() -> None:
    assert load_config(["--test-clock"], {"CUBEQUEUE_TEST_CLOCK": "0"}).test_clock is True
    assert load_config(["--no-test-clock"], {"CUBEQUEUE_TEST_CLOCK": "1"}).test_clock is False
    assert load_config([], {}).test_clock is False


# --- bad values: one line naming the option and the value ------------------------------

BAD = [
    (["--port", "abc"], {}, "invalid value for --port: 'abc' is not an integer"),
    ([], {"CUBEQUEUE_PORT": "abc"},
     "invalid value for --port (CUBEQUEUE_PORT): 'abc' is not an integer"),
    (["--port", "0"], {}, "invalid value for --port: '0' must be between 1 and 65535"),
    (["--port", "65536"], {}, "invalid value for --port: '65536' must be between 1 and 65535"),
    ([], {"CUBESTORE_HTTP_PORT": "-1"},
     "invalid value for --http-port (CUBESTORE_HTTP_PORT): '-1' must be between 1 and 65535"),
    (["--results-expire", "301"], {},
     "invalid value for --results-expire: '301' must be between 1 and 300"),
    ([], {"CUBESTORE_QUEUE_RESULTS_EXPIRE": "0"},
     "invalid value for --results-expire (CUBESTORE_QUEUE_RESULTS_EXPIRE in s): '0' must be "
     "between 1 and 300"),
    ([], {"CUBESTORE_CACHE_MAX_SIZE": "1.5"},
     "invalid value for --cache-max-bytes (CUBESTORE_CACHE_MAX_SIZE in MiB): '1.5' is not an "
     "integer"),
    (["--cache-max-keys", "0"], {}, "invalid value for --cache-max-keys: '0' must be at least 1"),
    (["--max-message-size", "10MB"], {},
     "invalid value for --max-message-size: '10MB' is not an integer"),
    (["--log-level", "verbose"], {},
     "invalid value for --log-level: 'verbose' must be one of debug, info, warning, error"),
    (["--log-format", "xml"], {}, "invalid value for --log-format: 'xml' must be one of plain, json"),
    (["--auth", "password"], {},
     "invalid value for --auth: 'password' must be one of trust, scram-sha-256, md5"),
    (["--auth", "scram-sha-256"], {},
     "invalid value for --auth: 'scram-sha-256' needs --password or --users-file"),
    ([], {"CUBEQUEUE_AUTH": "md5"}, "invalid value for --auth: 'md5' needs --password or --users-file"),
    (["--ws-auth", "token"], {}, "invalid value for --ws-auth: 'token' must be one of none, basic"),
    (["--ws-auth", "basic"], {},
     "invalid value for --ws-auth: 'basic' needs --password or --users-file"),
    (["--tls-cert", "/nonexistent/cert.pem"], {},
     "invalid value for --tls-cert: '/nonexistent/cert.pem' is not a file"),
    (["--users-file", "/nonexistent"], {},
     "invalid value for --users-file: '/nonexistent' is not a file"),
    ([], {"CUBEQUEUE_TEST_CLOCK": "maybe"},
     "invalid value for --test-clock (CUBEQUEUE_TEST_CLOCK): 'maybe' is not a boolean (use "
     "1/true/yes/on or 0/false/no/off)"),
    (["--cubestore-version", "1.7 beta"], {},
     "invalid value for --cubestore-version: '1.7 beta' is not a version such as 1.7.25"),
    (["--shutdown-grace", "-1"], {}, "invalid value for --shutdown-grace: '-1' must be at least 0"),
    (["--host", " "], {}, "invalid value for --host: ' ' must not be empty"),
]


@pytest.mark.parametrize(("argv", "env", "message"), BAD)
def test_bad_value_message(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(argv, env)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_bad_flag_beats_good_env_and_good_flag_hides_bad_env() -> None:
    with pytest.raises(ConfigError, match="--port: 'x'"):
        load_config(["--port", "x"], {"CUBEQUEUE_PORT": "5433"})
    # a bad CUBESTORE_* value that is shadowed by CUBEQUEUE_* is never read
    assert load_config([], {"CUBEQUEUE_HTTP_PORT": "3031", "CUBESTORE_HTTP_PORT": "x"}).http_port == 3031


def test_tls_pair(files: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="--tls-key: it needs --tls-cert as well"):
        load_config(["--tls-key", files["key1"]], {})
    with pytest.raises(ConfigError, match="--tls-cert: it needs --tls-key as well"):
        load_config([], {"CUBEQUEUE_TLS_CERT": files["cert1"], "CUBEQUEUE_TLS_KEY": ""})
    cfg = load_config(["--tls-cert", files["cert1"]], {"CUBEQUEUE_TLS_KEY": files["key2"]})
    assert (cfg.tls_cert, cfg.tls_key) == (files["cert1"], files["key2"])


# --- the users file ----------------------------------------------------------------------


def test_users_file_format(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# who may connect\n\nalice:s3cret\n  bob : pa:ss\n")
    assert read_users_file(str(path)) == {"alice": "s3cret", "bob": "pa:ss"}
    cfg = load_config(["--auth", "scram-sha-256", "--users-file", str(path), "--ws-auth",
                       "basic"], {})
    assert cfg.users_file == str(path)


@pytest.mark.parametrize(("text", "reason"), [
    ("alice\n", "line 1 is not user:password"),
    ("# only a comment\n", "names no user"),
    ("ok:1\n:nouser\n", "line 2 is not user:password"),
])
def test_users_file_errors(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "users"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(["--users-file", str(path)], {})
    assert str(info.value) == f"invalid value for --users-file: {str(path)!r} {reason}"


# --- --help and the command line -------------------------------------------------------


def test_help_names_every_flag_env_and_default() -> None:
    text = " ".join(build_parser().format_help().split())
    for flag, env, cubestore_env, _default in CONFIG_MD:
        assert flag in text
        assert env in text
        if cubestore_env:
            assert cubestore_env in text
    for opt in OPTIONS:
        raw = next(a.help for a in build_parser()._actions if a.dest == opt.field) or ""
        help_text = " ".join(raw.split())
        expected = (opt.default_help if opt.default_help
                    else "off" if opt.default is False
                    else "none" if opt.default is None else in_units(opt.default, opt.unit))
        assert f"default: {expected}" in help_text.replace("%%", "%")


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (67108864, "bytes", "64 MiB"), (65536, "bytes", "64 KiB"), (200, "bytes", "200 bytes"),
    (1 << 32, "bytes", "4 GiB"), (1536, "bytes", "1536 bytes"), (60000, "ms", "1 min"),
    (1500, "ms", "1500 ms"), (10, "s", "10 s"), (600, "s", "10 min"), (3600, "s", "1 h"),
    (0, "ms", "0 ms"), (100, "", "100"), (7, "keys", "7 keys"),
])
def test_help_shows_sizes_and_durations_in_units(value: int, unit: str, shown: str) -> None:
    assert in_units(value, unit) == shown


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cubequeue.server", *args],
                          capture_output=True, text=True, timeout=30, env=env or {})


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--port", "abc"], {}, "cubequeue: invalid value for --port: 'abc' is not an integer"),
    ([], {"CUBEQUEUE_PORT": "abc"},
     "cubequeue: invalid value for --port (CUBEQUEUE_PORT): 'abc' is not an integer"),
    ([], {"CUBESTORE_CACHE_MAX_SIZE": "lots"},
     "cubequeue: invalid value for --cache-max-bytes (CUBESTORE_CACHE_MAX_SIZE in MiB): 'lots' "
     "is not an integer"),
    (["--auth", "md5"], {},
     "cubequeue: invalid value for --auth: 'md5' needs --password or --users-file"),
])
def test_cli_bad_value_exits_2_with_one_line(args: list[str], env: dict[str, str],
                                             message: str) -> None:
    proc = _cli(*args, env=env)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [message]


def test_cli_help_and_version() -> None:
    proc = _cli("--help")
    assert proc.returncode == 0
    assert "CUBESTORE_TRANSPORT_MAX_MESSAGE_SIZE" in proc.stdout
    assert "healthcheck" in proc.stdout
    proc = _cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("cubequeue ")


def test_cli_unknown_flag_is_usage_error() -> None:
    proc = _cli("--no-such-flag")
    assert proc.returncode == 2
    assert "--no-such-flag" in proc.stderr


def test_readme_lists_every_option_with_its_variable() -> None:
    """The README's Configuration table is the user's list: every flag, with its variable."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`--"):
            for flag, env in zip(cells[0].split(", "), cells[1].split(", "), strict=False):
                rows[flag.strip("`")] = env.strip("`")
    assert {o.flag: o.env for o in OPTIONS} == {o.flag: rows.get(o.flag) for o in OPTIONS}


def test_help_groups_the_options_by_topic() -> None:
    """--help prints one section per topic, in TOPICS' order, each option in its own."""
    from cubequeue.server.options import TOPICS

    text = build_parser().format_help()
    starts = [text.index(f"\n{topic}:\n") for topic in TOPICS]
    assert starts == sorted(starts)
    ends = [*starts[1:], len(text)]
    for opt in OPTIONS:
        i = TOPICS.index(opt.topic)
        assert opt.flag in text[starts[i]:ends[i]], (opt.flag, opt.topic)
