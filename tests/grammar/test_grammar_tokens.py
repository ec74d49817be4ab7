"""The one tokenizer (grammar/tokens.py) and the PostgreSQL escape decoder."""

from __future__ import annotations

import re

import pytest

from cubequeue.grammar import first_word, strip_leading_comments
from cubequeue.grammar import tokens as t
from cubequeue.grammar.errors import CharacterNotInRepertoire, SyntaxError
from cubequeue.grammar.lexical import decode_pg_escapes
from cubequeue.grammar.tokens import ID_CHAR, ID_START, TAG_CHAR, tokenize

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize(
    ("cheap", "original"),
    [
        (ID_START, r"[A-Za-z_\u0080-\U0010FFFF]"),
        (ID_CHAR, r"[A-Za-z0-9_$\u0080-\U0010FFFF]"),
        (TAG_CHAR, r"[A-Za-z0-9_\u0080-\U0010FFFF]"),
    ],
)
def test_cheap_identifier_classes_accept_exactly_the_original_ranges(cheap: str, original: str) -> None:
    assert re.sub(cheap, "", EVERY_CHARACTER) == re.sub(original, "", EVERY_CHARACTER)


def kinds(sql: str, **kw: bool) -> list[tuple[str, str]]:
    return [(kind, sql[start:end]) for kind, start, end in tokenize(sql, **kw)]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("a /* x /* y */ z */ b", [("WORD", "a"), ("WORD", "b")]),
        ("a -- c\nb", [("WORD", "a"), ("WORD", "b")]),
        ("'it''s' E'a\\'b' 'c\\\\'", [("STRING", "'it''s'"), ("ESTRING", "E'a\\'b'"), ("STRING", "'c\\\\'")]),
        ('"a""b" `c``d`', [("DQ", '"a""b"'), ("BT", "`c``d`")]),
        ("$t$a$$b$t$ $$x$$", [("DOLLAR", "$t$a$$b$t$"), ("DOLLAR", "$$x$$")]),
        ("$1 ? $1::int8", [("PARAM", "$1"), ("PARAM", "?"), ("PARAM", "$1"), ("CAST", "::"), ("WORD", "int8")]),
        ("1.5e3 -2 .5", [("NUMBER", "1.5e3"), ("OP", "-"), ("NUMBER", "2"), ("NUMBER", ".5")]),
        ("5abc $1x", [("JUNK", "5abc"), ("JUNK", "$1x")]),
        ("a$b$ x", [("WORD", "a$b$"), ("WORD", "x")]),
        ("'open", [("UNTERMINATED", "'open")]),
        ("a /* open /* */", [("WORD", "a"), ("OPEN_COMMENT", "/* open /* */")]),
        ("$$open", [("UNTERMINATED", "$$open")]),
        ("é;(", [("WORD", "é"), ("OP", ";"), ("OP", "(")]),
    ],
)
def test_tokens(sql: str, expected: list[tuple[str, str]]) -> None:
    assert kinds(sql) == expected


def test_backticks_are_operators_in_postgresql() -> None:
    assert kinds("`a`", backticks=False) == [("OP", "`"), ("WORD", "a"), ("OP", "`")]


def test_a_five_megabyte_escaped_string_is_linear() -> None:
    sql = "'" + "ab\\'" * (5 * 1024 * 1024 // 4) + "'"
    assert list(tokenize(sql)) == [(t.STRING, 0, len(sql))]


def test_wire_helpers() -> None:
    assert first_word("  /* a /* b */ */ -- c\n Queue ADD") == "queue"
    assert first_word("'x'") == ""
    assert strip_leading_comments("/* a /* b */ */ -- c\nSELECT 1") == "SELECT 1"
    assert strip_leading_comments("/* open") == "/* open"


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ("a\\nb", "a\nb"),
        ("\\303\\251", "é"),
        ("\\xC3\\xA9", "é"),
        ("\\u00e9\\U0001F600", "é😀"),
        ("\\uD83D\\uDE00", "😀"),
        ("it''s \\q", "it's q"),
        ("\\1010", "A0"),
    ],
)
def test_pg_escapes(body: str, text: str) -> None:
    assert decode_pg_escapes(body) == text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("\\777", 'invalid byte sequence for encoding "UTF8": 0xff'),
        ("\\xff", 'invalid byte sequence for encoding "UTF8": 0xff'),
        ("ok\\303(", 'invalid byte sequence for encoding "UTF8": 0xc3 0x28'),
        ("\\0", 'invalid byte sequence for encoding "UTF8": 0x00'),
    ],
)
def test_escaped_bytes_must_be_utf8(body: str, message: str) -> None:
    with pytest.raises(CharacterNotInRepertoire) as info:
        decode_pg_escapes(body)
    assert info.value.message == message
    assert info.value.sqlstate == "22021"


@pytest.mark.parametrize("body", ["\\U00110000", "\\uD83D", "\\uDE00", "\\uD83Dx"])
def test_bad_unicode_escapes_are_42601(body: str) -> None:
    with pytest.raises(SyntaxError):
        decode_pg_escapes(body)
