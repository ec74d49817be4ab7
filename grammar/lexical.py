"""Literal decoding and integer checks shared by the parser and :func:`bind`.

The lexer (``queue.lark``) only finds where a literal starts and ends; this module turns
the raw token text into its value, following ``cubestore-dialect.md`` §1.2 (Cube Store's
MySQL-like tokenizer) and §8 rule 4 (cubequeue's PostgreSQL additions):

* ``'…'``: backslash escapes ``\\0 \\a \\b \\f \\n \\r \\t \\Z`` become control characters,
  a backslash before anything else yields that character, ``''`` yields ``'``;
* ``E'…'``: PostgreSQL escape strings (``\\b \\f \\n \\r \\t``, octal, ``\\xHH``,
  ``\\uXXXX``, ``\\UXXXXXXXX``, anything else literally);
* ``"…"`` and `` `…` ``: verbatim, a doubled quote yields one;
* ``$tag$…$tag$``: verbatim.

Integers follow §1.3 ``INT(name, allow_negative)`` with the Rust target types listed there;
a failed check is 22023 (§8 rule 10) with Cube Store's wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cubequeue.grammar.errors import InvalidParameterValue, SyntaxError

__all__ = [
    "ID_CHAR",
    "ID_START",
    "INT_RANGES",
    "TAG_CHAR",
    "check_int",
    "check_int_text",
    "decode_bt",
    "decode_dollar",
    "decode_dq",
    "decode_estring",
    "decode_string",
]

# §1.2 identifier characters as regex classes, the same as queue.lark's _ID_START and
# _ID_CHAR. Negated ASCII classes compile in well under a millisecond, where the
# equivalent [A-Za-z_\u0080-\U0010FFFF] takes Python's re 10-30 ms each (issue 9,
# "Fast start"); tests/grammar/test_grammar_lexer.py checks every code point.
#: a word's first character: an ASCII letter, ``_``, or any non-ASCII character
ID_START = r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f]"
#: a word's later characters: ID_START, digits and ``$``
ID_CHAR = r"[^\x00-\x23\x25-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
#: a dollar-quote tag's later characters: ID_START and digits (no ``$``)
TAG_CHAR = r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"

_I64 = (-(2**63), 2**63 - 1)
_U32 = (0, 2**32 - 1)
_U64 = (0, 2**64 - 1)

#: §1.3: the names Cube Store uses in its integer messages, and their Rust target ranges.
#: ``ms`` (SYS CLOCK ADVANCE) is cubequeue's own (issue 9).
INT_RANGES: dict[str, tuple[int, int]] = {
    "priority": _I64,
    "orphaned": _U32,
    "ttl": _U32,
    "concurrency": _U32,
    "timeout": _U64,
    "heartbeat timeout": _U32,
    "orphaned timeout": _U32,
    "id": _U64,
    "ms": _U64,
}

_DIGITS = re.compile(r"-?[0-9]+")


def check_int(value: int, name: str) -> int:
    """Range-check an already numeric value as Cube Store's ``INT(name, …)`` would."""
    lo, hi = INT_RANGES[name]
    if value < 0 and lo == 0:
        raise InvalidParameterValue(f"{name} must be a positive integer, actual: {value}")
    if value > hi:
        raise InvalidParameterValue(
            f"{name} must be a valid integer, error: number too large to fit in target type"
        )
    if value < lo:
        raise InvalidParameterValue(
            f"{name} must be a valid integer, error: number too small to fit in target type"
        )
    return value


def check_int_text(text: str, name: str, position: int | None = None) -> int:
    """Parse a numeric literal (``-`` already joined on) into ``name``'s range.

    ``1.5`` or ``1e3`` are numeric literals to the tokenizer but not integers: Rust's
    ``str::parse`` says ``invalid digit found in string``.
    """
    if text.isdigit() and text.isascii():  # an unsigned literal in range: the usual case
        value = int(text)
        if value <= INT_RANGES[name][1]:
            return value
    lo, _hi = INT_RANGES[name]
    if text.startswith("-") and lo == 0:
        raise InvalidParameterValue(
            f"{name} must be a positive integer, actual: {text}", position=position
        )
    if _DIGITS.fullmatch(text) is None:
        raise InvalidParameterValue(
            f"{name} must be a valid integer, error: invalid digit found in string",
            position=position,
        )
    try:
        return check_int(int(text), name)
    except InvalidParameterValue as exc:
        exc.position = position
        raise


# ---- strings -----------------------------------------------------------------------

_MYSQL_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_MYSQL_ESCAPE_RE = re.compile(r"\\([\s\S])|''")


def _mysql_escape(m: re.Match[str]) -> str:
    ch = m.group(1)
    if ch is None:
        return "'"
    return _MYSQL_ESCAPES.get(ch, ch)


def decode_string(token: str) -> str:
    """``'…'`` (§1.2); the fast path skips the regex for the common escape-free body."""
    body = token[1:-1]
    if "\\" not in body and "''" not in body:
        return body
    return _MYSQL_ESCAPE_RE.sub(_mysql_escape, body)


_PG_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_PG_ESCAPE_RE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([0-7]{1,3})|([\s\S]))|''"
)


def _pg_escape(m: re.Match[str]) -> str:
    hex2, u4, u8, octal, other = m.groups()
    if hex2 is not None:
        return chr(int(hex2, 16))
    if octal is not None:
        return chr(int(octal, 8))
    code = u4 if u4 is not None else u8
    if code is not None:
        value = int(code, 16)
        if value > 0x10FFFF:
            raise SyntaxError(f"invalid Unicode escape value: {m.group(0)}")
        return chr(value)
    if other is not None:
        return _PG_ESCAPES.get(other, other)
    return "'"


def decode_estring(token: str) -> str:
    """PostgreSQL ``E'…'`` (§8 rule 4)."""
    body = token[2:-1]
    if "\\" not in body and "''" not in body:
        return body
    return _PG_ESCAPE_RE.sub(_pg_escape, body)


def decode_dq(token: str) -> str:
    """A ``"…"`` quoted word: verbatim, backslashes kept, ``""`` → ``"`` (§1.2)."""
    return token[1:-1].replace('""', '"')


def decode_bt(token: str) -> str:
    """A `` `…` `` quoted word: verbatim, doubled backtick → one (§1.2)."""
    return token[1:-1].replace("``", "`")


def decode_dollar(token: str) -> str:
    """``$tag$…$tag$``: the body verbatim (§8 rule 4)."""
    tag_len = token.index("$", 1) + 1
    return token[tag_len:-tag_len]


def _word(token: str) -> str:
    return str(token)  # a plain str, not the lexer's Token subclass


#: token type → decoder, for every terminal that can stand for a text value.
TEXT_DECODERS: dict[str, Callable[[str], str]] = {
    "STRING": decode_string,
    "ESTRING": decode_estring,
    "DQ": decode_dq,
    "BT": decode_bt,
    "DOLLAR": decode_dollar,
    "WORD": _word,
}
