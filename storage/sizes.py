"""Byte lengths and Cube Store's human-readable sizes.

:func:`utf8_len` is the one byte measure of the store: caps (payload, external id,
process id, cache entry) and the sizes that INFO reports all count UTF-8 bytes, as Cube
Store does on its Rust strings. Lone surrogates (which a PostgreSQL client cannot send,
but a Python caller can) count as the three bytes ``surrogatepass`` gives them, instead of
raising mid-step.

:func:`format_size` is ``humansize::format_size(n, humansize::DECIMAL)``.

Cube Store prints byte counts in the CACHE SET size error (``docs/dialect.md`` §4.1) and in the
``SYS CACHESTORE INFO`` / ``EVICTION`` rows (§5.1) with the Rust crate humansize's DECIMAL
options: base 1000, units ``B kB MB GB TB PB EB ZB YB``, a space before the unit, two
decimal places, and **no** decimals when the scaled value has no fractional part
(``decimal_zeroes: 0``). So ``66060288`` → ``66.06 MB``, ``2097152`` → ``2.10 MB``,
``1000`` → ``1 kB``, ``999`` → ``999 B``.

The arithmetic is the crate's, step for step: the count becomes an f64, is divided by 1000
while it is ≥ 1000, and "no fractional part" means ``|frac| <= f64::EPSILON``. Rust's
``{:.2}`` rounds the exact binary value half-to-even, exactly as Python's ``.2f`` does, so
ties (``1125`` → ``1.12 kB``) come out the same.
"""

from __future__ import annotations

import math
import sys

__all__ = ["format_size", "utf8_len"]

_DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")
_KILO = 1000.0
_DECIMAL_PLACES = 2


def utf8_len(text: str) -> int:
    """The UTF-8 length of ``text`` in bytes (ASCII, the usual case, costs no encoding)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def format_size(size: int) -> str:
    """``size`` bytes as humansize's DECIMAL text (see the module docstring)."""
    value = float(size)
    scale = 0
    while abs(value) >= _KILO and scale < len(_DECIMAL_UNITS) - 1:
        value /= _KILO
        scale += 1
    fraction, _ = math.modf(value)
    whole = fraction == 0.0 or abs(fraction) <= sys.float_info.epsilon
    places = 0 if whole else _DECIMAL_PLACES
    return f"{value:.{places}f} {_DECIMAL_UNITS[scale]}"
