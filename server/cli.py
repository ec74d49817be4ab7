"""The ``cubequeue`` console script: run the server, or ``cubequeue healthcheck``.

argv, the environment and logging set-up live here and nowhere else, so every other module
stays free of process-wide state. The server itself (``cubequeue.server.app``) is imported only
after the configuration is settled, so ``--help``, a bad option and the healthcheck stay
fast, and the module imports nothing heavy at load time (start-up time: ``bench/startup.py``).

Exit codes: 0 success, 1 healthcheck failed, 2 bad configuration or usage (argparse's
convention).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cubequeue.server import __version__
from cubequeue.server.config import listen_error
from cubequeue.server.options import (
    ConfigError,
    build_parser,
    config_from,
    option_value,
    read_password_file,
    read_users_file,
)

__all__ = ["healthcheck", "main", "running_server_flags", "server_flags"]

HEALTHCHECK_STATEMENT = "SYS CACHESTORE HEALTHCHECK"
HEALTHCHECK_TIMEOUT_S = 3.0
#: a wildcard listen address is not something to connect to; its loopback twin is
_WILDCARD_TO_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_USAGE = 2
#: the process whose command line the healthcheck reads: the container's entry point
SERVER_PID = 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["healthcheck"]:
        return healthcheck(args[1:], os.environ)
    return _serve(args, os.environ)


def _serve(args: list[str], environ: Mapping[str, str]) -> int:
    parser = build_parser()
    parser.add_argument("-V", "--version", action="version", version=f"cubequeue {__version__}")
    parser.usage = "%(prog)s [options]\n       %(prog)s healthcheck [--host H] [--port P] ..."
    try:
        config = config_from(vars(parser.parse_args(args)), environ)
    except ConfigError as err:
        print(f"cubequeue: {err}", file=sys.stderr)
        return EXIT_USAGE

    from cubequeue.server.logs import setup_logging

    limiter = setup_logging(config)
    from cubequeue.server.app import run  # the server proper: imported only to run it

    try:
        run(config)
    except OSError as err:
        failure = listen_error(config, err)
        if failure is None:
            raise
        print(f"cubequeue: {failure}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        limiter.flush()  # the "... repeated K times" lines still pending at exit
    return EXIT_OK


def _healthcheck_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cubequeue healthcheck",
        description=f"Connect over the PostgreSQL wire, run {HEALTHCHECK_STATEMENT} and exit "
        "0 (healthy) or 1 (not), with a one-line reason. Defaults come from the same "
        "CUBEQUEUE_* variables as the server, so it works unchanged inside the image.",
    )
    parser.add_argument("--host", help="server address; env CUBEQUEUE_HOST (a wildcard "
                        "address such as 0.0.0.0 means loopback); default: 127.0.0.1")
    parser.add_argument("--port", help="PostgreSQL wire port; env CUBEQUEUE_PORT; default: "
                        "5432")
    parser.add_argument("--user", help="user name; default: the first user of "
                        "CUBEQUEUE_USERS_FILE, else cube")
    parser.add_argument("--password", help="password; env CUBEQUEUE_PASSWORD, else the "
                        "user's line in CUBEQUEUE_USERS_FILE; default: none")
    parser.add_argument("--database", default="cube", help="database name; default: cube")
    parser.add_argument("--timeout", type=float, default=HEALTHCHECK_TIMEOUT_S,
                        help=f"seconds for the whole check; default: {HEALTHCHECK_TIMEOUT_S:g}")
    parser.add_argument("--server-pid", type=int, default=SERVER_PID, metavar="PID",
                        help="read the flags the server was started with from this "
                        "process' command line (/proc/PID/cmdline), so a 'docker run "
                        "cubequeue --port 6000' is checked on 6000; a process that is not "
                        "cubequeue is ignored; 0 turns this off; default: "
                        f"{SERVER_PID} (the container's entry point)")
    return parser


_PROC = Path("/proc")
#: the init processes a container may run as PID 1 in front of the entry point
_CONTAINER_INITS = frozenset({"docker-init", "tini", "tini-static", "dumb-init", "catatonit"})
#: the flags of the server's command line the healthcheck uses, by Config field
_SERVER_FIELDS = ("host", "port", "password", "password_file", "users_file")


def server_flags(argv: Sequence[str]) -> dict[str, object]:
    """The settings a server command line gives, by Config field; {} when ``argv`` is not
    a cubequeue server (``cubequeue [options]``, ``python /…/cubequeue [options]`` as the
    kernel shows a console script, or ``python -m cubequeue.server [options]``).

    Parsed by the server's own option parser, so the healthcheck reads every spelling the
    server accepts (``--port=6000``, ``--port 6000``)."""
    args = _server_args(list(argv))
    if args is None or args[:1] == ["healthcheck"]:
        return {}
    parser = build_parser()
    try:
        known, _rest = parser.parse_known_args(args)
    except SystemExit:  # argparse's reaction to a malformed command line
        return {}
    return {k: v for k, v in vars(known).items() if k in _SERVER_FIELDS}


def _server_args(argv: list[str]) -> list[str] | None:
    for i, word in enumerate(argv[:2]):
        if os.path.basename(word) == "cubequeue":
            return argv[i + 1:]
    for i, word in enumerate(argv[:-1]):
        if word == "-m" and argv[i + 1] in ("cubequeue", "cubequeue.server"):
            return argv[i + 2:]
    return None


def _cmdline(proc: Path, pid: int) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]]


def running_server_flags(pid: int, proc: Path = _PROC) -> dict[str, object]:
    """:func:`server_flags` of process ``pid``; when ``pid`` is a container init
    (``docker run --init`` makes tini PID 1), of its child that is a cubequeue server.
    Any other process is not looked into, so outside a container the healthcheck never
    picks up an unrelated server; {} where /proc cannot tell."""
    if pid <= 0:
        return {}
    argv = _cmdline(proc, pid)
    if argv and os.path.basename(argv[0]) in _CONTAINER_INITS:
        try:
            children = (proc / str(pid) / "task" / str(pid) / "children").read_text().split()
        except OSError:
            children = []
        for child in children:
            child_argv = _cmdline(proc, int(child)) if child.isdigit() else []
            if _server_args(child_argv) is not None:
                return server_flags(child_argv)
        return {}
    return server_flags(argv) if _server_args(argv) is not None else {}


#: how long the healthcheck waits for an HTTP answer when the PostgreSQL handshake failed
_HTTP_PROBE_TIMEOUT_S = 1.0


def _http_answer(host: str, port: int, timeout: float) -> str | None:
    """The status line an HTTP server on ``host:port`` answers ``GET /healthz`` with, or
    None: a PostgreSQL client's startup packet makes an HTTP server wait for a line that
    never comes, so after a failed handshake the healthcheck asks once in HTTP's own words
    and can say what it reached instead of only that it timed out."""
    try:
        with socket.create_connection((host, port), timeout=min(timeout, _HTTP_PROBE_TIMEOUT_S)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: " + _host_header(host).encode()
                         + b"\r\n\r\n")
            line = sock.makefile("rb").readline(200)
    except OSError:
        return None
    if not line.startswith(b"HTTP/"):
        return None
    return line.decode("latin-1").strip()


def _host_header(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def healthcheck(args: Sequence[str], environ: Mapping[str, str]) -> int:
    """``cubequeue healthcheck``: one line on stdout (healthy) or stderr (not).

    Settings come from, first to last: the healthcheck's own flags, the running server's
    command line (``--server-pid``), the ``CUBEQUEUE_*`` variables, the defaults."""
    ns = _healthcheck_parser().parse_args(list(args))
    own = {k: v for k, v in vars(ns).items() if v is not None and k in ("host", "port",
                                                                         "password")}
    flags = {**running_server_flags(ns.server_pid), **own}
    try:
        host = str(option_value("host", flags, environ))
        port = option_value("port", flags, environ)
        assert isinstance(port, int), "the port parser returns an int"
        password = option_value("password", flags, environ)
        if password is None and "password" not in own:
            password_file = option_value("password_file", flags, environ)
            if password_file is not None:
                password = read_password_file(str(password_file))
        users_file = option_value("users_file", flags, environ)
        user: str = ns.user or "cube"
        if users_file is not None and (ns.user is None or password is None):
            users = read_users_file(str(users_file))
            if ns.user is None:
                user = next(iter(users))
            if password is None:
                password = users.get(user)
    except ConfigError as err:
        print(f"unhealthy: {err}", file=sys.stderr)
        return EXIT_UNHEALTHY
    host = _WILDCARD_TO_LOOPBACK.get(host, host)

    from cubequeue.server.pgclient import PgError, connect

    started = time.monotonic()
    try:
        with connect(host, port, user=user, password=None if password is None else str(password),
                     database=ns.database, timeout=ns.timeout,
                     deadline=started + ns.timeout,
                     application_name="cubequeue-healthcheck") as client:
            client.query(HEALTHCHECK_STATEMENT)
    except PgError as err:
        where = f"{host}:{port} answered " if err.from_server else ""
        other = None if err.from_server else _http_answer(host, port, ns.timeout)
        if other is not None:
            print(f"unhealthy: {host}:{port} is not the PostgreSQL wire: it answered HTTP "
                  f"({other!r}), so it is an HTTP port (cubequeue's --http-port?); the "
                  "healthcheck connects to the PostgreSQL wire port (--port, "
                  "CUBEQUEUE_PORT)", file=sys.stderr)
        else:
            print(f"unhealthy: {where}{err}", file=sys.stderr)
        return EXIT_UNHEALTHY
    elapsed_ms = (time.monotonic() - started) * 1000
    print(f"healthy: {host}:{port} answered {HEALTHCHECK_STATEMENT} in {elapsed_ms:.0f} ms")
    return EXIT_OK
