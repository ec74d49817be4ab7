"""Where passwords come from: the users file's comment rule, empty passwords, and
``--password-file`` / ``CUBEQUEUE_PASSWORD_FILE``, checked over psycopg against the real
server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cubequeue.server.options import ConfigError, load_config, read_users_file
from cubequeue.server.pytest_plugin import start_cubequeue


def _dsn(server: object, user: str, password: str) -> str:
    host, port = server.host, server.port  # type: ignore[attr-defined]
    return f"host={host} port={port} user={user} password='{password}' dbname=cube"


def _logs_in(server: object, user: str, password: str) -> bool:
    try:
        with psycopg.connect(_dsn(server, user, password), autocommit=True,
                             connect_timeout=10) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError as err:
        assert "password authentication failed" in str(err)
        return False


# --- the users file ------------------------------------------------------------------


def test_hash_inside_a_password_is_part_of_it(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# whole-line comment\n  # indented comment\nalice:Tr0ub4dor#3xKq9\n"
                    "bob:#hunter2\ncarol : pa:ss # not a comment\n")
    assert read_users_file(str(path)) == {
        "alice": "Tr0ub4dor#3xKq9", "bob": "#hunter2", "carol": "pa:ss # not a comment"}


@pytest.mark.parametrize("line", ["bob:\n", "bob:   \n", "bob:\t\r\n"])
def test_empty_password_is_refused_naming_the_user(tmp_path: Path, line: str) -> None:
    path = tmp_path / "users"
    path.write_text("alice:secret\n" + line)
    with pytest.raises(ConfigError) as info:
        load_config(["--users-file", str(path)], {})
    assert str(info.value) == (f"invalid value for --users-file: {str(path)!r} line 2 "
                               "gives user 'bob' an empty password")


def test_server_refuses_an_empty_password_at_start(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("bob:\n")
    proc = subprocess.run([sys.executable, "-m", "cubequeue.server", "--ws-auth", "none", "--auth", "md5",
                           "--users-file", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"cubequeue: invalid value for --users-file: {str(path)!r} line 1 gives user 'bob' "
        "an empty password"]


def test_passwords_with_hash_log_in_over_psycopg(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("alice:Tr0ub4dor#3xKq9\nbob:#hunter2\n")
    server = start_cubequeue("--ws-auth", "none", "--auth", "scram-sha-256", "--users-file", str(path))
    try:
        assert _logs_in(server, "alice", "Tr0ub4dor#3xKq9")
        assert not _logs_in(server, "alice", "Tr0ub4dor")
        assert _logs_in(server, "bob", "#hunter2")
        assert not _logs_in(server, "bob", "hunter2")
    finally:
        server.stop()


# --- --password-file ---------------------------------------------------------------------


def test_password_file_is_read_without_its_line_break(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret with blanks\n")
    assert load_config(["--password-file", str(path)], {}).password == "s3cret with blanks"
    env = {"CUBEQUEUE_PASSWORD_FILE": str(path)}
    cfg = load_config(["--ws-auth", "none", "--auth", "md5"], env)
    assert (cfg.password, cfg.password_file) == ("s3cret with blanks", str(path))


@pytest.mark.parametrize(("content", "args", "reason"), [
    ("\n", [], "holds an empty password"),
    ("pw\n", ["--password", "other"], "give --password or --password-file, not both"),
])
def test_password_file_errors(tmp_path: Path, content: str, args: list[str],
                              reason: str) -> None:
    path = tmp_path / "pw"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config(["--password-file", str(path), *args], {})
    assert str(info.value).startswith("invalid value for --password-file: ")
    assert str(info.value).endswith(reason)


def test_password_file_from_the_variable_logs_in_over_psycopg(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("fr0m-a-f1le\n")
    server = start_cubequeue("--ws-auth", "none", "--auth", "scram-sha-256",
                             env={"CUBEQUEUE_PASSWORD_FILE": str(path)})
    try:
        assert _logs_in(server, "cube", "fr0m-a-f1le")
        assert not _logs_in(server, "cube", "fr0m-a-f1le\n")
        # the password never reaches the process list
        cmdline = Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
        assert b"fr0m-a-f1le" not in cmdline
    finally:
        server.stop()
