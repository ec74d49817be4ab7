"""PgSession.handle_run (a batch's messages in one call) answers exactly as handle()
one message at a time: the same bytes, states and transaction status, errors and the
skip-until-Sync included; it stops before a listener's own message and after a wait."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.server.app import build_context
from cubequeue.server.config import Config
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.session import PgSession

P3 = 196608


class Hooks:
    def admit(self, user: str) -> tuple[int, int]:
        return 4242, -7


def make() -> PgSession:
    session = PgSession(build_context(Config(test_clock=True)), Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    session.take_bytes()
    return session


_MSGS = st.sampled_from([
    m.Parse("s1", "SELECT 1", ()), m.Parse("", "QUEUE GET $1", (25,)),
    m.Parse("", "SELECT nonsense(", ()), m.Parse("s1", "SELECT 2", ()),
    m.Bind("", "s1", (), (), ()), m.Bind("", "", (), (b"q:1",), ()),
    m.Bind("p", "s1", (), (), ()), m.Bind("", "missing", (), (), ()),
    m.Describe("P", ""), m.Describe("S", "s1"), m.Execute("", 0), m.Execute("", 1),
    m.Execute("p", 0), m.Sync(), m.Flush(), m.Query("BEGIN"), m.Query("ROLLBACK"),
    m.Query("SELECT 1/0"), m.Query("CACHE SET 'k' 'v'"), m.Close("P", ""),
])


def _one_by_one(msgs: list[m.FrontendMessage]) -> tuple[bytes, object, str]:
    session = make()
    for msg in msgs:
        assert session.handle(msg) is None
    return session.take_bytes(), session.state, session.tx_status


@settings(deadline=None, max_examples=120)
@given(st.lists(_MSGS, max_size=30))
def test_handle_run_answers_as_handle(msgs):
    session = make()
    done, wait = session.handle_run(msgs, 0, frozenset())
    assert (done, wait) == (len(msgs), None)
    assert (session.take_bytes(), session.state, session.tx_status) == _one_by_one(msgs)


def test_handle_run_stops_before_the_listeners_own_messages():
    session = make()
    msgs = [m.Parse("s1", "SELECT 1", ()), m.Sync(), m.CancelRequest(1, 2), m.Sync()]
    assert session.handle_run(msgs, 0, frozenset({m.CancelRequest})) == (2, None)
    assert session.handle_run(msgs, 3, frozenset({m.CancelRequest})) == (4, None)


def test_handle_run_stops_after_a_wait():
    session = make()
    msgs = [m.Query("QUEUE RESULT_BLOCKING 1000 'q:1'"), m.Query("SELECT 1")]
    done, wait = session.handle_run(msgs, 0, frozenset())
    assert done == 1 and wait is not None and wait.blocking
