"""The fast lexer and driver (grammar/lexer.py, grammar/driver.py) against Lark's own.

``parse()`` does not go through ``Lark.parse`` with Lark's contextual lexer: it runs Lark's
LALR tables over a lexer with one regex per state, literal bodies scanned by
``str.find`` (issue 3, "Speed"). These tests pin that it is the same parser: the same
trees and the same errors as stock Lark on the same grammar, for generated and mutated
statements. They also pin the cheap identifier classes (issue 9, "Fast start") to the
ranges they replace, and the parser cache.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cubequeue.grammar import Param, Slot, parse
from cubequeue.grammar.commands import QueueAdd
from cubequeue.grammar.driver import Driver
from cubequeue.grammar.errors import SyntaxError
from cubequeue.grammar.lexer import StatementLexer
from cubequeue.grammar.lexical import ID_CHAR, ID_START, TAG_CHAR
from cubequeue.grammar.parser import build_lark
from cubequeue.grammar.transform import CommandBuilder

GRAMMAR_PATH = Path(__file__).resolve().parents[2] / "grammar" / "queue.lark"
GRAMMAR = GRAMMAR_PATH.read_text(encoding="utf-8")

# Tree-building parsers (no transformer), so that results compare structurally.
STOCK = Lark(GRAMMAR, parser="lalr", lexer="contextual", maybe_placeholders=False)
OURS = Lark(GRAMMAR, parser="lalr", lexer=StatementLexer, maybe_placeholders=False)
DRIVER = Driver(OURS)


# ---- identifier classes ------------------------------------------------------------


EVERY_CHARACTER = "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize(
    ("cheap", "original"),
    [
        (ID_START, r"[A-Za-z_\u0080-\U0010FFFF]"),
        (ID_CHAR, r"[A-Za-z0-9_$\u0080-\U0010FFFF]"),
        (TAG_CHAR, r"[A-Za-z0-9_\u0080-\U0010FFFF]"),
    ],
)
def test_cheap_identifier_classes_accept_exactly_the_original_ranges(
    cheap: str, original: str
) -> None:
    assert re.sub(cheap, "", EVERY_CHARACTER) == re.sub(original, "", EVERY_CHARACTER)


def test_grammar_spells_the_identifier_classes_as_lexical_does() -> None:
    assert f"_ID_START: /{ID_START}/" in GRAMMAR
    assert f"_ID_CHAR: /{ID_CHAR}/" in GRAMMAR
    assert f"_END_OF_WORD: /(?!{ID_CHAR})/" in GRAMMAR
    assert f"(?:{ID_START}{TAG_CHAR}*)?" in GRAMMAR  # the dollar-quote tag
    assert "U0010FFFF" not in GRAMMAR.split("// ---- terminals")[1].split("\n", 8)[8]


# ---- same results as stock Lark ------------------------------------------------------


def _outcome(run: Any, text: str) -> tuple[Any, ...]:
    try:
        tree = run(text)
    except UnexpectedToken as exc:
        return ("token", exc.token.type, str(exc.token), exc.token.start_pos, set(exc.expected))
    except UnexpectedCharacters as exc:
        return ("chars", exc.pos_in_stream, set(exc.allowed or ()))
    if isinstance(tree, tuple):  # Driver.parse: (value, placeholders)
        tree = tree[0]
    assert isinstance(tree, Tree)
    tokens = [(t.type, str(t), t.start_pos) for t in tree.scan_values(lambda v: isinstance(v, Token))]
    return ("tree", tree, tokens)


def _same_as_stock(text: str) -> None:
    expected = _outcome(STOCK.parse, text)
    assert _outcome(DRIVER.parse, text) == expected, text
    assert _outcome(OURS.parse, text) == expected, text  # StatementLexer under Lark.parse


FRAGMENTS = [
    "QUEUE", "queue", "CACHE", "SYS", "ADD", "add_and_retrieve", "RETRIEVE", "ACK", "GET",
    "LIST", "PENDING", "RESULT", "RESULT_BLOCKING", "TO_CANCEL", "PURGE", "SET", "KEYS",
    "CACHESTORE", "INFO", "CLOCK", "ADVANCE", "PRIORITY", "ORPHANED", "EXTERNAL_ID",
    "EXCLUSIVE", "CONCURRENCY", "EXTENDED", "WITH_PAYLOAD", "TTL", "NX", "NULL", "ſys",
    "word", "E", "e", "x$y", "é", "\u212a", "1", "-", "-5", "1.5", "1e3", "007", "$1", "$2",
    "?", "::int8", ":: bigint", ";", "'", "''", "'a'", "'a''b'", "'a\\'b'", "'\\\\'",
    "E'\\x41'", "e'it''s'", '"', '"q"', '"a""b"', "`", "`b`", "``", "$$", "$$x$$", "$a$",
    "$a$y$a$", "$a$y$b$", "--c\n", "--", "/*", "*/", "/* c */", " ", "  ", "\t", "\n", "\x0b",
    "\u00a0", "#", "(", "x" * 70, "'" + "p" * 70 + "'", '"' + "q" * 70 + '"',
]


@settings(deadline=None, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12), st.sampled_from(["", " ", "\n", ";"]))
def test_fragment_soup_parses_as_stock_lark_does(parts: list[str], end: str) -> None:
    _same_as_stock(" ".join(parts) + end)


VALID = [
    "QUEUE ADD PRIORITY 1 'p' 'x'",
    "QUEUE ADD EXTERNAL_ID \"e\" PRIORITY -1 ORPHANED 5 EXCLUSIVE p $$x$$",
    "QUEUE ADD_AND_RETRIEVE PRIORITY ? `p` E'x' ?",
    "QUEUE RETRIEVE EXTENDED CONCURRENCY $1::int8 'STANDALONE#q'",
    "QUEUE ACK 12 NULL;",
    "QUEUE ACK $1 $2",
    "QUEUE LIST WITH_PAYLOAD 'p'",
    "QUEUE TO_CANCEL 100 200 p",
    "QUEUE RESULT EXTERNAL_ID 'x' 'k'",
    "QUEUE RESULT_BLOCKING 5000 'STANDALONE#queue:1'",
    "QUEUE PURGE PENDING p",
    "CACHE SET TTL 5 NX 'k' 'v'",
    "CACHE GET 'STANDALONE#cache:1' -- trailing\n",
    "SYS CACHESTORE HEALTHCHECK",
    "SYS CLOCK ADVANCE 1000 /* c */ ;",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "cut", "duplicate"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(FRAGMENTS)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + 1 :]
        elif op == "cut":
            text = text[:i]
        else:
            j = draw(st.integers(0, len(text)))
            text = text[:i] + text[min(i, j) : max(i, j)] + text[i:]
    return text


@settings(deadline=None, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_statements_parse_as_stock_lark_does(text: str) -> None:
    _same_as_stock(text)


@pytest.mark.parametrize("text", VALID)
def test_valid_statements_give_the_same_tree(text: str) -> None:
    _same_as_stock(text)


LITERALS = [
    "'a'", "''", "'a''b'", "'a'''", "'a''", "'ab", "'a\\'b'", "'a\\\\'", "'\\'", "'x''",
    "'" + "p" * 64 + "'", "'" + "p" * 65 + "'", "'" + "p" * 64 + "'''", "'" + "p" * 200 + "\\n'",
    "E'a'", "e'\\''", "E'", "E'" + "p" * 99, '"a"', '""""', '"a""', '"' + "d" * 100 + '"""',
    "`a`", "`a``b`", "`" + "b" * 80, "$$$$", "$$a$$", "$t$a$t$", "$t$a$u$", "$t$a$t", "$$a$",
    "$é$x$é$", "$1$", "$a1$x$a1$",
]


