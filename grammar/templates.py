"""Command templates: a command whose literal values are holes, filled per statement.

The shape-keyed statement cache (``shapes.py``) parses one statement of each shape with
its literals lifted out (:class:`~cubequeue.grammar.lexer.LiftedToken`); the builder puts
a :class:`Hole` wherever a literal's value would go. :meth:`Template.fill` then builds the
command of any statement of that shape from its literal texts, through the same decoders
and range checks the builder applies to literals (``lexical.py``), so the result equals
what parsing the statement gives. A template keeps no literal text: a cached template of
a statement with a 5 MB payload holds none of the payload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cubequeue.grammar.commands import Command
from cubequeue.grammar.lexical import TEXT_DECODERS, check_int_text

__all__ = ["Hole", "Template"]


@dataclass(frozen=True, slots=True)
class Hole:
    """Where literal number ``index`` of the statement goes, and how it becomes a value."""

    index: int
    #: the literal's token kind (``STRING``, ``NUMBER``, …)
    kind: str
    #: ``None``: a text value; else the ``INT(name)`` range of an integer slot (§1.3)
    name: str | None = None
    #: a ``-`` token came before the number
    negative: bool = False

    def named(self, name: str) -> Hole:
        """This integer hole with its range name, known once its option is reduced."""
        return Hole(self.index, self.kind, name, self.negative)

    def fill(self, raw: str) -> str | int:
        """The value of the literal whose token text is ``raw``; raises as parsing would."""
        if self.name is None:
            return TEXT_DECODERS[self.kind](raw)
        return check_int_text("-" + raw if self.negative else raw, self.name)


_Setter = Callable[[Command, object], None]
_new = object.__new__


def _setter(cls: type[Command], name: str) -> _Setter:
    """The slot descriptor's ``__set__`` for ``name`` (frozen classes refuse setattr)."""
    for klass in cls.__mro__:
        descriptor = klass.__dict__.get(name)
        if descriptor is not None and hasattr(descriptor, "__set__"):
            setter: _Setter = descriptor.__set__
            return setter
    raise TypeError(f"{cls.__name__}.{name} is not a slot")  # pragma: no cover - our bug


class Template:
    """A command with holes, and the plan that fills them (fields written in place)."""

    __slots__ = ("_cls", "_consts", "_holes", "command", "literals")

    def __init__(self, command: Command) -> None:
        cls = type(command)
        consts: list[tuple[_Setter, object]] = []
        holes: list[tuple[_Setter, Hole]] = []
        for field in dataclasses.fields(cls):
            value = getattr(command, field.name)
            if isinstance(value, Hole):
                holes.append((_setter(cls, field.name), value))
            else:
                consts.append((_setter(cls, field.name), value))
        self._cls = cls
        self._consts = tuple(consts)
        self._holes = tuple(holes)
        #: the command itself when it has no holes (then it is final and shared)
        self.command = command
        #: how many literals a statement of this shape has
        self.literals = 1 + max((hole.index for _, hole in holes), default=-1)

    @property
    def has_holes(self) -> bool:
        return bool(self._holes)

    def fill(self, literals: Sequence[str]) -> Command:
        """The command for a statement whose literal token texts are ``literals``."""
        if not self._holes:
            return self.command
        out = _new(self._cls)
        for setter, value in self._consts:
            setter(out, value)
        for setter, hole in self._holes:
            setter(out, hole.fill(literals[hole.index]))
        return out
