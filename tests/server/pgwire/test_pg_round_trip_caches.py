"""What the round trip keeps between messages: the decoder's remembered frames, the
reused unnamed statement, the constant replies, the listener's direct path. Each keeps
answers exactly as without it: socket-free scripts through PgSession, plus a real
server driven by psycopg and asyncpg."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.client import encode_frontend
from cubequeue.server.pgwire.decoder import Decoder
from cubequeue.server.pgwire.session import PgSession

P3 = 196608


class Hooks:
    def admit(self, user: str) -> tuple[int, int]:
        return 4242, -7


def make() -> PgSession:
    session = PgSession(build_context(Config(test_clock=True)), Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    session.take()
    return session


def run(session: PgSession, *msgs: m.FrontendMessage) -> list[m.BackendMessage]:
    for msg in msgs:
        assert session.handle(msg) is None
    return session.take()


def extended(sql: str, oids: tuple[int, ...] = (), params: tuple[bytes | None, ...] = ()
             ) -> tuple[m.FrontendMessage, ...]:
    return (m.Parse("", sql, oids), m.Bind("", "", (), params, ()), m.Describe("P", ""),
            m.Execute("", 0), m.Sync())


# --- decoder ---------------------------------------------------------------------------


_FRAMES = st.sampled_from([
    m.Query("SELECT 1"), m.Query("BEGIN"), m.Sync(), m.Describe("P", ""), m.Execute("", 0),
    m.Execute("", 5), m.Parse("", "QUEUE GET $1", (25,)), m.Parse("s1", "SELECT 1", ()),
    m.Bind("", "", (), (b"q:1",), ()), m.Bind("", "", (), (b"q:2",), ()),
    m.Bind("", "s1", (1,), (b"\x00\x01",), (1,)), m.Query("SELECT '" + "x" * 200 + "'"),
])


@settings(deadline=None, max_examples=60)
@given(st.lists(_FRAMES, max_size=60), st.integers(1, 64))
def test_remembered_frames_decode_as_fresh_ones(msgs, chunk):
    """A decoder that has seen frames (more than it remembers) answers what a fresh
    decoder answers, whole or split at any chunk size."""
    data = b"".join(encode_frontend(x) for x in msgs)
    warm = Decoder()
    warm.expect_startup = False
    warm.feed(data)  # every frame seen once
    out = [msg for i in range(0, len(data), chunk) for msg in warm.feed(data[i : i + chunk])]
    assert out == list(msgs)
    assert warm.buffered == 0


def test_password_frames_are_never_remembered():
    decoder = Decoder()
    decoder.expect_startup = False
    frame = encode_frontend(m.PasswordMessage(b"secret\x00"))
    assert decoder.feed(frame) == decoder.feed(frame) == [m.PasswordMessage(b"secret\x00")]
    assert not decoder._seen  # the map itself is what must stay empty


# --- the unnamed statement ---------------------------------------------------------------


def test_unnamed_parse_of_the_same_text_keeps_the_statement_and_answers_the_same():
    session = make()
    first = run(session, *extended("SELECT 1"))
    kept = session.names.statements[""]
    again = run(session, *extended("SELECT 1"))
    assert session.names.statements[""] is kept
    assert again == first
    assert [type(x).__name__ for x in again] == [
        "ParseComplete", "BindComplete", "RowDescription", "DataRow", "CommandComplete",
        "ReadyForQuery"]


def test_unnamed_parse_is_rebuilt_when_the_text_or_the_declared_types_change():
    session = make()
    run(session, *extended("QUEUE ADD 'q:a' '{}'"))
    run(session, *extended("CACHE GET $1", (25,), (b"c:k",)))
    text = session.names.statements[""]
    out = run(session, *extended("QUEUE GET $1", (20,), (b"1",)))
    assert session.names.statements[""] is not text
    assert [type(x).__name__ for x in out][-2:] == ["CommandComplete", "ReadyForQuery"]
    run(session, m.Parse("", "CACHE GET $1", (25,)), m.Sync())
    assert session.names.statements[""] is not text  # rebuilt after another text
    declared = session.names.statements[""]
    run(session, m.Parse("", "CACHE GET $1", ()), m.Sync())  # untyped now
    assert session.names.statements[""] is not declared


def test_closed_or_deallocated_unnamed_statement_is_parsed_again():
    session = make()
    run(session, *extended("SELECT 1"))
    kept = session.names.statements[""]
    run(session, m.Close("S", ""), m.Sync())
    run(session, *extended("SELECT 1"))
    assert session.names.statements[""] is not kept
    kept = session.names.statements[""]
    run(session, m.Query("DEALLOCATE ALL"))
    run(session, *extended("SELECT 1"))
    assert session.names.statements[""] is not kept


def test_catalog_statements_are_described_again_each_time():
    """A catalog query's columns may come from the session: never kept."""
    session = make()
    sql = "SELECT typname FROM pg_catalog.pg_type WHERE typname = 'int4'"
    first_out = run(session, *extended(sql))
    first = session.names.statements[""]
    assert first.reuse is None
    assert run(session, *extended(sql)) == first_out
    assert session.names.statements[""] is not first