@pytest.mark.parametrize("literal", LITERALS)
@pytest.mark.parametrize("template", ["QUEUE ADD p {}", "QUEUE ADD {} x", "QUEUE ACK {} NULL"])
def test_literal_edges_lex_as_stock_lark_does(literal: str, template: str) -> None:
    _same_as_stock(template.format(literal))


@settings(deadline=None, max_examples=600)
@given(st.text(alphabet="'\"`$\\ab E\n", max_size=90))
def test_literal_bodies_lex_as_stock_lark_does(body: str) -> None:
    _same_as_stock("QUEUE ADD p " + body)


# ---- per-call placeholder state -------------------------------------------------------


def test_question_marks_number_from_one_in_every_statement_even_after_an_error() -> None:
    with pytest.raises(SyntaxError):
        parse("QUEUE ADD ? ? ? trailing")
    assert parse("QUEUE ADD ? ?") == QueueAdd(path=Param(1, Slot.TEXT), payload=Param(2, Slot.TEXT))


def test_parse_keeps_no_state_between_threads() -> None:
    statements = {
        "QUEUE ADD ? ?": QueueAdd(path=Param(1, Slot.TEXT), payload=Param(2, Slot.TEXT)),
        "QUEUE ADD $2 $1": QueueAdd(path=Param(2, Slot.TEXT), payload=Param(1, Slot.TEXT)),
        "QUEUE ADD PRIORITY ? ? ?": QueueAdd(
            path=Param(2, Slot.TEXT), payload=Param(3, Slot.TEXT), priority=Param(1, Slot.INT8)
        ),
    }
    failures: list[str] = []

    def work(text: str, expected: QueueAdd) -> None:
        for _ in range(2000):
            if parse(text) != expected:
                failures.append(text)
                return

    threads = [threading.Thread(target=work, args=item) for item in statements.items() for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# ---- the parser cache ------------------------------------------------------------------


SAMPLES = ["QUEUE ADD PRIORITY 1 'p' 'x'", "QUEUE ACK $1::int8 NULL", "CACHE SET TTL 5 k v;"]


def _parses(lark: Lark) -> list[Any]:
    run = Driver(lark).parse
    return [run(text)[0] for text in SAMPLES]


def test_parser_cache_is_written_once_and_loaded_after(tmp_path: Path) -> None:
    built = build_lark(CommandBuilder(), [tmp_path])
    files = list(tmp_path.iterdir())
    assert [f.suffix for f in files] == [".cache"]  # no temporary file left behind
    stamp = files[0].stat().st_mtime_ns
    loaded = build_lark(CommandBuilder(), [tmp_path])
    assert files[0].stat().st_mtime_ns == stamp
    assert _parses(loaded) == _parses(built) == [parse(text) for text in SAMPLES]


def test_parser_builds_without_a_usable_cache_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    lark = build_lark(CommandBuilder(), [blocker / "cache"])
    assert _parses(lark) == [parse(text) for text in SAMPLES]
    assert build_lark(CommandBuilder(), []) is not None  # [] turns the cache off


def test_a_corrupt_cache_file_is_rebuilt(tmp_path: Path) -> None:
    build_lark(CommandBuilder(), [tmp_path])
    (cache,) = tmp_path.iterdir()
    cache.write_bytes(b"not a pickle")
    lark = build_lark(CommandBuilder(), [tmp_path])
    assert _parses(lark) == [parse(text) for text in SAMPLES]


def test_driver_refuses_a_lark_without_our_lexer() -> None:
    with pytest.raises(TypeError):
        Driver(STOCK)


def test_every_literal_terminal_takes_the_fast_path() -> None:
    lexer = OURS.parser.lexer
    assert isinstance(lexer, StatementLexer)
    assert sorted(name for name, _ in lexer.finishers.values()) == [
        "BT", "DOLLAR", "DQ", "ESTRING", "STRING",
    ]


def test_errors_carry_lark_types() -> None:
    with pytest.raises(UnexpectedInput):
        DRIVER.parse("QUEUE ADD p 'unterminated")


def test_every_rule_but_the_inlined_start_has_a_builder_method() -> None:
    """So Lark's default callback, which builds a Tree, is never reached (no tree kept)."""
    names = {rule.origin.name for rule in OURS.rules}
    missing = {name for name in names if not callable(getattr(CommandBuilder, str(name), None))}
    assert missing == {"start"}
    start_rules = [rule for rule in OURS.rules if rule.origin.name == "start"]
    assert all(rule.options.expand1 for rule in start_rules)  # `?start`: its one child
