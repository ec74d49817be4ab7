"""Each store's table of steps, built once from the commands' own ``step`` names.

A command class names the method that runs it (``QueueAdd.step == "queue_add"``,
:mod:`cubequeue.grammar.commands`). A store hands :func:`find_steps` the objects that hold
its steps (the memory store: its queue commands, its cache and itself; the PostgreSQL
store: its queue steps, its cache steps and itself) and gets a table keyed by command
class, read with one dict lookup per statement. A store without a step for some command
fails here, at construction, rather than at the first such statement; one with two steps
for it fails too, since which one runs would depend on the order of its step objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cubequeue.grammar.commands import COMMANDS, Command, QueueResultBlocking
from cubequeue.grammar.errors import FeatureNotSupported, InternalError, QueueError

__all__ = ["EXECUTED", "find_steps", "no_step", "step_table"]

#: what ``execute`` runs: every command but RESULT_BLOCKING, which may wait and so has
#: a method of its own in every store (``result_blocking``)
EXECUTED: tuple[type[Command], ...] = tuple(
    kind for kind in COMMANDS if kind is not QueueResultBlocking)


def find_steps(
    owners: Sequence[object], commands: Iterable[type[Command]] = EXECUTED, *,
    every: bool = True,
) -> dict[type[Command], tuple[object, Callable[..., Any]]]:
    """Each command's step as (the owner it was found on, the bound method): the method
    its ``step`` names on exactly one of ``owners``. ``every``: a command none of them
    has a step for is an error (``False``: it is left out, for a store that runs only
    some commands its own way)."""
    table: dict[type[Command], tuple[object, Callable[..., Any]]] = {}
    missing: list[str] = []
    for kind in commands:
        found = [(owner, step) for owner in owners
                 if callable(step := getattr(owner, kind.step, None))]
        if len(found) > 1:
            raise TypeError(f"{kind.__name__}: more than one step named {kind.step!r} "
                            f"({', '.join(type(owner).__name__ for owner, _ in found)})")
        if found:
            table[kind] = found[0]
        elif every:
            missing.append(f"{kind.__name__} ({kind.step})")
    if missing:
        holders = ", ".join(type(owner).__name__ for owner in owners)
        raise TypeError(f"no step in {holders} for {', '.join(missing)}")
    return table


def step_table(
    *owners: object, commands: Iterable[type[Command]] = EXECUTED, every: bool = True
) -> dict[type[Command], Callable[..., Any]]:
    """:func:`find_steps` as command class → bound method."""
    return {kind: step for kind, (_, step) in
            find_steps(owners, commands, every=every).items()}


def no_step(cmd: Command) -> QueueError:
    """The error for a command a store's table has no step for: RESULT_BLOCKING has a
    method of its own (sending it to ``execute`` is the caller's bug, XX000); anything else
    is not a store command (0A000)."""
    if isinstance(cmd, QueueResultBlocking):
        return InternalError("QUEUE RESULT_BLOCKING goes through the store's result_blocking")
    return FeatureNotSupported(f"{type(cmd).__name__} is not a store command")
