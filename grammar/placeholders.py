"""Per-statement placeholder state: ``?`` numbering, ``$n``/``?`` mixing, slot types.

``docs/dialect.md`` §8 rule 5: the n-th ``?`` is parameter n, a statement uses
either ``$n`` or ``?`` but not both, an index used twice must keep its type (int8, or
one of the text-like slots), and ``$1…$n`` may not leave a gap.

The state belongs to one parse, so it travels with the statement's tokens rather than
living in the transformer: the lexer creates one :class:`Placeholders` per statement
(only when the statement has a placeholder) and hands it to every ``PARAM`` token it
makes (:class:`ParamToken`). The transformer, which Lark shares between all parses,
therefore keeps no per-statement state and needs no lock.
"""

from __future__ import annotations

from lark import Token

from cubequeue.grammar.commands import Param, Slot
from cubequeue.grammar.errors import SyntaxError

__all__ = ["MAX_PARAM_INDEX", "ParamToken", "Placeholders"]

#: Postgres accepts at most 65535 bind parameters; a larger ``$n`` can never be bound.
MAX_PARAM_INDEX = 65535


class Placeholders:
    """The placeholders of one statement, numbered as their slots are reduced."""

    __slots__ = ("qmarks", "slots", "style")

    def __init__(self) -> None:
        self.qmarks = 0
        self.style: str | None = None
        self.slots: dict[int, Slot] = {}

    def param(self, tok: Token, cast: Token | None, slot: Slot) -> Param:
        """The :class:`Param` for placeholder token ``tok`` in a ``slot``-typed position."""
        style = "?" if tok == "?" else "$"
        if self.style is None:
            self.style = style
        elif self.style != style:
            raise SyntaxError(
                "cannot mix $n and ? placeholders in one statement", position=_pos(tok)
            )
        if style == "?":
            self.qmarks += 1
            index = self.qmarks
        else:
            index = int(tok[1:])
            if index < 1 or index > MAX_PARAM_INDEX:
                raise SyntaxError(f"there is no parameter {tok}", position=_pos(tok))
        known = self.slots.get(index)
        if known is None:
            self.slots[index] = slot
        elif (known is Slot.INT8) != (slot is Slot.INT8):
            raise SyntaxError(
                f"inconsistent types deduced for parameter ${index}", position=_pos(tok)
            )
        type_name = cast[2:].strip().lower() if cast is not None else None
        return Param(index, slot, type_name)

    def finish(self) -> None:
        """Reject gaps in ``$n`` numbering (§8 rule 5; PostgreSQL does the same)."""
        slots = self.slots
        if slots and len(slots) != max(slots):
            missing = next(i for i in range(1, len(slots) + 2) if i not in slots)
            raise SyntaxError(f"could not determine data type of parameter ${missing}")


class ParamToken(Token):
    """A ``PARAM`` token that carries its statement's :class:`Placeholders`."""

    __slots__ = ("placeholders",)
    placeholders: Placeholders


def _pos(tok: Token) -> int:
    return (tok.start_pos or 0) + 1