def test_a_session_dependent_select_keeps_its_statement_but_runs_each_time():
    session = make()
    sql = "SELECT current_setting('application_name')"
    run(session, *extended(sql))
    kept = session.names.statements[""]
    run(session, m.Query("SET application_name = 'changed'"))
    out = run(session, *extended(sql))
    assert session.names.statements[""] is kept
    assert m.DataRow((b"changed",)) in out


def test_a_refused_unnamed_parse_is_counted_each_time():
    session = make()
    for _ in range(2):
        out = run(session, m.Parse("", "CREATE TABLE t (a int)", ()), m.Sync())
        assert [x.get("C") for x in out if isinstance(x, m.ErrorResponse)] == ["0A000"]
    assert "" not in session.names.statements


# --- constant replies ------------------------------------------------------------------


def test_constant_select_1_still_refused_in_a_failed_block_and_counted():
    session = make()
    run(session, m.Query("SELECT 1"))
    run(session, m.Query("BEGIN"))
    out = run(session, m.Query("QUEUE NOPE"))
    assert out[-1] == m.ReadyForQuery("E")
    out = run(session, m.Query("SELECT 1"))
    assert [x.get("C") for x in out if isinstance(x, m.ErrorResponse)] == ["25P02"]
    run(session, m.Query("ROLLBACK"))
    out = run(session, m.Query("SELECT 1"))
    assert out == [m.RowDescription((m.FieldDescription("?column?", 23, 4),)),
                   m.DataRow((b"1",)), m.CommandComplete("SELECT 1"), m.ReadyForQuery("I")]
    body = session.ctx.metrics.render()[0].decode()  # type: ignore[attr-defined]
    assert 'cubequeue_commands_total{command="SELECT",outcome="ok"} 2.0' in body
    assert 'cubequeue_commands_total{command="SELECT",outcome="25P02"} 1.0' in body


def test_constant_reply_is_the_same_after_settings_change():
    session = make()
    first = run(session, m.Query("SELECT 1; SELECT pg_advisory_unlock_all(); UNLISTEN *"))
    run(session, m.Query("SET TimeZone = 'Europe/Paris'"))
    run(session, m.Query("SET application_name = 'x'"))
    assert run(session, m.Query("SELECT 1; SELECT pg_advisory_unlock_all(); UNLISTEN *")) == first


def test_constant_execute_per_result_format_and_an_exhausted_portal():
    session = make()
    text = run(session, *extended("SELECT 1"))
    assert m.DataRow((b"1",)) in text
    binary = run(session, m.Parse("", "SELECT 1", ()), m.Bind("", "", (), (), (1,)),
                 m.Execute("", 0), m.Sync())
    assert m.DataRow((b"\x00\x00\x00\x01",)) in binary
    for _ in range(2):  # the kept reply, then the same for a second portal
        again = run(session, m.Bind("", "", (), (), (1,)), m.Execute("", 0), m.Sync())
        assert again == [m.BindComplete(), m.DataRow((b"\x00\x00\x00\x01",)),
                         m.CommandComplete("SELECT 1"), m.ReadyForQuery("I")]
    out = run(session, m.Query("BEGIN"), m.Bind("", "", (), (), ()), m.Execute("", 0),
              m.Execute("", 0), m.Sync())
    assert out[-4:] == [m.DataRow((b"1",)), m.CommandComplete("SELECT 1"),
                        m.CommandComplete("SELECT 0"), m.ReadyForQuery("T")]
    limited = run(session, m.Bind("", "", (), (), ()), m.Execute("", 1), m.Sync())
    assert limited[-3:] == [m.DataRow((b"1",)), m.PortalSuspended(), m.ReadyForQuery("T")]


# --- a real server -----------------------------------------------------------------------


def test_psycopg_unnamed_statements_repeat_and_change(cubequeue_server):
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        for i in range(3):
            assert conn.execute("SELECT 1").fetchone() == (1,)
            row = conn.execute("QUEUE ADD PRIORITY 1 %s %s", (f"rt:{i}", "{}")).fetchone()
            assert row is not None and row[1] is True
            got = conn.execute("QUEUE GET %s", (f"rt:{i}",)).fetchone()
            assert got is not None and got[0] == "{}"
        pending = conn.execute("QUEUE PENDING %s", ("rt",)).fetchall()
        assert len(pending) == 3


def test_messages_behind_a_wait_are_answered_after_it_in_order(cubequeue_server):
    """One pipelined batch whose first statement waits (RESULT_BLOCKING on an absent
    key, a real 200 ms wait): the rest is queued behind it and answered in order."""
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        with conn.pipeline():
            blocking = conn.execute("QUEUE RESULT_BLOCKING 200 %s", ("pipe:none",))
            ones = [conn.execute("SELECT 1") for _ in range(5)]
            cached = conn.execute("CACHE GET %s", ("pipe:c",))
        assert blocking.fetchall() == []
        assert [c.fetchone() for c in ones] == [(1,)] * 5
        assert cached.fetchone() == (None,)


