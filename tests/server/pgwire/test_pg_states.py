"""The PostgreSQL session against a fake executor with no store: the transition table,
and the exact bytes each script of frontend messages gets back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import pytest

from cubequeue.grammar import param_slots, parse
from cubequeue.grammar.commands import Command
from cubequeue.grammar.errors import InternalError, QueueError
from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.config import Config
from cubequeue.server.errors import InFailedTransaction
from cubequeue.server.executor import Prepared, Step, WaitFor
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.encoder import encode_many
from cubequeue.server.pgwire.session import PgSession
from cubequeue.server.pgwire.states import (
    TRANSITIONS,
    Action,
    IllegalTransition,
    SessionState,
    rule_for,
)
from cubequeue.server.sql import PlainOutcome, PlainSession
from cubequeue.server.sql.outcome import PlainDescription

P3 = 196608
FRONTEND = get_args(m.FrontendMessage)
_VALUE = (Column("value", ColumnType.STRING),)


@dataclass
class FakeExecutor:
    """Answers every dialect statement with ``rows`` (or a wait), every plain one with
    ``plain``; records what ran. No store behind it."""

    rows: list[tuple[Any, ...]] = field(default_factory=lambda: [("v",)])
    wait: bool = False
    plain_outcome: PlainOutcome = field(default_factory=lambda: PlainOutcome(None, "SET"))
    ran: list[str] = field(default_factory=list)

    def _step(self, cmd: Command, process_id: str | None) -> Step:
        self.ran.append(cmd.tag)
        if self.wait:
            return WaitFor(cmd, process_id, asyncio.sleep(0, ResultSet(_VALUE, [])))
        return ResultSet(_VALUE, list(self.rows))

    def statement(self, sql: str, session: PlainSession, process_id: str | None,
                  binder: Any = None, params: Sequence[str | None] = (), *,
                  origin: Any = None) -> tuple[Command, Step] | PlainOutcome:
        if sql.upper().startswith("QUEUE"):
            if session.tx_status == "E":
                raise InFailedTransaction("aborted")
            cmd = parse(sql)
            return cmd, self._step(cmd, process_id)
        self.ran.append(sql)
        return self.plain_outcome

    def describe(self, sql: str, session: PlainSession, *,
                 origin: Any = None) -> Prepared | PlainDescription:
        if sql.upper().startswith("QUEUE"):
            cmd = parse(sql)
            return Prepared(sql, cmd, tuple(param_slots(cmd)), _VALUE)
        return PlainDescription(0, None, None)

    def run(self, cmd: Command, process_id: str | None = None, *, text: str = "",
            origin: Any = None) -> Step:
        return self._step(cmd, process_id)

    def plain(self, sql: str, session: PlainSession, params: Sequence[str | None] = (), *,
              origin: Any = None) -> PlainOutcome:
        self.ran.append(sql)
        return self.plain_outcome

    def check_open(self, session: PlainSession, statement_ends_block: bool, *,
                   text: str = "", origin: Any = None) -> None:
        if session.tx_status == "E" and not statement_ends_block:
            raise InFailedTransaction("aborted")

    def failed(self, session: PlainSession | None, exc: BaseException) -> QueueError:
        if session is not None:
            session.fail_transaction()
        return exc if isinstance(exc, QueueError) else InternalError(f"internal error: {exc}")


@dataclass
class FakeContext:
    executor: FakeExecutor = field(default_factory=FakeExecutor)
    config: Config = field(default_factory=Config)
    server_version: str = "15.18 (fake)"

    def password_for(self, user: str) -> str | None:
        return None


class Hooks:
    def admit(self, user: str) -> tuple[int, int]:
        return 1, 2


def ready(executor: FakeExecutor | None = None) -> PgSession:
    session = PgSession(FakeContext(executor or FakeExecutor()), Hooks())
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    session.take_bytes()
    return session


def feed(session: PgSession, *msgs: m.FrontendMessage) -> bytes:
    for msg in msgs:
        assert session.handle(msg) is None
    return session.take_bytes()


def row_description(name: str = "value") -> m.RowDescription:
    return m.RowDescription((m.FieldDescription(name, 25, -1, 0),))


# --- the table ---------------------------------------------------------------------------


def test_every_state_and_message_is_either_a_rule_or_an_illegal_transition() -> None:
    for state in SessionState:
        for kind in FRONTEND:
            if (state, kind) in TRANSITIONS:
                assert rule_for(state, kind) is TRANSITIONS[(state, kind)]
                continue
            with pytest.raises(IllegalTransition) as caught:
                rule_for(state, kind)
            assert caught.value.sqlstate == "08P01"
            assert kind.__name__ in caught.value.message and state.value in caught.value.message


def test_awaiting_sync_skips_everything_but_sync_and_terminate() -> None:
    for kind in FRONTEND:
        rule = rule_for(SessionState.AWAITING_SYNC, kind)
        if kind is m.Sync:
            assert (rule.action, rule.next) == (Action.SYNC, SessionState.READY)
        elif kind is m.Terminate:
            assert rule.next is SessionState.CLOSED
        else:
            assert (rule.action, rule.next) == (Action.IGNORE, SessionState.AWAITING_SYNC)


def test_an_illegal_message_is_one_fatal_error_naming_state_and_message() -> None:
    session = ready()
    out = feed(session, m.StartupMessage(P3, (("user", "cube"),)))
    (err,) = _decode(out)
    assert isinstance(err, m.ErrorResponse)
    assert (err.get("S"), err.get("C")) == ("FATAL", "08P01")
    assert err.get("M") == "unexpected StartupMessage message in state ready"
    assert session.closed
    assert feed(session, m.Query("QUEUE LIST 'a'")) == b""  # closed: nothing more


def _decode(data: bytes) -> list[m.BackendMessage]:
    from cubequeue.server.pgwire.client import BackendDecoder

    return BackendDecoder().feed(data)


# --- exact bytes out ---------------------------------------------------------------------


def test_simple_dialect_query_bytes() -> None:
    fake = FakeExecutor(rows=[("a",), ("b",)])
    out = feed(ready(fake), m.Query("QUEUE LIST 'q'"))
    assert out == encode_many([
        row_description(), m.DataRow((b"a",)), m.DataRow((b"b",)),
        m.CommandComplete("QUEUE LIST 2"), m.ReadyForQuery("I"),
    ])  # fmt: skip
    assert fake.ran == ["QUEUE LIST"]


def test_extended_dialect_bytes_and_the_portal_suspends() -> None:
    fake = FakeExecutor(rows=[("a",), ("b",), ("c",)])
    out = feed(
        ready(fake), m.Parse("", "QUEUE LIST 'q'"), m.Bind("", "", (), ()),
        m.Execute("", 2), m.Execute("", 2), m.Sync(),
    )  # fmt: skip
    assert out == encode_many([
        m.ParseComplete(), m.BindComplete(), m.DataRow((b"a",)), m.DataRow((b"b",)),
        m.PortalSuspended(), m.DataRow((b"c",)), m.CommandComplete("QUEUE LIST 1"),
        m.ReadyForQuery("I"),
    ])  # fmt: skip
    assert fake.ran == ["QUEUE LIST"]  # run once, sent in slices


def test_an_extended_error_skips_to_sync_in_the_table_s_error_state() -> None:
    session = ready()
    (err,) = _decode(feed(session, m.Bind("", "nope", (), ())))
    assert err.get("C") == "26000" and session.state is SessionState.AWAITING_SYNC
    out = feed(session, m.Execute(""), m.Query("QUEUE LIST 'q'"), m.Sync())
    assert [type(x).__name__ for x in _decode(out)] == ["ReadyForQuery"]
    assert session.state is SessionState.READY


def test_a_step_that_waits_suspends_and_resumes_where_it_stopped() -> None:
    fake = FakeExecutor(wait=True)
    session = ready(fake)
    wait = session.handle(m.Query("QUEUE LIST 'q'; SET a = 1"))
    assert isinstance(wait, WaitFor) and wait.pending is not None
    wait.pending.close()  # type: ignore[union-attr]  # the fake's coroutine, never awaited
    assert session.take_bytes() == b""
    assert session.resume(ResultSet(_VALUE, [("late",)])) is None
    assert session.take_bytes() == encode_many([
        row_description(), m.DataRow((b"late",)), m.CommandComplete("QUEUE LIST 1"),
        m.CommandComplete("SET"), m.ReadyForQuery("I"),
    ])  # fmt: skip
    assert fake.ran == ["QUEUE LIST", "SET a = 1"]


def test_a_failed_wait_in_execute_goes_to_awaiting_sync() -> None:
    session = ready(FakeExecutor(wait=True))
    feed(session, m.Parse("", "QUEUE LIST 'q'"), m.Bind("", "", (), ()))
    wait = session.handle(m.Execute(""))
    assert isinstance(wait, WaitFor)
    wait.pending.close()  # type: ignore[union-attr]
    assert session.resume(error=RuntimeError("disk on fire")) is None
    assert session.state is SessionState.AWAITING_SYNC
    (err,) = _decode(session.take_bytes())
    assert (err.get("S"), err.get("C"), err.get("M")) == ("ERROR", "XX000", "internal error: disk on fire")


def test_plain_effects_reach_the_names_through_one_place() -> None:
    fake = FakeExecutor(plain_outcome=PlainOutcome(None, "DEALLOCATE ALL", effect="deallocate_all"))
    session = ready(fake)
    feed(session, m.Parse("kept", "QUEUE LIST 'q'"), m.Sync())
    assert "kept" in session.names.statements
    out = feed(session, m.Query("DEALLOCATE ALL"))
    assert out == encode_many([m.CommandComplete("DEALLOCATE ALL"), m.ReadyForQuery("I")])
    assert session.names.statements == {}


def test_failed_block_refuses_execute_but_not_a_block_end() -> None:
    fake = FakeExecutor()
    session = ready(fake)
    assert session.plain is not None
    session.plain.begin()
    session.plain.fail_transaction()
    feed(session, m.Parse("q", "QUEUE LIST 'q'"), m.Parse("r", "ROLLBACK"), m.Sync())
    out = _decode(feed(session, m.Bind("", "q", (), ()), m.Sync()))
    assert [x.get("C") for x in out if isinstance(x, m.ErrorResponse)] == ["25P02"]
    fake.plain_outcome = PlainOutcome(None, "ROLLBACK", tx="rollback")
    out = _decode(feed(session, m.Bind("", "r", (), ()), m.Execute(""), m.Sync()))
    assert m.CommandComplete("ROLLBACK") in out


def test_session_needs_only_the_context_protocol() -> None:
    build: Callable[[], PgSession] = lambda: PgSession(FakeContext(), Hooks())  # noqa: E731
    session = build()
    assert session.state is SessionState.STARTUP
    session.handle(m.StartupMessage(P3, (("user", "cube"),)))
    out = _decode(session.take_bytes())
    assert m.ParameterStatus("server_version", "15.18 (fake)") in out
    assert out[-1] == m.ReadyForQuery("I")
