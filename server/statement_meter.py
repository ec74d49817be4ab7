"""The one count and the one log line of every statement, on both wires.

Each statement, dialect or plain SQL, is counted once in ``cubequeue_commands_total``
(through the ``observe`` hook: the dialect's command tag, or plain SQL's first word
upper-cased; outcome "ok" or the SQLSTATE) and logged once with
:func:`~cubequeue.server.logs.log_statement` (DEBUG with its duration, WARNING with its
SQLSTATE when refused or failed), naming the connection (:class:`Origin`). A dialect
command over ``--slow-command-ms`` is also logged as slow, except a blocking wait, whose
job is to wait. The executor (:mod:`.executor`) and the blocking wait
(:mod:`.blocking_wait`) both report here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from cubequeue.grammar.commands import Command
from cubequeue.grammar.errors import InternalError
from cubequeue.server.logs import log_statement, statement_log

__all__ = ["Observe", "Origin", "StatementMeter"]

#: the logger of slow commands and of our own failures while running one
_log = logging.getLogger("cubequeue.command")

#: ``observe(command_name, outcome, seconds)``; outcome is "ok" or the SQLSTATE.
Observe = Callable[[str, str, float], None]


@dataclass(frozen=True, slots=True)
class Origin:
    """Who sent a statement, for its log line: the wire, the connection and its user."""

    protocol: str
    conn_id: int | None = None
    peer: str | None = None
    user: str | None = None


class StatementMeter:
    """Counts and logs statements (the module docstring)."""

    __slots__ = ("_observe", "_slow_s")

    def __init__(self, observe: Observe | None, slow_command_ms: int) -> None:
        self._observe = observe
        self._slow_s = slow_command_ms / 1000

    def account(
        self, name: str, text: str, outcome: str, seconds: float, origin: Origin | None
    ) -> None:
        """The one count and the one log line of a statement (the line's arguments are
        built only when its level is on: DEBUG, for a statement that succeeded, is
        usually off)."""
        if self._observe is not None:
            self._observe(name, outcome, seconds)
        if outcome == "ok":
            if not statement_log.isEnabledFor(logging.DEBUG):
                return
            sqlstate = None
        else:
            sqlstate = outcome
        if origin is None:
            log_statement(name, text, sqlstate, seconds * 1000)
            return
        log_statement(name, text, sqlstate, seconds * 1000, protocol=origin.protocol,
                      conn_id=origin.conn_id, peer=origin.peer, user=origin.user)

    def finish(
        self, cmd: Command, outcome: str, started: float, text: str, origin: Origin | None
    ) -> None:
        """A dialect command ended: counted, logged, and logged as slow when it was."""
        elapsed = time.perf_counter() - started
        self.account(cmd.tag, text, outcome, elapsed, origin)
        if elapsed >= self._slow_s:
            _log.warning(
                "slow command %s: %.1f ms", cmd.tag, elapsed * 1000,
                extra={"command": cmd.tag, "ms": round(elapsed * 1000, 3)},
            )

    def observe_only(
        self, cmd: Command, outcome: str, started: float, text: str, origin: Origin | None
    ) -> None:
        """Blocking waits are metered and logged but never "slow": waiting is their job."""
        self.account(cmd.tag, text, outcome, time.perf_counter() - started, origin)

    def internal(
        self, cmd: Command, started: float, exc: Exception, text: str, origin: Origin | None
    ) -> InternalError:
        """Our own failure while running ``cmd``: logged with its traceback, counted as
        XX000, and the error to answer."""
        _log.error(
            "internal error running %s", cmd.tag, exc_info=exc, extra={"command": cmd.tag}
        )
        self.finish(cmd, InternalError.sqlstate, started, text, origin)
        return InternalError(f"internal error: {exc}")
