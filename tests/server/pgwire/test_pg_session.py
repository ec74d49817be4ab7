"""Socket-free scripts: frontend messages in, the exact backend messages out (PgSession)."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import replace

import pytest
import scramp

from cubequeue.grammar.results import ResultSet
from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.errors import QueryCanceled, TooManyConnections
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.session import PgSession, SessionState, WaitFor

P3 = 196608


class Hooks:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.users: list[str] = []

    def admit(self, user: str) -> tuple[int, int]:
        if self.refuse:
            raise TooManyConnections("sorry, too many clients already")
        self.users.append(user)
        return 4242, -7


def make(config: Config | None = None, hooks: Hooks | None = None, **startup: str) -> PgSession:
    ctx = build_context(config or Config(test_clock=True))
    session = PgSession(ctx, hooks or Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"), *startup.items())))
    session.take()
    return session


def run(session: PgSession, *msgs: m.FrontendMessage) -> list[m.BackendMessage]:
    for msg in msgs:
        assert session.handle(msg) is None
    return session.take()


def sqlstates(out):
    return [msg.get("C") for msg in out if isinstance(msg, m.ErrorResponse)]


def kinds(out):
    return [type(msg).__name__ for msg in out]


# --- startup ---------------------------------------------------------------------------


def test_startup_sends_the_postgres_parameter_set_then_key_and_ready():
    ctx = build_context(Config())
    session = PgSession(ctx, Hooks())
    assert session.state is SessionState.STARTUP
    session.handle(m.StartupMessage(P3, (("user", "cube"), ("application_name", "psql"))))
    out = session.take()
    assert out[0] == m.AuthenticationOk()
    params = {msg.name: msg.value for msg in out if isinstance(msg, m.ParameterStatus)}
    assert params == {
        "application_name": "psql",
        "client_encoding": "UTF8",
        "DateStyle": "ISO, MDY",
        "default_transaction_read_only": "off",
        "in_hot_standby": "off",
        "integer_datetimes": "on",
        "IntervalStyle": "postgres",
        "is_superuser": "on",
        "server_encoding": "UTF8",
        "server_version": f"15.18 (cubequeue {ctx.version})",
        "session_authorization": "cube",
        "standard_conforming_strings": "off",
        "TimeZone": "Etc/UTC",
    }
    assert out[-2:] == [m.BackendKeyData(4242, -7), m.ReadyForQuery("I")]
    assert session.state is SessionState.READY


def test_newer_minor_and_pq_options_get_negotiate_protocol_version():
    session = PgSession(build_context(Config()), Hooks())
    session.handle(m.StartupMessage((3 << 16) | 9999, (("user", "u"), ("_pq_.grease", "1"))))
    out = session.take()
    assert out[0] == m.NegotiateProtocolVersion(0, ("_pq_.grease",))
    assert out[-1] == m.ReadyForQuery("I")


@pytest.mark.parametrize(
    ("startup", "sqlstate"),
    [
        (m.StartupMessage(2 << 16, (("user", "u"),)), "0A000"),
        (m.StartupMessage(P3, (("database", "d"),)), "28000"),
        (m.Query("QUEUE LIST 'a'"), "08P01"),
    ],
)
def test_startup_failures_are_fatal(startup, sqlstate):
    session = PgSession(build_context(Config()), Hooks())
    session.handle(startup)
    (err,) = session.take()
    assert err.get("S") == "FATAL" and err.get("C") == sqlstate
    assert session.closed


def test_connection_limit_is_fatal_53300():
    session = PgSession(build_context(Config()), Hooks(refuse=True))
    session.handle(m.StartupMessage(P3, (("user", "u"),)))
    (err,) = session.take()
    assert (err.get("S"), err.get("C")) == ("FATAL", "53300")


def test_process_id_from_options():
    session = make(options="-c process_id=worker-1")
    out = run(session, m.Query("SHOW process_id"))
    assert m.DataRow((b"worker-1",)) in out
    assert session.process_id == "worker-1"


# --- authentication --------------------------------------------------------------------


def _auth_session(method: str) -> PgSession:
    ctx = build_context(Config(auth=method, password="s3cret"))
    session = PgSession(ctx, Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    return session


def test_md5_right_and_wrong_password():
    for password, ok in (("s3cret", True), ("nope", False)):
        session = _auth_session("md5")
        (request,) = session.take()
        assert isinstance(request, m.AuthenticationMD5Password)
        inner = hashlib.md5(f"{password}cube".encode()).hexdigest()
        answer = "md5" + hashlib.md5(inner.encode() + request.salt).hexdigest()
        session.handle(m.PasswordMessage(answer.encode() + b"\0"))
        out = session.take()
        if ok:
            assert out[0] == m.AuthenticationOk() and out[-1] == m.ReadyForQuery("I")
        else:
            assert out == [out[0]] and (out[0].get("S"), out[0].get("C")) == ("FATAL", "28P01")
            assert out[0].get("M") == 'password authentication failed for user "cube"'


def test_scram_right_and_wrong_password():
    for password, ok in (("s3cret", True), ("nope", False)):
        session = _auth_session("scram-sha-256")
        assert session.take() == [m.AuthenticationSASL(("SCRAM-SHA-256",))]
        client = scramp.ScramClient(["SCRAM-SHA-256"], "cube", password)
        first = client.get_client_first().encode()
        session.handle(
            m.PasswordMessage(b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
        )
        (cont,) = session.take()
        client.set_server_first(cont.data.decode())
        session.handle(m.PasswordMessage(client.get_client_final().encode()))
        out = session.take()
        if ok:
            assert isinstance(out[0], m.AuthenticationSASLFinal)
            client.set_server_final(out[0].data.decode())
            assert out[1] == m.AuthenticationOk() and out[-1] == m.ReadyForQuery("I")
        else:
            assert sqlstates(out) == ["28P01"] and session.closed


# --- simple query ----------------------------------------------------------------------


def test_multi_statement_query_and_tags():
    session = make()
    out = run(
        session, m.Query("QUEUE ADD PRIORITY 1 'ss:a' 'p1'; QUEUE ADD 'ss:b' 'p2'; QUEUE LIST 'ss'")
    )
    tags = [msg.tag for msg in out if isinstance(msg, m.CommandComplete)]
    assert tags == ["QUEUE ADD 1", "QUEUE ADD 1", "QUEUE LIST 2"]
    assert out[-1] == m.ReadyForQuery("I")
    assert kinds(out).count("ReadyForQuery") == 1


def test_error_skips_the_rest_of_the_query():
    session = make()
    out = run(session, m.Query("QUEUE ADD 'se:a' 'x'; QUEUE NOPE; QUEUE ADD 'se:b' 'y'"))
    assert sqlstates(out) == ["42601"]
    assert [msg.tag for msg in out if isinstance(msg, m.CommandComplete)] == ["QUEUE ADD 1"]
    out = run(session, m.Query("QUEUE LIST 'se'"))
    (row,) = [msg for msg in out if isinstance(msg, m.DataRow)]  # only 'se:a' was added
    assert row.values[0] == b"a"


def test_empty_query():
    session = make()
    assert run(session, m.Query("")) == [m.EmptyQueryResponse(), m.ReadyForQuery("I")]
    assert run(session, m.Query("  ;  ")) == [m.EmptyQueryResponse(), m.ReadyForQuery("I")]


def test_empty_frame_has_no_row_description():
    session = make()
    run(session, m.Query("QUEUE ADD 'sh:a' 'x'"))
    out = run(session, m.Query("QUEUE HEARTBEAT 'sh:a'"))
    assert out == [m.CommandComplete("QUEUE HEARTBEAT"), m.ReadyForQuery("I")]


def test_placeholder_in_simple_query_is_42p02():
    session = make()
    assert sqlstates(run(session, m.Query("QUEUE GET $1"))) == ["42P02"]


def test_transaction_status_and_failed_block():
    session = make()
    assert run(session, m.Query("BEGIN"))[-1] == m.ReadyForQuery("T")
    out = run(session, m.Query("QUEUE ADD 'st:a' 'x'"))
    assert out[-1] == m.ReadyForQuery("T")  # queue commands run at once inside a block
    out = run(session, m.Query("QUEUE NOPE"))
    assert out[-1] == m.ReadyForQuery("E")
    out = run(session, m.Query("QUEUE LIST 'st'"))
    assert sqlstates(out) == ["25P02"] and out[-1] == m.ReadyForQuery("E")
    out = run(session, m.Query("ROLLBACK"))
    assert m.CommandComplete("ROLLBACK") in out and out[-1] == m.ReadyForQuery("I")
    out = run(session, m.Query("QUEUE LIST 'st'"))
    assert kinds(out).count("DataRow") == 1  # the ADD was not rolled back


def test_internal_error_is_xx000_and_session_survives(monkeypatch):
    session = make()

    def boom(cmd, process_id=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(session.ctx.executor.store, "execute", boom)
    out = run(session, m.Query("QUEUE LIST 'sx'"))
    assert sqlstates(out) == ["XX000"] and out[-1] == m.ReadyForQuery("I")
    monkeypatch.undo()
    out = run(session, m.Query("QUEUE LIST 'sx'"))
    assert out[-1] == m.ReadyForQuery("I") and not sqlstates(out)


# --- extended query --------------------------------------------------------------------


def test_parse_describe_bind_execute():
    session = make()
    out = run(
        session,
        m.Parse("add", "QUEUE ADD PRIORITY $1 $2 $3"),
        m.Describe("S", "add"),
        m.Bind("", "add", (1, 0, 0), (struct.pack("!q", 3), b"se2:a", b"{}"), (1,)),
        m.Describe("P", ""),
        m.Execute("", 0),
        m.Sync(),
    )
    assert out[0] == m.ParseComplete()
    assert out[1] == m.ParameterDescription((20, 25, 25))
    # id is int8 on the PostgreSQL wire (docs/dialect.md §8 rule 6)
    assert [f.type_oid for f in out[2].fields] == [20, 16, 20]
    assert out[3] == m.BindComplete()
    assert [f.format for f in out[4].fields] == [1, 1, 1]
    assert out[5] == m.DataRow((struct.pack("!q", 1), b"\x01", struct.pack("!q", 1)))
    assert out[6:] == [m.CommandComplete("QUEUE ADD 1"), m.ReadyForQuery("I")]


def test_key_is_id_only_when_declared_integer_or_cast():
    session = make()
    run(session, m.Query("QUEUE ADD 'sk:7' 'payload'"))
    get = m.Parse("", "QUEUE GET $1", (21,))
    out = run(session, get, m.Bind("", "", (1,), (struct.pack("!h", 1),)), m.Execute(""), m.Sync())
    assert m.DataRow((b"payload", None)) in out
    # declared text, "1": a path, which does not exist
    out = run(session, m.Parse("", "QUEUE GET $1", (25,)), m.Bind("", "", (), (b"1",)), m.Execute(""))
    assert kinds(run(session, m.Sync())) == ["ReadyForQuery"]
    assert "DataRow" not in kinds(out)
    # OID 0 (untyped), all digits: the id (docs/dialect.md §8 rule 5)
    out = run(session, m.Parse("", "QUEUE GET $1"), m.Bind("", "", (), (b"1",)), m.Execute(""), m.Sync())
    assert m.DataRow((b"payload", None)) in out
    # a cast in the text: the id, and ParameterDescription says int8
    out = run(
        session,
        m.Parse("", "QUEUE GET $1::int8"),
        m.Describe("S", ""),
        m.Bind("", "", (), (b"1",)),
        m.Execute(""),
        m.Sync(),
    )
    assert m.ParameterDescription((20,)) in out
    assert m.DataRow((b"payload", None)) in out


def test_max_rows_suspends_the_portal():
    session = make()
    run(session, m.Query("QUEUE ADD 'sm:a' 'x'; QUEUE ADD 'sm:b' 'y'; QUEUE ADD 'sm:c' 'z'"))
    out = run(
        session,
        m.Parse("", "QUEUE LIST 'sm'"),
        m.Bind("", "", (), (), ()),
        m.Execute("", 2),
        m.Execute("", 2),
        m.Sync(),
    )
    assert kinds(out) == [
        "ParseComplete", "BindComplete", "DataRow", "DataRow", "PortalSuspended",
        "DataRow", "CommandComplete", "ReadyForQuery",
    ]  # fmt: skip
    assert out[-2] == m.CommandComplete("QUEUE LIST 1")
    # exactly max_rows rows: still suspended, as PostgreSQL does (asyncpg's fetchrow)
    out = run(session, m.Parse("", "QUEUE GET 'sm:a'"), m.Bind("", "", (), ()), m.Execute("", 1))
    assert kinds(out)[-1] == "PortalSuspended"
    run(session, m.Sync())


def test_error_skips_until_sync_then_recovers():
    session = make()
    out = run(
        session,
        m.Parse("", "QUEUE NOPE"),
        m.Bind("", "", (), ()),
        m.Describe("P", ""),
        m.Execute(""),
        m.Query("QUEUE LIST 'x'"),
        m.Sync(),
        m.Parse("", "QUEUE LIST 'x'"),
        m.Sync(),
    )
    assert kinds(out) == ["ErrorResponse", "ReadyForQuery", "ParseComplete", "ReadyForQuery"]


@pytest.mark.parametrize(
    ("msgs", "sqlstate", "message"),
    [
        ([m.Bind("", "nope", (), ())], "26000", 'prepared statement "nope" does not exist'),
        ([m.Describe("S", "nope")], "26000", 'prepared statement "nope" does not exist'),
        ([m.Execute("nope")], "34000", 'portal "nope" does not exist'),
        (
            [m.Parse("", "QUEUE GET $1"), m.Bind("", "", (), ())],
            "08P01",
            'bind message supplies 0 parameters, but prepared statement "" requires 1',
        ),
        (
            [m.Parse("", "QUEUE LIST 'a'"), m.Bind("", "", (), (), (0, 1))],
            "08P01",
            "bind message has 2 result formats but 4 results",
        ),
        ([m.Parse("", "QUEUE LIST 'a'"), m.Bind("", "", (), (), (7,))], "22023", None),
        ([m.Parse("s", "QUEUE LIST 'a'"), m.Parse("s", "QUEUE LIST 'b'")], "42P05", None),
        ([m.Parse("", "QUEUE LIST 'a'; QUEUE LIST 'b'")], "42601", None),
        (
            [m.Parse("", "QUEUE GET $1", (20,)), m.Bind("", "", (1,), (b"\x01",))],
            "22P03",
            None,
        ),
        ([m.Parse("", "QUEUE GET $1", (20,)), m.Bind("", "", (), (b"x",))], "22P02", None),
    ],
)
def test_extended_errors(msgs, sqlstate, message):
    session = make()
    out = run(session, *msgs, m.Sync())
    errors = [msg for msg in out if isinstance(msg, m.ErrorResponse)]
    assert [e.get("C") for e in errors] == [sqlstate]
    assert errors[0].get("S") == "ERROR"
    if message:
        assert errors[0].get("M") == message
    assert out[-1] == m.ReadyForQuery("I") and not session.closed


def test_close_and_named_statements():
    session = make()
    out = run(
        session,
        m.Parse("s1", "QUEUE LIST $1"),
        m.Close("S", "s1"),
        m.Close("S", "never-existed"),
        m.Bind("", "s1", (), (b"a",)),
        m.Sync(),
    )
    assert kinds(out) == ["ParseComplete", "CloseComplete", "CloseComplete", "ErrorResponse",
                          "ReadyForQuery"]  # fmt: skip


def test_empty_prepared_statement():
    session = make()
    out = run(
        session, m.Parse("", ""), m.Bind("", "", (), ()), m.Describe("P", ""), m.Execute(""),
        m.Sync(),
    )  # fmt: skip
    assert kinds(out) == ["ParseComplete", "BindComplete", "NoData", "EmptyQueryResponse",
                          "ReadyForQuery"]  # fmt: skip


def test_plain_sql_describe_and_effects():
    session = make()
    out = run(session, m.Parse("", "SELECT 1"), m.Describe("S", ""), m.Sync())
    assert out[2] == m.RowDescription((m.FieldDescription("?column?", 23, 4),))
    run(session, m.Parse("keep", "QUEUE LIST 'a'"), m.Sync())
    out = run(session, m.Query("DEALLOCATE ALL"))
    assert m.CommandComplete("DEALLOCATE ALL") in out
    assert sqlstates(run(session, m.Describe("S", "keep"), m.Sync())) == ["26000"]


def test_set_application_name_resends_parameter_status():
    session = make()
    out = run(session, m.Query("SET application_name = 'PostgreSQL JDBC Driver'"))
    assert m.ParameterStatus("application_name", "PostgreSQL JDBC Driver") in out


def test_timestamps_text_and_binary():
    session = make()
    out = run(session, m.Query("SYS CLOCK FREEZE"))
    out = run(session, m.Query("SYS CLOCK"))
    (row,) = [msg for msg in out if isinstance(msg, m.DataRow)]
    assert row.values[0].endswith(b"+00") and b" " in row.values[0]
    out = run(session, m.Parse("", "SYS CLOCK"), m.Bind("", "", (), (), (1,)), m.Execute(""),
              m.Sync())  # fmt: skip
    (row2,) = [msg for msg in out if isinstance(msg, m.DataRow)]
    (micros,) = struct.unpack("!q", row2.values[0])
    assert micros % 1000 == 0 and micros > 0


# --- blocking --------------------------------------------------------------------------


def test_result_blocking_waits_and_resumes_mid_query():
    session = make()
    wait = session.handle(m.Query("QUEUE RESULT_BLOCKING 1000 'sb:a'; QUEUE ADD 'sb:z' 'x'"))
    assert isinstance(wait, WaitFor) and wait.command.key == "sb:a"
    rs = ResultSet(wait.command.result_columns(), [("done", "success", "1", None)])
    assert session.resume(rs) is None
    out = session.take()
    assert m.DataRow((b"done", b"success", b"1", None)) in out
    tags = [msg.tag for msg in out if isinstance(msg, m.CommandComplete)]
    assert tags == ["QUEUE RESULT_BLOCKING 1", "QUEUE ADD 1"]


def test_cancelled_wait_is_57014_and_skips_until_sync():
    session = make()
    session.handle(m.Parse("", "QUEUE RESULT_BLOCKING 1000 $1"))
    session.handle(m.Bind("", "", (), (b"sc:a",)))
    wait = session.handle(m.Execute(""))
    assert isinstance(wait, WaitFor)
    session.resume(error=QueryCanceled("canceling statement due to user request"))
    out = run(session, m.Execute(""), m.Sync())
    assert sqlstates(out) == ["57014"]
    assert kinds(out) == ["ParseComplete", "BindComplete", "ErrorResponse", "ReadyForQuery"]


def test_shutdown_is_fatal_57p01():
    session = make()
    session.shutdown()
    (err,) = session.take()
    assert (err.get("S"), err.get("C")) == ("FATAL", "57P01")
    assert err.get("M") == "terminating connection due to administrator command"


def test_config_replace_is_usable():
    # guards the helper above: Config is a frozen dataclass
    assert replace(Config(), auth="md5").auth == "md5"


# --- what Parse/Bind cache per statement (the hot path keeps its answers) ---------------


def test_statement_caches_decoders_and_shapes_per_format_codes():
    session = make()
    run(session, m.Parse("r", "QUEUE RESULT $1"), m.Sync())
    stmt = session.names.statements["r"]
    for _ in range(2):
        text = run(session, m.Bind("", "r", (), (b"sq:a",), ()), m.Describe("P", ""), m.Sync())
        binary = run(session, m.Bind("", "r", (1,), (b"sq:a",), (1,)), m.Describe("P", ""))
        run(session, m.Sync())
        assert [f.format for f in text[1].fields] == [0, 0, 0, 0]
        assert [f.format for f in binary[1].fields] == [1, 1, 1, 1]
    # one decoder and one shape per distinct code list, reused by later Binds
    assert set(stmt._loaders) == {(), (1,)}
    assert set(stmt._shapes) == {(), (1,)}
    assert stmt.shape((1,)) is stmt.shape((1,))
    assert stmt.shape(()).description != stmt.shape((1,)).description


def test_bad_format_codes_are_refused_every_time_and_never_cached():
    session = make()
    run(session, m.Parse("r", "QUEUE RESULT $1"), m.Sync())
    for _ in range(2):
        out = run(session, m.Bind("", "r", (2,), (b"sq:a",), ()), m.Sync())
        assert sqlstates(out) == ["22023"]
        out = run(session, m.Bind("", "r", (), (b"sq:a",), (0, 1)), m.Sync())
        assert sqlstates(out) == ["08P01"]
    stmt = session.names.statements["r"]
    assert (2,) not in stmt._loaders and (0, 1) not in stmt._shapes


def test_binary_parameter_error_names_its_position_from_the_cached_decoder():
    session = make()
    run(session, m.Parse("a", "QUEUE ADD PRIORITY $1 $2 $3"), m.Sync())
    for _ in range(2):  # the second Bind uses the cached decoder
        out = run(session, m.Bind("", "a", (1, 0, 0), (b"\x01", b"sb:x", b"{}")), m.Sync())
        assert sqlstates(out) == ["22P03"]
        assert out[0].get("M") == "incorrect binary data format in bind parameter 1"


def test_describe_statement_reply_is_cached_and_unchanged_by_binds():
    session = make()
    first = run(session, m.Parse("l", "QUEUE LIST $1"), m.Describe("S", "l"), m.Sync())
    run(session, m.Bind("", "l", (), (b"sd",), (1,)), m.Execute(""), m.Sync())
    again = run(session, m.Describe("S", "l"), m.Sync())
    assert again[:2] == first[1:3]
    assert all(f.format == 0 for f in again[1].fields)


def test_simple_query_text_is_split_the_same_when_cached():
    session = make()
    for _ in range(3):
        out = run(session, m.Query("SELECT 1; SELECT 2"))
        assert [msg.values for msg in out if isinstance(msg, m.DataRow)] == [(b"1",), (b"2",)]
    long = "SELECT 1;" + " " * 300 + "SELECT 'x;y'"
    out = run(session, m.Query(long))
    assert [msg.values for msg in out if isinstance(msg, m.DataRow)] == [(b"1",), (b"x;y",)]


def test_two_waits_in_one_query_resume_in_order():
    session = make()
    sql = "QUEUE RESULT_BLOCKING 1000 'sw:a'; QUEUE RESULT_BLOCKING 1000 'sw:b'; SELECT 1"
    wait = session.handle(m.Query(sql))
    assert isinstance(wait, WaitFor) and wait.command.key == "sw:a"
    rs = ResultSet(wait.command.result_columns(), [("a", "success", "1", None)])
    wait = session.resume(rs)
    assert isinstance(wait, WaitFor) and wait.command.key == "sw:b"
    assert session.resume(error=QueryCanceled("canceling statement due to user request")) is None
    out = session.take()
    assert kinds(out)[-2:] == ["ErrorResponse", "ReadyForQuery"]
    assert sqlstates(out) == ["57014"]
    assert m.DataRow((b"a", b"success", b"1", None)) in out
    assert m.DataRow((b"1",)) not in out


def test_take_bytes_is_the_encoding_of_take():
    from cubequeue.server.pgwire.encoder import encode_many

    a, b = make(), make()
    msgs = (m.Parse("", "QUEUE LIST $1"), m.Bind("", "", (), (b"st",)), m.Execute(""), m.Sync())
    for msg in msgs:
        a.handle(msg)
        b.handle(msg)
    assert a.take_bytes() == encode_many(b.take())
    assert a.take_bytes() == b"" and b.take() == []