async def _asyncpg_round_trips(dsn: str) -> list[object]:
    conn = await asyncpg.connect(dsn)
    try:
        stmt = await conn.prepare("QUEUE GET $1")
        return [await conn.fetchval("SELECT 1"), await stmt.fetchrow("rt:none"),
                await conn.fetchval("SELECT 1")]
    finally:
        await conn.close()


def test_asyncpg_named_and_unnamed_statements(cubequeue_server):
    assert asyncio.run(_asyncpg_round_trips(cubequeue_server.dsn)) == [1, None, 1]


@pytest.mark.parametrize("n", [1, 50])
def test_psycopg_pipeline_of_repeated_statements(cubequeue_server, n):
    with psycopg.connect(cubequeue_server.dsn, autocommit=True) as conn:
        with conn.pipeline():
            cursors = [conn.execute("SELECT 1") for _ in range(n)]
        assert [c.fetchone() for c in cursors] == [(1,)] * n


# --- the per-statement metrics ---------------------------------------------------------


_OBSERVATIONS = st.lists(st.tuples(
    st.sampled_from(["SELECT", "QUEUE ADD", "CACHE GET"]),
    st.sampled_from(["ok", "42601", "25P02"]),
    st.one_of(st.floats(0, 700, allow_nan=False),
              st.sampled_from([0.0, 0.0001, 0.00025, 0.001, 1.0, 600.0, 600.5])),
), max_size=40)


@settings(deadline=None, max_examples=40)
@given(_OBSERVATIONS)
def test_command_tallies_expose_what_prometheus_client_classes_would(observations):
    """The hot path counts in plain tallies; the exposition must be the one prometheus
    client's Counter and Histogram give for the same observations (bucket edges
    inclusive, cumulative buckets, order of first sight)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.exposition import generate_latest

    from cubequeue.server.metrics import LATENCY_BUCKETS

    ours = build_context(Config()).metrics
    registry = CollectorRegistry()
    counter = Counter("cubequeue_commands",
                      "Commands run, by command and outcome (ok or the SQLSTATE)",
                      ["command", "outcome"], registry=registry)
    latency = Histogram("cubequeue_command_duration_seconds",
                        "Command latency, RESULT_BLOCKING waits included", ["command"],
                        buckets=LATENCY_BUCKETS, registry=registry)
    for name, outcome, seconds in observations:
        ours.observe_command(name, outcome, seconds)
        counter.labels(name, outcome).inc()
        latency.labels(name).observe(seconds)

    def lines(body: bytes) -> list[str]:
        return [line for line in body.decode().splitlines()
                if "command" in line and "_created" not in line]

    assert lines(ours.render()[0]) == lines(generate_latest(registry))


# --- dialect text shapes and CommandComplete -------------------------------------------


def test_dialect_text_shapes_are_kept_per_schema_and_answer_as_fresh_ones() -> None:
    """A simple dialect Query's RowDescription and DataRows come from the session's
    per-schema shape; the same statements on a fresh session (cache empty) answer the
    same bytes, and a full map is cleared, not grown."""
    from cubequeue.server.pgwire import replies as session_module

    script = [m.Query("QUEUE ADD PRIORITY 1 'q:a' '{}'"), m.Query("CACHE SET 'c:k' 'v'"),
              m.Query("CACHE GET 'c:k'"), m.Query("QUEUE LIST 'q'"), m.Query("CACHE GET 'c:k'"),
              m.Query("QUEUE HEARTBEAT 1"), m.Query("QUEUE LIST 'q'")]  # fmt: skip
    warm = make()
    first = [run(warm, q) for q in script]
    again = [run(warm, q) for q in script[2:5]]
    assert again[0] == first[2] and again[2] == first[4]
    assert 0 < len(warm._text_shapes) <= session_module._MAX_TEXT_SHAPES
    fresh = make()
    assert [run(fresh, q) for q in script] == first
    listing = first[3]
    assert isinstance(listing[0], m.RowDescription)
    assert [f.name for f in listing[0].fields][:3] == ["id", "queue_id", "status"]
    assert isinstance(listing[-2], m.CommandComplete) and listing[-2].tag == "QUEUE LIST 1"


def test_command_complete_remembered_equals_encoded() -> None:
    from cubequeue.server.pgwire.client import BackendDecoder
    from cubequeue.server.pgwire.encoder import encode_command_complete

    for tag in ("QUEUE ACK", "QUEUE LIST 1", "SELECT 1", "QUEUE LIST 1", "é 2"):
        (msg,) = BackendDecoder().feed(encode_command_complete(tag))
        assert msg == m.CommandComplete(tag)
    assert encode_command_complete.cache_info().maxsize == 1024
