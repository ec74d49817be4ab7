"""Literal decoding and integer checks shared by the parser and :func:`bind`.

The lexer (``queue.lark``) only finds where a literal starts and ends; this module turns
the raw token text into its value, following ``docs/dialect.md`` §1.2 (Cube Store's
MySQL-like tokenizer) and §8 rule 4 (cubequeue's PostgreSQL additions):

* ``'…'``: backslash escapes ``\\0 \\a \\b \\f \\n \\r \\t \\Z`` become control characters,
  a backslash before anything else yields that character, ``''`` yields ``'``;
* ``E'…'``: PostgreSQL escape strings (:func:`decode_pg_escapes`);
* ``"…"`` and `` `…` ``: verbatim, a doubled quote yields one;
* ``$tag$…$tag$``: verbatim.

Integers follow §1.3 ``INT(name, allow_negative)`` with the Rust target types listed there;
a failed check is 22023 (§8 rule 10) with Cube Store's wording. A digit string is measured
before ``int()`` reads it (:func:`bounded_int`): no target type needs more than
:data:`MAX_INT_DIGITS` digits, and Python refuses to convert more than 4,300 (a
ValueError, which would be an internal error), in time that grows with the square of the
length below that.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cubequeue.grammar.errors import CharacterNotInRepertoire, InvalidParameterValue, SyntaxError
from cubequeue.grammar.tokens import ID_CHAR, ID_START, TAG_CHAR

__all__ = [
    "ID_CHAR",
    "ID_START",
    "INT_RANGES",
    "MAX_INT_DIGITS",
    "TAG_CHAR",
    "bounded_int",
    "check_int",
    "check_int_text",
    "decode_bt",
    "decode_dollar",
    "decode_dq",
    "decode_estring",
    "decode_pg_escapes",
    "decode_string",
    "shown",
]

_I64 = (-(2**63), 2**63 - 1)
_U32 = (0, 2**32 - 1)
_U64 = (0, 2**64 - 1)

#: §1.3: the names Cube Store uses in its integer messages, and their Rust target ranges.
#: ``ms`` (SYS CLOCK ADVANCE) is cubequeue's own.
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

#: digits of the widest integer any field takes (u64's maximum has 20), leading zeros
#: aside; a longer digit string is out of every range
MAX_INT_DIGITS = 20
#: what :func:`bounded_int` makes of a longer one: past every range, with its sign
PAST_EVERY_RANGE: int = 10**MAX_INT_DIGITS
#: how much of a rejected literal an error message repeats
_SHOWN_CHARS = 64


def bounded_int(text: str) -> int:
    """The value of an ASCII digit string (a ``-`` or ``+`` sign allowed), or
    ±:data:`PAST_EVERY_RANGE` when it has more than :data:`MAX_INT_DIGITS` digits after
    its leading zeros: such a number is out of every field's range, which the range check
    then says, and ``int()`` never reads it (see the module docstring)."""
    if len(text) <= MAX_INT_DIGITS:
        return int(text)
    negative = text.startswith("-")
    digits = text.lstrip("+-").lstrip("0")  # int() counts leading zeros as digits too
    if len(digits) > MAX_INT_DIGITS:
        return -PAST_EVERY_RANGE if negative else PAST_EVERY_RANGE
    value = int(digits or "0")
    return -value if negative else value


def shown(text: str) -> str:
    """``text`` as an error message repeats it: whole when short, else its start and
    its length (a 5,000-digit literal is not echoed back)."""
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS]}... ({len(text)} characters)"


def _unsigned(name: str) -> str:
    """How a negative value's error words the field: Cube Store says "positive" for every
    unsigned one, but CONCURRENCY 0 is a value (it claims nothing, as in Cube Store), so
    there it says "non-negative" (issue 27)."""
    return "non-negative" if name == "concurrency" else "positive"


def check_int(value: int, name: str) -> int:
    """Range-check an already numeric value as Cube Store's ``INT(name, …)`` would."""
    lo, hi = INT_RANGES[name]
    if value < 0 and lo == 0:
        actual = (value if value > -PAST_EVERY_RANGE
                  else f"a negative number of more than {MAX_INT_DIGITS} digits")
        raise InvalidParameterValue(f"{name} must be a {_unsigned(name)} integer, actual: {actual}")
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
    if len(text) <= MAX_INT_DIGITS and text.isdigit() and text.isascii():  # the usual case
        value = int(text)
        if value <= INT_RANGES[name][1]:
            return value
    lo, _hi = INT_RANGES[name]
    if text.startswith("-") and lo == 0:
        raise InvalidParameterValue(
            f"{name} must be a {_unsigned(name)} integer, actual: {shown(text)}",
            position=position,
        )
    if _DIGITS.fullmatch(text) is None:
        raise InvalidParameterValue(
            f"{name} must be a valid integer, error: invalid digit found in string",
            position=position,
        )
    try:
        return check_int(bounded_int(text), name)
    except InvalidParameterValue as exc:
        exc.position = position
        raise


# ---- strings -----------------------------------------------------------------------

_MYSQL_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def decode_string(token: str) -> str:
    """``'…'`` (§1.2), in C-level passes (:func:`_unescape_by_replace`), or for a body
    holding \\x01 (the passes' placeholder) one ``str.split`` and a short step per
    escape (:func:`_unescape`). Cube's driver escapes every ``"`` of a JSON payload
    (``\\"``): a regex callback per escape cost several times more.
    """
    body = token[1:-1]
    if "\\" not in body:
        return body.replace("''", "'") if "''" in body else body
    if "\x01" not in body:
        return _unescape_by_replace(body)
    if "''" in body:
        return "".join(_unescape(body, lambda text: text.replace("''", "'")))
    return "".join(_unescape(body, str))


