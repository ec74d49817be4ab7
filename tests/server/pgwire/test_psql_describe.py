"""psql 15's \\d family and tab completion against the real server.

Expected outputs are PostgreSQL 15's own for the same tables (captured from a real
PostgreSQL 15 with ``log_statement = all``), minus what cubequeue does not have (other
databases, extensions). Completion runs psql under a pty and presses Tab.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")

QUEUE = (
    '                          Table "system.queue"\n'
    '   Column    |           Type           | Collation | Nullable | Default \n'
    '-------------+--------------------------+-----------+----------+---------\n'
    ' id          | text                     |           |          | \n'
    ' queue_id    | bigint                   |           |          | \n'
    ' prefix      | text                     |           |          | \n'
    ' created     | timestamp with time zone |           |          | \n'
    ' status      | text                     |           |          | \n'
    ' priority    | bigint                   |           |          | \n'
    ' heartbeat   | timestamp with time zone |           |          | \n'
    ' orphaned    | timestamp with time zone |           |          | \n'
    ' value       | text                     |           |          | \n'
    ' extra       | text                     |           |          | \n'
    ' process_id  | text                     |           |          | \n'
    ' exclusive   | boolean                  |           |          | \n'
    ' external_id | text                     |           |          | \n'
    '\n'
)
RELATIONS = (
    '            List of relations\n'
    ' Schema |      Name      | Type  | Owner \n'
    '--------+----------------+-------+-------\n'
    ' system | cache          | table | cube\n'
    ' system | queue          | table | cube\n'
    ' system | queue_log      | table | cube\n'
    ' system | queue_prefixes | table | cube\n'
    ' system | queue_results  | table | cube\n'
    '(5 rows)\n'
    '\n'
)


def psql(server, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["psql", "-X", "-h", server.host, "-p", str(server.port), "-U", "cube", "-d", "cube",
           *args]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def describe(server, command: str) -> str:
    out = psql(server, "-c", command)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return out.stdout


def test_d_system_queue_lists_columns_with_their_types(server):
    assert describe(server, r"\d system.queue") == QUEUE
    assert describe(server, r"\d queue") == QUEUE  # the system schema is on the path


def test_d_and_dt_list_the_system_tables(server):
    assert describe(server, r"\d") == RELATIONS
    assert describe(server, r"\dt") == RELATIONS
    assert describe(server, r"\dt system.*") == RELATIONS


def test_d_of_every_system_table_names_its_columns(server):
    from cubequeue.storage.system_schemas import SYSTEM_TABLES

    names = {"STRING": "text", "INT": "bigint", "BOOLEAN": "boolean",
             "TIMESTAMP": "timestamp with time zone"}
    for table, columns in SYSTEM_TABLES.items():
        out = psql(server, "-A", "-t", "-c", rf"\d system.{table}")
        assert out.returncode == 0, out.stderr
        rows = [line.split("|")[:2] for line in out.stdout.splitlines() if "|" in line]
        assert rows == [[c.name, names[c.type.name]] for c in columns]


def test_d_plus_shows_storage_and_access_method(server):
    out = describe(server, r"\d+ system.cache")
    assert " expire | timestamp with time zone |" in out
    assert "| plain    |" in out and "| extended |" in out
    assert out.endswith("Access method: heap\n\n")


def test_dn_l_du(server):
    assert describe(server, r"\dn") == (
        "      List of schemas\n"
        "  Name  |       Owner       \n"
        "--------+-------------------\n"
        " public | pg_database_owner\n"
        " system | cube\n"
        "(2 rows)\n\n"
    )
    listing = describe(server, r"\l")
    assert " cube | cube  | UTF8     | C.UTF-8 | C.UTF-8 |            | libc            | " in listing
    assert "(1 row)" in listing
    assert describe(server, r"\du") == (
        "                                   List of roles\n"
        " Role name |                         Attributes                         | Member of \n"
        "-----------+------------------------------------------------------------+-----------\n"
        " cube      | Superuser, Create role, Create DB, Replication, Bypass RLS | {}\n\n"
    )


def test_other_describe_commands_find_nothing(server):
    out = psql(server, "-c", r"\dv")
    assert (out.returncode, out.stdout) == (0, "")
    assert out.stderr == "Did not find any relations.\n"
    out = psql(server, "-c", r"\d nope")
    assert 'Did not find any relation named "nope".' in out.stderr


def test_unknown_catalog_is_0a000_and_the_session_goes_on(server):
    out = psql(server, "-v", "VERBOSITY=verbose", "-c",
               "SELECT * FROM pg_catalog.pg_stat_activity", "-c", "SELECT 1")
    assert "ERROR:  0A000: cubequeue's catalog does not support the table" in out.stderr
    assert "pg_stat_activity" in out.stderr
    assert out.stdout.endswith("(1 row)\n\n")


def _complete(server, typed: str) -> str:
    """What psql shows after ``typed`` and two Tabs."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover  # the child
        os.execvp("psql", ["psql", "-X", "-h", server.host, "-p", str(server.port),
                           "-U", "cube", "-d", "cube"])
    try:
        def read_until(marker: bytes, timeout: float = 30.0) -> bytes:
            out, deadline = b"", time.monotonic() + timeout
            while marker not in out and time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.2)
                if ready:
                    out += os.read(fd, 65536)
            return out

        read_until(b"=# ")
        os.write(fd, typed.encode() + b"\t\t")
        shown = read_until(b"=# " + typed.encode().split(b" ")[0])
        return shown.decode(errors="replace")
    finally:
        os.kill(pid, signal.SIGKILL)  # the psql this test started
        os.waitpid(pid, 0)
        os.close(fd)


def test_tab_completion_lists_the_system_tables(server):
    shown = _complete(server, "SELECT * FROM system.")
    for table in ("system.cache", "system.queue", "system.queue_log", "system.queue_prefixes",
                  "system.queue_results"):
        assert table in shown


def test_tab_completion_lists_columns(server):
    shown = _complete(server, "SELECT * FROM system.queue WHERE ")
    for column in ("queue_id", "priority", "heartbeat", "external_id"):
        assert column in shown


def test_tab_completion_of_backslash_d(server):
    shown = _complete(server, r"\d system.queue_")
    assert "system.queue_log" in shown and "system.queue_results" in shown
    assert "system.cache" not in shown
