"""Session statements: tags, notices, effects, settings and transaction status, checked
against what PostgreSQL 15 answers."""

from __future__ import annotations

import pytest

from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.sql import Notice, PlainSession, describe_plain, run_plain
from cubequeue.storage.clock import FakeClock

VERSION = "15.18 (cubequeue 0.1.0)"
NO_TX = Notice("WARNING", "25P01", "there is no transaction in progress")
IN_TX = Notice("WARNING", "25001", "there is already a transaction in progress")


class NoTables:
    clock = FakeClock(1_767_225_600_000)

    def system_table(self, name: str) -> ResultSet:
        raise AssertionError("session statements never read the store")


STORE = NoTables()


def new(**params: str) -> PlainSession:
    return PlainSession(server_version=VERSION, user="alice", startup_params=params)


def run(session: PlainSession, sql: str):
    return run_plain(sql, session, STORE)


def show(session: PlainSession, name: str) -> str:
    out = run(session, f"SHOW {name}")
    assert out.tag == "SHOW" and out.type_oids == (25,) and out.result is not None
    assert len(out.result.columns) == 1
    return str(out.result.rows[0][0])


def error(session: PlainSession, sql: str) -> QueueError:
    with pytest.raises(QueueError) as info:
        run(session, sql)
    return info.value


# -- transactions ----------------------------------------------------------------------

@pytest.mark.parametrize(("sql", "tag"), [
    ("BEGIN", "BEGIN"), ("begin;", "BEGIN"), ("START TRANSACTION", "BEGIN"),
    ("BEGIN WORK", "BEGIN"), ("BEGIN ISOLATION LEVEL READ COMMITTED, READ WRITE", "BEGIN"),
    ("  start   transaction  read only ;", "BEGIN"),
])
def test_begin_opens_a_block(sql: str, tag: str) -> None:
    s = new()
    out = run(s, sql)
    assert (out.tag, out.notices, out.tx, out.result, s.tx_status) == (tag, [], "begin", None, "T")


def test_begin_inside_a_block_warns_25001_and_stays_open() -> None:
    s = new()
    run(s, "BEGIN")
    out = run(s, "BEGIN")
    assert (out.tag, out.notices, s.tx_status) == ("BEGIN", [IN_TX], "T")


@pytest.mark.parametrize(("sql", "tag"), [
    ("COMMIT", "COMMIT"), ("END", "COMMIT"), ("commit work", "COMMIT"),
    ("ROLLBACK", "ROLLBACK"), ("ABORT", "ROLLBACK"), ("rollback transaction;", "ROLLBACK"),
])
def test_end_outside_a_block_warns_25p01(sql: str, tag: str) -> None:
    s = new()
    out = run(s, sql)
    assert (out.tag, out.notices, s.tx_status) == (tag, [NO_TX], "I")


@pytest.mark.parametrize(("sql", "tag", "tx"), [
    ("COMMIT", "COMMIT", "commit"), ("END", "COMMIT", "commit"), ("ROLLBACK", "ROLLBACK", "rollback"),
])
def test_end_closes_a_block(sql: str, tag: str, tx: str) -> None:
    s = new()
    run(s, "BEGIN")
    out = run(s, sql)
    assert (out.tag, out.notices, out.tx, s.tx_status) == (tag, [], tx, "I")


def test_failed_block_refuses_everything_but_end_and_commit_answers_rollback() -> None:
    s = new()
    run(s, "BEGIN")
    s.fail_transaction()
    assert s.tx_status == "E"
    for sql in ("SELECT 1", "SET application_name = 'x'", "SHOW server_version", "BEGIN"):
        assert error(s, sql).sqlstate == "25P02"
    assert s.tx_status == "E"
    out = run(s, "COMMIT")
    assert (out.tag, out.tx, out.notices, s.tx_status) == ("ROLLBACK", "rollback", [], "I")


def test_rollback_of_a_failed_block() -> None:
    s = new()
    run(s, "BEGIN")
    s.fail_transaction()
    assert run(s, "ROLLBACK").tag == "ROLLBACK"
    assert s.tx_status == "I"


def test_fail_transaction_outside_a_block_changes_nothing() -> None:
    s = new()
    s.fail_transaction()
    assert s.tx_status == "I"


def test_rollback_undoes_set_and_reports_the_restored_value() -> None:
    s = new(application_name="app")
    run(s, "BEGIN")
    assert run(s, "SET application_name = 'tmp'").parameter_status == {"application_name": "tmp"}
    out = run(s, "ROLLBACK")
    assert out.parameter_status == {"application_name": "app"}
    assert show(s, "application_name") == "app"