#: a ``\\X`` escape that is a control character (once escaped backslashes are set aside)
_CONTROL_ESCAPE_RE = re.compile(r"\\[0abfnrtZ]")


def _control(m: re.Match[str]) -> str:
    return _MYSQL_ESCAPES[m.group()[1]]


def _unescape_by_replace(body: str) -> str:
    """:func:`decode_string` for a body without \\x01, in a few C-level passes.

    ``str.replace`` pairs backslashes from the left, as escapes pair them, so the escaped
    backslashes go first (to \\x01); every backslash left then introduces one escape.
    Then ``''`` becomes one quote: the quotes after an escaping backslash come in an odd
    run (the tokenizer pairs the unescaped ones), so pairing that run from the left
    still leaves one quote behind the backslash and as many quotes in all. Then the
    control escapes, and a backslash before anything else is dropped.
    """
    text = body.replace("\\\\", "\x01")
    if "''" in text:
        text = text.replace("''", "'")
    if _CONTROL_ESCAPE_RE.search(text) is not None:  # rare in JSON: one scan to know
        text = _CONTROL_ESCAPE_RE.sub(_control, text)
    return text.replace("\\", "").replace("\x01", "\\")


def _unescape(body: str, plain: Callable[[str], str]) -> list[str]:
    """:func:`decode_string`'s pieces, cut at the backslashes: each part after one starts
    with its escaped character (an empty part: the escaped character is the next
    backslash). ``plain`` turns each unescaped stretch into text (``''`` → ``'``: the
    tokenizer pairs unescaped quotes, so a pair never straddles an escape)."""
    parts = body.split("\\")
    escapes = _MYSQL_ESCAPES
    out = [plain(parts[0])]
    add = out.append
    i, n = 1, len(parts)
    while i < n:
        part = parts[i]
        if part:
            first = part[0]
            add(escapes.get(first, first))
            add(plain(part[1:]))
            i += 1
        else:  # "\\\\": an escaped backslash, and the part after it is plain text
            add("\\")
            if i + 1 < n:
                add(plain(parts[i + 1]))
            i += 2
    return out


_PG_ESCAPES = {"b": 8, "f": 12, "n": 10, "r": 13, "t": 9}
_PG_ESCAPE_RE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([0-7]{1,3})|([\s\S]))|''"
)
_UTF8 = "utf-8"


def _invalid_bytes(data: bytes, at: int) -> CharacterNotInRepertoire:
    """PostgreSQL's ``report_invalid_encoding``: the bad sequence, as long as its lead
    byte says (one byte for a byte that cannot lead), cut at the end of the string."""
    lead = data[at]
    length = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1
    shown = " ".join(f"0x{b:02x}" for b in data[at : at + length])
    return CharacterNotInRepertoire(f'invalid byte sequence for encoding "UTF8": {shown}')


def decode_pg_escapes(body: str) -> str:
    r"""A PostgreSQL escape-string body (``E'…'``, and ``'…'`` with
    ``standard_conforming_strings = off``) → its text, as PostgreSQL builds it.

    ``\b \f \n \r \t``, ``''``, and a backslash before any other character yields that
    character. Octal (``\ooo``, taken modulo 256) and hex (``\xhh``) escapes are *bytes*,
    ``\uXXXX`` / ``\UXXXXXXXX`` code points (a UTF-16 surrogate pair makes one); the result
    must be valid UTF-8 without NUL bytes, else 22021 naming the bytes, as PostgreSQL says.
    An escape beyond U+10FFFF or a lone surrogate is 42601.
    """
    if "\\" not in body and "''" not in body:
        return body
    out = bytearray()
    pos = 0
    high: int | None = None  # a pending high surrogate (\uD800-\uDBFF)
    for m in _PG_ESCAPE_RE.finditer(body):
        if high is not None and (m.start() > pos or not (m.group(2) or m.group(3))):
            raise SyntaxError("invalid Unicode surrogate pair")
        out += body[pos : m.start()].encode(_UTF8, "surrogatepass")
        pos = m.end()
        hex2, u4, u8, octal, other = m.groups()
        if hex2 is not None:
            out.append(int(hex2, 16))
        elif octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif u4 is not None or u8 is not None:
            value = int(u4 if u4 is not None else u8, 16)
            if value > 0x10FFFF:
                raise SyntaxError(f"invalid Unicode escape value: {m.group(0)}")
            if 0xD800 <= value <= 0xDBFF:
                if high is not None:
                    raise SyntaxError("invalid Unicode surrogate pair")
                high = value
                continue
            if (0xDC00 <= value <= 0xDFFF) != (high is not None):
                raise SyntaxError("invalid Unicode surrogate pair")
            if high is not None:
                value = 0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00)
                high = None
            out += chr(value).encode(_UTF8)
        elif other is not None:
            code = _PG_ESCAPES.get(other)
            if code is not None:
                out.append(code)
            else:
                out += other.encode(_UTF8, "surrogatepass")
        else:
            out.append(0x27)  # '' is one quote
    if high is not None:
        raise SyntaxError("invalid Unicode surrogate pair")
    out += body[pos:].encode(_UTF8, "surrogatepass")
    nul = out.find(0)
    try:
        text = out.decode(_UTF8)
    except UnicodeDecodeError as exc:
        at = exc.start if nul < 0 else min(nul, exc.start)
        raise _invalid_bytes(bytes(out), at) from None
    if nul >= 0:
        raise _invalid_bytes(bytes(out), nul)
    return text


def decode_estring(token: str) -> str:
    """PostgreSQL ``E'…'`` (§8 rule 4), the token text with its quotes."""
    return decode_pg_escapes(token[2:-1])


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
