"""PostgreSQL's ``numeric`` on the wire (OID 1700), for the values plain SQL's
``EXTRACT`` gives (a :class:`decimal.Decimal` with the scale PostgreSQL gives it).

Text is the plain decimal (``90.500000``, never an exponent); binary is PostgreSQL's
``numeric_send``: int16 ndigits, weight, sign and dscale, then base-10000 digits.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Final

__all__ = ["dump_binary", "dump_text", "numeric_text"]

_HEAD: Final = struct.Struct("!hhHh")
_POSITIVE: Final = 0x0000
_NEGATIVE: Final = 0x4000


def numeric_text(value: Decimal) -> str:
    """The text PostgreSQL prints for a numeric: all its scale's digits, no exponent."""
    out = format(value, "f")
    return out[1:] if value == 0 and out.startswith("-") else out


def dump_text(value: object) -> bytes:
    return numeric_text(Decimal(value)).encode("ascii")  # type: ignore[arg-type]  # by type


def dump_binary(value: object) -> bytes:
    d = Decimal(value)  # type: ignore[arg-type]  # Decimal or int by type
    text = numeric_text(abs(d))
    whole, _dot, frac = text.partition(".")
    dscale = len(frac)
    whole = whole.lstrip("0")
    whole = "0" * (-len(whole) % 4) + whole
    frac = frac + "0" * (-len(frac) % 4)
    groups = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    weight = len(groups) - 1
    groups += [int(frac[i : i + 4]) for i in range(0, len(frac), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    sign = _NEGATIVE if d < 0 and groups else _POSITIVE
    return _HEAD.pack(len(groups), weight, sign, dscale) + b"".join(
        struct.pack("!H", g) for g in groups)
