"""SYS CLOCK and SYS CACHESTORE: what the memory and PostgreSQL stores share.

SYS CLOCK's checks and texts (42501 unless ``--test-clock``; ADVANCE's milliseconds) and
its frame are here; each store only moves its own clock (the memory store its
:class:`~cubequeue.storage.clock.AdjustableClock`, the PostgreSQL store the ``cq_clock``
row every front end reads).

SYS CACHESTORE (``docs/dialect.md`` §5.1) is one method per action on each store, named
``cachestore_<action>`` and returning the rows the action answers (INFO's and EVICTION's
name/value/description rows, none for the others): :func:`cachestore_actions` finds them
once, at construction (a store missing one fails there), and :func:`cachestore_frame`
frames what they return. What an action does is each store's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, get_args

from cubequeue.grammar.commands import CachestoreAction, SysCachestore, SysClock
from cubequeue.grammar.errors import InsufficientPrivilege, InternalError, InvalidParameterValue
from cubequeue.grammar.results import EMPTY, ResultSet, Row
from cubequeue.storage import bound_fields
from cubequeue.storage.limits import Limits

__all__ = [
    "CACHESTORE_ACTIONS",
    "CLOCK_DISABLED",
    "cachestore_action",
    "cachestore_actions",
    "cachestore_frame",
    "clock_frame",
    "clock_request",
]

CLOCK_DISABLED = "clock control is disabled; start the server with --test-clock"

#: every SYS CACHESTORE action, as the grammar spells them in commands
CACHESTORE_ACTIONS: tuple[CachestoreAction, ...] = get_args(CachestoreAction)


def clock_request(cmd: SysClock, limits: Limits, *, movable: bool = True) -> int | None:
    """SYS CLOCK's checks: refused (42501) unless clock control is on and the store's
    clock can be moved; the milliseconds ADVANCE moves it by (never negative), None for
    SHOW, FREEZE and RESUME."""
    if not limits.clock_control or not movable:
        raise InsufficientPrivilege(CLOCK_DISABLED)
    if cmd.action != "advance":
        return None
    ms = bound_fields.opt_num(cmd.ms)
    if ms is None or ms < 0:
        raise InvalidParameterValue(
            f"SYS CLOCK ADVANCE needs a non-negative number of milliseconds, actual: {ms}"
        )
    return ms


def clock_frame(now: int, offset_ms: int, frozen: bool) -> ResultSet:
    """SYS CLOCK's answer: the clock after the action."""
    return ResultSet(SysClock.RESULT_COLUMNS, [(now, offset_ms, frozen)])


def cachestore_actions(owner: object) -> dict[str, Callable[..., Any]]:
    """``owner``'s ``cachestore_<action>`` method for every SYS CACHESTORE action."""
    found: dict[str, Callable[..., Any]] = {}
    missing: list[str] = []
    for action in CACHESTORE_ACTIONS:
        method = getattr(owner, f"cachestore_{action}", None)
        if callable(method):
            found[action] = method
        else:
            missing.append(f"cachestore_{action}")
    if missing:
        raise TypeError(f"{type(owner).__name__} has no {', '.join(missing)}")
    return found


def cachestore_action(actions: dict[str, Callable[..., Any]], cmd: SysCachestore,
                      ) -> Callable[..., Any]:
    """The method for ``cmd``'s action (a command built by hand may name any)."""
    method = actions.get(cmd.action)
    if method is None:
        raise InternalError(f"unknown SYS CACHESTORE action {cmd.action!r}")
    return method


def cachestore_frame(cmd: SysCachestore, rows: Iterable[Row]) -> ResultSet:
    """An action's answer: INFO's and EVICTION's rows, an empty frame for the others."""
    columns = cmd.result_columns()
    return ResultSet(columns, list(rows)) if columns else EMPTY
