"""The Lark side of the grammar: contextual keywords, the built-parser cache, threads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from lark import Lark

from cubequeue.grammar import Param, Slot, parse
from cubequeue.grammar.commands import CacheSet, QueueAck, QueueAdd
from cubequeue.grammar.errors import SyntaxError
from cubequeue.grammar.parser import _lark, build_lark
from cubequeue.grammar.transform import CommandBuilder


def test_a_word_is_a_keyword_only_where_the_grammar_takes_it() -> None:
    assert parse("CACHE SET k ttl") == CacheSet(key="k", value="ttl")
    assert parse("cache set ttl 5 'ttl' nx") == CacheSet(key="ttl", value="nx", ttl=5)
    assert parse("QUEUE ADD PRIORITY 1 ttl v") == QueueAdd(path="ttl", payload="v", priority=1)
    assert parse("QUEUE ACK 1 null") == QueueAck(key=1, result=None)
    assert parse("QUEUE ACK 1 'null'") == QueueAck(key=1, result="null")


def test_keywords_are_ascii_case_insensitive_only() -> None:
    assert parse("qUeUe add p v") == QueueAdd(path="p", payload="v")
    with pytest.raises(SyntaxError):
        parse("ſys CLOCK")  # U+017F folds to "s" in Unicode, not in SQL


def test_a_cast_may_have_blanks_and_comments_before_its_type() -> None:
    assert parse("QUEUE ACK $1 :: /* c */ INT8 NULL") == QueueAck(
        key=Param(1, Slot.KEY, "int8"), result=None
    )


def test_comments_nest_in_statements() -> None:
    assert parse("QUEUE ADD /* a /* b */ c */ 'q:1' '{}'") == QueueAdd(path="q:1", payload="{}")
    with pytest.raises(SyntaxError, match="Unterminated comment"):
        parse("QUEUE ADD /* a /* b */ 'q:1' '{}'")


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
        for _ in range(500):
            if parse(text) != expected:
                failures.append(text)
                return

    threads = [threading.Thread(target=work, args=item) for item in statements.items() for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# ---- the built-parser cache ------------------------------------------------------------


SAMPLES = ["QUEUE ADD PRIORITY 1 'p' 'x'", "QUEUE ACK $1::int8 NULL", "CACHE SET TTL 5 k v;"]


def _parses(lark: Lark) -> list[Any]:
    return [lark.parse(text) for text in SAMPLES]


def test_parser_cache_is_written_once_and_loaded_after(tmp_path: Path) -> None:
    built = build_lark(CommandBuilder(), [tmp_path])
    files = list(tmp_path.iterdir())
    assert [f.suffix for f in files] == [".cache"]
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


def test_a_cache_directory_it_may_not_search_is_passed_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's ~/.cache under an inherited HOME: stat() itself is refused (EACCES,
    which Path.is_file does not swallow). Root may search anything, so the refusal is
    made by the patch."""
    refused = tmp_path / "someone-else"
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if refused in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    lark = build_lark(CommandBuilder(), [refused / "cache", tmp_path / "mine"])
    assert _parses(lark) == [parse(text) for text in SAMPLES]
    assert [f.suffix for f in (tmp_path / "mine").iterdir()] == [".cache"]


def test_a_corrupt_cache_file_is_rebuilt(tmp_path: Path) -> None:
    build_lark(CommandBuilder(), [tmp_path])
    (cache,) = tmp_path.iterdir()
    cache.write_bytes(b"not a pickle")
    lark = build_lark(CommandBuilder(), [tmp_path])
    assert _parses(lark) == [parse(text) for text in SAMPLES]


def test_every_rule_but_the_inlined_start_has_a_builder_method() -> None:
    """So Lark's default callback, which builds a Tree, is never reached (no tree kept)."""
    names = {rule.origin.name for rule in _lark.rules}
    missing = {name for name in names if not callable(getattr(CommandBuilder, str(name), None))}
    assert missing == {"start"}
    start_rules = [rule for rule in _lark.rules if rule.origin.name == "start"]
    assert all(rule.options.expand1 for rule in start_rules)  # `?start`: its one child