def test_commit_keeps_set_and_set_local_ends_with_the_block() -> None:
    s = new()
    run(s, "BEGIN")
    run(s, "SET extra_float_digits = 2")
    run(s, "SET LOCAL statement_timeout = '1min'")
    assert show(s, "statement_timeout") == "1min"
    run(s, "COMMIT")
    assert show(s, "extra_float_digits") == "2"
    assert show(s, "statement_timeout") == "0"


def test_set_local_outside_a_block_warns_and_does_nothing() -> None:
    s = new()
    out = run(s, "SET LOCAL extra_float_digits = 2")
    assert out.tag == "SET"
    assert out.notices == [Notice("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks")]
    assert show(s, "extra_float_digits") == "1"


def test_set_transaction_outside_a_block_warns() -> None:
    s = new()
    out = run(s, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
    assert out.tag == "SET" and out.notices[0].sqlstate == "25P01"
    run(s, "BEGIN")
    assert run(s, "SET TRANSACTION READ ONLY").notices == []


def test_commit_and_chain_is_refused() -> None:
    s = new()
    run(s, "BEGIN")
    assert error(s, "COMMIT AND CHAIN").sqlstate == "0A000"
    assert s.tx_status == "T"


# -- SET / SHOW / RESET ----------------------------------------------------------------

def test_server_values() -> None:
    s = new()
    expected = {
        "server_version": VERSION, "server_version_num": "150018", "server_encoding": "UTF8",
        "client_encoding": "UTF8", "DateStyle": "ISO, MDY", "TimeZone": "Etc/UTC",
        "integer_datetimes": "on", "standard_conforming_strings": "off",
        "IntervalStyle": "postgres", "is_superuser": "on", "application_name": "",
        "default_transaction_read_only": "off", "in_hot_standby": "off",
        "session_authorization": "alice", "extra_float_digits": "1",
        "search_path": '"$user", public', "statement_timeout": "0", "process_id": "",
    }
    for name, value in expected.items():
        assert show(s, name) == value, name
        assert s.settings[name.lower()] == value


def test_show_uses_the_canonical_name_as_column() -> None:
    out = run(new(), "show datestyle")
    assert out.result == ResultSet((Column("DateStyle", ColumnType.STRING),), [("ISO, MDY",)])
    assert run(new(), "SHOW TIME ZONE").result.columns[0].name == "TimeZone"  # type: ignore[union-attr]
    out = run(new(), "SHOW TRANSACTION ISOLATION LEVEL")
    assert out.result == ResultSet((Column("transaction_isolation", ColumnType.STRING),), [("read committed",)])


def test_reported_parameters_match_postgres_list() -> None:
    assert new(application_name="psql").reported() == {
        "application_name": "psql", "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
        "default_transaction_read_only": "off", "in_hot_standby": "off",
        "integer_datetimes": "on", "IntervalStyle": "postgres", "is_superuser": "on",
        "server_encoding": "UTF8", "server_version": VERSION,
        "session_authorization": "alice", "standard_conforming_strings": "off",
        "TimeZone": "Etc/UTC",
    }


@pytest.mark.parametrize(("sql", "name", "shown"), [
    ("SET extra_float_digits = 3", "extra_float_digits", "3"),
    ("SET extra_float_digits TO -2", "extra_float_digits", "-2"),
    ("SET application_name = 'PostgreSQL JDBC Driver'", "application_name", "PostgreSQL JDBC Driver"),
    ("SET statement_timeout = 5000", "statement_timeout", "5s"),
    ("SET statement_timeout = '90s'", "statement_timeout", "90s"),
    ("SET statement_timeout = '2min'", "statement_timeout", "2min"),
    ("SET statement_timeout = 1500", "statement_timeout", "1500ms"),
    ("SET TimeZone = 'Europe/Berlin'", "TimeZone", "Europe/Berlin"),
    ("SET TIME ZONE 'UTC'", "timezone", "UTC"),
    ("SET DateStyle = ISO", "DateStyle", "ISO, MDY"),
    ("SET datestyle TO 'iso, dmy'", "DateStyle", "ISO, DMY"),
    ("SET search_path TO myschema, public", "search_path", "myschema, public"),
    ("SET search_path = '$user', public", "search_path", '"$user", public'),
    ("SET SCHEMA 'other'", "search_path", "other"),
    ("SET client_encoding = 'utf-8'", "client_encoding", "UTF8"),
    ("SET NAMES 'UTF8'", "client_encoding", "UTF8"),
    ("SET standard_conforming_strings = off", "standard_conforming_strings", "off"),
    ("SET default_transaction_read_only = true", "default_transaction_read_only", "on"),
    ("SET my.custom = 'x y'", "my.custom", "x y"),
    ("SET jit = off", "jit", "off"),
    ("SET SESSION application_name = Foo", "application_name", "foo"),
    ("SET application_name = E'a\\'b'", "application_name", "a'b"),
    ("SET application_name = 'a\\\\b'", "application_name", "a\\b"),
    ("SET application_name = $$x'y$$", "application_name", "x'y"),
    ("SET process_id = 'worker-1'", "process_id", "worker-1"),
])
def test_set_then_show(sql: str, name: str, shown: str) -> None:
    s = new()
    out = run(s, sql)
    assert (out.tag, out.result, out.notices) == ("SET", None, [])
    assert show(s, name) == shown


def test_set_reports_parameter_status_only_for_reported_changes() -> None:
    s = new()
    assert run(s, "SET application_name = 'PostgreSQL JDBC Driver'").parameter_status == {
        "application_name": "PostgreSQL JDBC Driver"}
    assert run(s, "SET application_name = 'PostgreSQL JDBC Driver'").parameter_status == {}
    assert run(s, "SET extra_float_digits = 3").parameter_status == {}
    assert run(s, "SET TimeZone = 'UTC'").parameter_status == {"TimeZone": "UTC"}
    assert run(s, "SET DateStyle = 'ISO, DMY'").parameter_status == {"DateStyle": "ISO, DMY"}


@pytest.mark.parametrize(("sql", "sqlstate"), [
    ("SET server_version = '16'", "55P02"),
    ("SET is_superuser = off", "55P02"),
    ("SET standard_conforming_strings = on", "0A000"),
    ("SET extra_float_digits = 4", "22023"),
    ("SET extra_float_digits = 'x'", "22023"),
    ("SET default_transaction_read_only = maybe", "22023"),
    ("SET TimeZone = 'Not/AZone'", "22023"),
    ("SET client_encoding = 'LATIN1'", "0A000"),
    ("SET DateStyle = 'SQL'", "0A000"),
    ("SET application_name = 'a', 'b'", "22023"),
    ("SET application_name", "42601"),
    ("SET = 1", "42601"),
    ("SHOW no_such_setting", "42704"),
    ("SET process_id = '" + "x" * 97 + "'", "22023"),
])
def test_set_errors(sql: str, sqlstate: str) -> None:
    s = new()
    before = dict(s.settings)
    assert error(s, sql).sqlstate == sqlstate
    assert dict(s.settings) == before


def test_standard_conforming_strings_error_names_rule_4() -> None:
    e = error(new(), "SET standard_conforming_strings = on")
    assert "docs/dialect.md §8 rule 4" in e.message


def test_process_id_limit_message_is_cube_stores() -> None:
    e = error(new(), "SET process_id = '" + "p" * 97 + "'")
    assert e.message == "process_id exceeds maximum allowed length of 96 characters"
    s = new()
    run(s, "SET process_id = '" + "p" * 96 + "'")
    assert s.process_id == "p" * 96
    short = PlainSession(server_version=VERSION, user="u", process_id_max_len=64)
    with pytest.raises(QueueError, match="maximum allowed length of 64 characters"):
        run(short, "SET process_id = '" + "p" * 65 + "'")


def test_process_id_limit_counts_utf8_bytes_as_the_store_does() -> None:
    from cubequeue.storage.limits import MAX_PROCESS_ID_BYTES

    assert MAX_PROCESS_ID_BYTES == 96
    s = new()
    run(s, "SET process_id = '" + "é" * 48 + "'")  # 48 characters, 96 bytes: the cap
    assert s.process_id == "é" * 48
    e = error(s, "SET process_id = '" + "é" * 48 + "p'")  # 49 characters, 97 bytes
    assert (e.sqlstate, e.message) == (
        "22023", "process_id exceeds maximum allowed length of 96 characters")
    with pytest.raises(QueueError):
        new(process_id="€" * 33)  # 33 characters, 99 bytes


def test_zone_follows_the_time_zone_setting() -> None:
    from datetime import UTC
    from zoneinfo import ZoneInfo

    s = new()
    assert s.zone is UTC  # the default, Etc/UTC
    run(s, "SET TimeZone = 'Europe/Paris'")
    assert s.zone == ZoneInfo("Europe/Paris")
    run(s, "BEGIN")
    run(s, "SET LOCAL TimeZone = 'Asia/Tokyo'")
    assert s.zone == ZoneInfo("Asia/Tokyo")
    run(s, "ROLLBACK")
    assert s.zone == ZoneInfo("Europe/Paris")
    assert new(TimeZone="America/New_York").zone == ZoneInfo("America/New_York")


def test_process_id_from_startup_options_and_param() -> None:
    assert new(process_id="w1").process_id == "w1"
    assert new(options="-c process_id=w2 -c statement_timeout=5s").process_id == "w2"
    assert new(options="--process-id=w3").process_id == "w3"
    assert new().process_id is None
    with pytest.raises(QueueError) as info:
        new(process_id="x" * 97)
    assert info.value.sqlstate == "22023"


def test_startup_params_become_reset_values() -> None:
    s = new(application_name="psql", client_encoding="'utf-8'", DateStyle="ISO",
            TimeZone="Europe/Paris", extra_float_digits="2", process_id="w1")
    assert (show(s, "client_encoding"), show(s, "TimeZone"), show(s, "extra_float_digits")) == (
        "UTF8", "Europe/Paris", "2")
    run(s, "SET application_name = 'other'")
    run(s, "SET process_id = 'w9'")
    out = run(s, "RESET ALL")
    assert (out.tag, out.parameter_status) == ("RESET", {"application_name": "psql"})
    assert (show(s, "application_name"), s.process_id) == ("psql", "w1")


def test_reset_one_and_set_default() -> None:
    s = new()
    run(s, "SET extra_float_digits = 3")
    assert run(s, "RESET extra_float_digits").tag == "RESET"
    assert show(s, "extra_float_digits") == "1"
    run(s, "SET TIME ZONE 'UTC'")
    run(s, "RESET TIME ZONE")
    assert show(s, "TimeZone") == "Etc/UTC"
    run(s, "SET statement_timeout = 10")
    run(s, "SET statement_timeout TO DEFAULT")
    assert show(s, "statement_timeout") == "0"
    run(s, "SET my.x = 1")
    run(s, "RESET my.x")
    assert error(s, "SHOW my.x").sqlstate == "42704"


def test_show_all() -> None:
    s = new()
    run(s, "SET my.custom = 'v'")
    out = run(s, "SHOW ALL")
    assert out.tag == "SHOW" and out.type_oids == (25, 25, 25)
    assert out.result is not None
    assert [c.name for c in out.result.columns] == ["name", "setting", "description"]
    rows = {r[0]: r for r in out.result.rows}
    assert rows["server_version"][1] == VERSION
    assert rows["my.custom"][1] == "v"
    names = [r[0] for r in out.result.rows]
    assert names == sorted(names, key=str.lower)
    assert all(r[2] for r in out.result.rows if r[0] != "my.custom")


def test_statement_timeout_ms() -> None:
    s = new()
    assert s.statement_timeout_ms == 0
    run(s, "SET statement_timeout = '2s'")
    assert s.statement_timeout_ms == 2000


# -- the statements drivers send -------------------------------------------------------

def test_asyncpg_pool_release_script() -> None:
    s = new()
    run(s, "SET application_name = 'x'")
    outs = [run(s, q) for q in ("SELECT pg_advisory_unlock_all()", "CLOSE ALL", "UNLISTEN *", "RESET ALL")]
    assert [o.tag for o in outs] == ["SELECT 1", "CLOSE CURSOR ALL", "UNLISTEN", "RESET"]
    assert outs[0].result == ResultSet((Column("pg_advisory_unlock_all", ColumnType.STRING),), [("",)])
    assert outs[0].type_oids == (2278,)
    assert outs[1].effect == "close_all"
    assert outs[3].parameter_status == {"application_name": ""}


@pytest.mark.parametrize(("sql", "tag", "effect"), [
    ("DISCARD ALL", "DISCARD ALL", "discard_all"),
    ("discard plans", "DISCARD PLANS", None),
    ("DISCARD TEMPORARY", "DISCARD TEMP", None),
    ("DISCARD SEQUENCES", "DISCARD SEQUENCES", None),
    ("DEALLOCATE ALL", "DEALLOCATE ALL", "deallocate_all"),
    ("DEALLOCATE PREPARE ALL", "DEALLOCATE ALL", "deallocate_all"),
    ("DEALLOCATE _pg3_0", "DEALLOCATE", ("deallocate", "_pg3_0")),
    ('DEALLOCATE "S_1"', "DEALLOCATE", ("deallocate", "S_1")),
    ("CLOSE ALL", "CLOSE CURSOR ALL", "close_all"),
    ("UNLISTEN *", "UNLISTEN", None),
    ("UNLISTEN some_channel", "UNLISTEN", None),
])
def test_tags_and_effects(sql: str, tag: str, effect: object) -> None:
    out = run(new(), sql)
    assert (out.tag, out.effect, out.result, out.notices) == (tag, effect, None, [])


def test_discard_all_resets_settings_but_not_inside_a_block() -> None:
    s = new()
    run(s, "SET application_name = 'x'")
    out = run(s, "DISCARD ALL")
    assert out.parameter_status == {"application_name": ""}
    run(s, "BEGIN")
    assert error(s, "DISCARD ALL").sqlstate == "25001"


def test_close_of_a_named_cursor_is_34000() -> None:
    assert error(new(), "CLOSE c1").sqlstate == "34000"


def test_select_one_version_and_current_setting() -> None:
    s = new()
    out = run(s, "SELECT 1")
    assert (out.tag, out.type_oids) == ("SELECT 1", (23,))
    assert out.result == ResultSet((Column("?column?", ColumnType.INT),), [(1,)])
    out = run(s, "SELECT version();")
    assert out.result is not None and out.type_oids == (25,)
    assert out.result.columns == (Column("version", ColumnType.STRING),)
    assert str(out.result.rows[0][0]).startswith(f"PostgreSQL {VERSION} on x86_64-pc-linux-gnu")
    out = run(s, "select current_setting('DateStyle')")
    assert out.result == ResultSet((Column("current_setting", ColumnType.STRING),), [("ISO, MDY",)])
    assert run(s, "SELECT current_setting('nope', true)").result.rows == [(None,)]  # type: ignore[union-attr]
    assert error(s, "SELECT current_setting('nope')").sqlstate == "42704"


def test_constant_selects() -> None:
    s = new()
    out = run(s, "SELECT 1 AS one, 'a' AS t, true AS b, NULL AS n, 3000000000 AS big, 2 + 3 * 4")
    assert out.result is not None
    assert out.result.rows == [(1, "a", True, None, 3000000000, 14)]
    assert out.type_oids == (23, 25, 16, 25, 20, 23)
    out = run(s, "SELECT current_user, current_database(), now()")
    assert out.result is not None
    assert out.result.rows == [("alice", "alice", 1_767_225_600_000)]
    assert out.type_oids == (25, 25, 1184)
    assert run(s, "SELECT 1 WHERE false").tag == "SELECT 0"
    assert run(s, "SELECT pg_catalog.version()").result.columns[0].name == "version"  # type: ignore[union-attr]


def test_empty_statement_has_an_empty_tag() -> None:
    assert run(new(), "/* nothing */ ").tag == ""


@pytest.mark.parametrize("sql", [
    # CREATE TABLE and INSERT are refused as pre-aggregation builds (test_sql_refusals.py)
    "COPY t FROM STDIN", "LISTEN ch",
    "NOTIFY ch", "VACUUM", "SAVEPOINT a", "ROLLBACK TO SAVEPOINT a", "PREPARE p AS SELECT 1",
    "EXPLAIN SELECT 1", "WITH x AS (SELECT 1) SELECT * FROM x", "DECLARE c CURSOR FOR SELECT 1",
    "GRANT ALL ON t TO u", "SET ROLE admin", "SET SESSION AUTHORIZATION bob",
])
def test_everything_else_is_0a000_with_the_hint(sql: str) -> None:
    s = new()
    e = error(s, sql)
    assert e.sqlstate == "0A000", sql
    assert e.message.startswith("cubequeue does not support this statement: ")
    assert e.hint is not None and "QUEUE, CACHE and SYS" in e.hint and "system.queue_log" in e.hint
    assert run(s, "SELECT 1").tag == "SELECT 1"  # the session stays usable


def test_describe_session_statements() -> None:
    s = new()
    d = describe_plain("SHOW server_version", s, STORE)
    assert (d.param_count, d.columns, d.type_oids) == (0, (Column("server_version", ColumnType.STRING),), (25,))
    d = describe_plain("SHOW ALL", s, STORE)
    assert d.columns is not None and len(d.columns) == 3
    for sql in ("BEGIN", "COMMIT", "SET extra_float_digits = 3", "DISCARD ALL", "RESET ALL"):
        d = describe_plain(sql, s, STORE)
        assert (d.param_count, d.columns, d.type_oids) == (0, None, None)
    d = describe_plain("SELECT 1", s, STORE)
    assert (d.columns, d.type_oids) == ((Column("?column?", ColumnType.INT),), (23,))
    d = describe_plain("SELECT pg_advisory_unlock_all()", s, STORE)
    assert d.type_oids == (2278,)
    assert s.tx_status == "I"  # describing runs nothing
    with pytest.raises(QueueError) as info:
        describe_plain("COPY t FROM STDIN", s, STORE)
    assert info.value.sqlstate == "0A000"
