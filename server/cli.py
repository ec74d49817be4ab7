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
import sys
import time
from collections.abc import Mapping, Sequence

from cubequeue.server import __version__
from cubequeue.server.options import (
    ConfigError,
    build_parser,
    config_from,
    option_value,
    read_users_file,
)

__all__ = ["healthcheck", "main"]

HEALTHCHECK_STATEMENT = "SYS CACHESTORE HEALTHCHECK"
HEALTHCHECK_TIMEOUT_S = 3.0
#: a wildcard listen address is not something to connect to; its loopback twin is
_WILDCARD_TO_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["healthcheck"]:
        return healthcheck(args[1:], os.environ)
    return _serve(args, os.environ)


def _serve(args: list[str], environ: Mapping[str, str]) -> int:
    parser = build_parser()
    parser.add_argument("--version", action="version", version=f"cubequeue {__version__}")
    parser.usage = "%(prog)s [options]\n       %(prog)s healthcheck [--host H] [--port P] ..."
    try:
        config = config_from(vars(parser.parse_args(args)), environ)
    except ConfigError as err:
        print(f"cubequeue: {err}", file=sys.stderr)
        return EXIT_USAGE

    from cubequeue.server.logs import setup_logging

    setup_logging(config)
    from cubequeue.server.app import run  # the server proper: imported only to run it

    run(config)
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
    return parser


def healthcheck(args: Sequence[str], environ: Mapping[str, str]) -> int:
    """``cubequeue healthcheck``: one line on stdout (healthy) or stderr (not)."""
    ns = _healthcheck_parser().parse_args(list(args))
    flags = {k: v for k, v in vars(ns).items() if v is not None and k in ("host", "port",
                                                                           "password")}
    try:
        host = str(option_value("host", flags, environ))
        port = option_value("port", flags, environ)
        assert isinstance(port, int), "the port parser returns an int"
        password = option_value("password", flags, environ)
        users_file = option_value("users_file", {}, environ)
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
        print(f"unhealthy: {where}{err}", file=sys.stderr)
        return EXIT_UNHEALTHY
    elapsed_ms = (time.monotonic() - started) * 1000
    print(f"healthy: {host}:{port} answered {HEALTHCHECK_STATEMENT} in {elapsed_ms:.0f} ms")
    return EXIT_OK
