"""The PostgreSQL session's states and every legal transition, in one table.

PostgreSQL 15's "Message Flow" (protocol-flow.html), read as a state machine:

* ``startup`` → ``auth`` (a password or SASL exchange) → ``ready``;
* ``ready`` ⇄ ``awaiting-sync``: after an error in the extended protocol every message
  but Sync and Terminate is skipped until the next Sync;
* ``closed`` after Terminate or any FATAL error.

:data:`TRANSITIONS` maps ``(state, message type)`` to a :class:`Rule`: the session's
action for the message, the state after it succeeds and the state after it fails. A pair
that is not in the table is a protocol violation (:func:`rule_for` raises
:class:`IllegalTransition` naming both). Failing into ``closed`` means the error is FATAL.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, get_args

from cubequeue.server.errors import ProtocolViolation
from cubequeue.server.pgwire import messages as m

__all__ = ["TRANSITIONS", "Action", "IllegalTransition", "Rule", "SessionState", "rule_for"]


class SessionState(enum.Enum):
    # every message looks its rule up by (state, type): Enum's own __hash__ is a Python
    # call (hash of the name), a member's identity hash is C and as good (singletons)
    __hash__ = object.__hash__

    STARTUP = "startup"
    AUTH = "auth"
    READY = "ready"
    AWAITING_SYNC = "awaiting-sync"
    CLOSED = "closed"


class Action(enum.Enum):
    """What the session does with a message (one method of ``PgSession`` each)."""

    __hash__ = object.__hash__  # as SessionState's

    STARTUP = "startup"
    PASSWORD = "password"
    QUERY = "query"
    PARSE = "parse"
    BIND = "bind"
    DESCRIBE = "describe"
    EXECUTE = "execute"
    CLOSE = "close"
    SYNC = "sync"
    FUNCTION_CALL = "function_call"
    #: nothing to do: Flush (output is written after every batch of input anyway), COPY
    #: messages outside COPY (PostgreSQL ignores them), anything while awaiting Sync
    IGNORE = "ignore"
    TERMINATE = "terminate"


@dataclass(frozen=True, slots=True)
class Rule:
    action: Action
    #: the state after the action succeeds; None when the action decides (authentication
    #: may take more than one message)
    next: SessionState | None
    #: the state after the action fails (CLOSED: the error is FATAL)
    on_error: SessionState


class IllegalTransition(ProtocolViolation):
    """A message the protocol does not allow in the session's state (08P01, FATAL)."""

    def __init__(self, state: SessionState, message: type) -> None:
        super().__init__(f"unexpected {message.__name__} message in state {state.value}")
        self.state = state
        self.message_type = message


_S = SessionState
_READY_RULES: Final[dict[type, Rule]] = {
    m.Query: Rule(Action.QUERY, _S.READY, _S.READY),
    m.Parse: Rule(Action.PARSE, _S.READY, _S.AWAITING_SYNC),
    m.Bind: Rule(Action.BIND, _S.READY, _S.AWAITING_SYNC),
    m.Describe: Rule(Action.DESCRIBE, _S.READY, _S.AWAITING_SYNC),
    m.Execute: Rule(Action.EXECUTE, _S.READY, _S.AWAITING_SYNC),
    m.Close: Rule(Action.CLOSE, _S.READY, _S.AWAITING_SYNC),
    m.Sync: Rule(Action.SYNC, _S.READY, _S.READY),
    m.Flush: Rule(Action.IGNORE, _S.READY, _S.READY),
    m.CopyData: Rule(Action.IGNORE, _S.READY, _S.READY),
    m.CopyDone: Rule(Action.IGNORE, _S.READY, _S.READY),
    m.CopyFail: Rule(Action.IGNORE, _S.READY, _S.READY),
    m.FunctionCall: Rule(Action.FUNCTION_CALL, _S.READY, _S.READY),
    m.Terminate: Rule(Action.TERMINATE, _S.CLOSED, _S.CLOSED),
}
_SKIP = Rule(Action.IGNORE, _S.AWAITING_SYNC, _S.AWAITING_SYNC)

#: (state, message type) → rule; every pair not listed is an :class:`IllegalTransition`
TRANSITIONS: Final[dict[tuple[SessionState, type], Rule]] = {
    (_S.STARTUP, m.StartupMessage): Rule(Action.STARTUP, None, _S.CLOSED),
    (_S.AUTH, m.PasswordMessage): Rule(Action.PASSWORD, None, _S.CLOSED),
    **{(_S.READY, kind): rule for kind, rule in _READY_RULES.items()},
    **{(_S.AWAITING_SYNC, kind): _SKIP for kind in get_args(m.FrontendMessage)},
    (_S.AWAITING_SYNC, m.Sync): Rule(Action.SYNC, _S.READY, _S.READY),
    (_S.AWAITING_SYNC, m.Terminate): Rule(Action.TERMINATE, _S.CLOSED, _S.CLOSED),
}


def rule_for(state: SessionState, message: type) -> Rule:
    """The rule for ``message`` in ``state``; raises :class:`IllegalTransition`."""
    rule = TRANSITIONS.get((state, message))
    if rule is None:
        raise IllegalTransition(state, message)
    return rule
