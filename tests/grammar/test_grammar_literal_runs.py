"""``tokens.literal_runs`` (the shape cache's one-regex scan) against ``tokens.tokenize``."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cubequeue.grammar import StatementCache, parse
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.lexical import decode_string
from cubequeue.grammar.shapes import shape_of
from cubequeue.grammar.tokens import LITERAL_KINDS, literal_runs, tokenize

#: pieces that meet every rule of the scan: quotes and their doubling and escapes, E'',
#: dollar tags, numbers and junk, placeholders, casts, comments, word-internal $ and
#: digits, non-ASCII letters, and the operators the scan leaves to tokenize
PIECES = st.sampled_from(
    [" ", "  ", "\t", "\n", "'", "''", "\\", "\\'", "E'", "e'", "x'", '"', '""', "`", "``",
     "$", "$$", "$a$", "$1", "$12", "?", "::", ":", "1", "5", ".5", "1.5e3", "5abc", "1.e",
     "-", "--", "/", "/*", "*/", ";", "a", "E", "k1", "a$", "é", "\u00a0", "\x1c", "\x01",
     "\x00", "QUEUE", "ADD", "CACHE", "SET", "GET", "NX", "TTL", "PRIORITY", "(", ")", "#"]
)
TEXTS = st.lists(PIECES, max_size=14).map("".join)


def literals_of(sql: str) -> list[tuple[str, str]]:
    return [(kind, sql[s:e]) for kind, s, e in tokenize(sql) if kind in LITERAL_KINDS]


@settings(deadline=None, max_examples=2000)
@given(TEXTS)
def test_literal_runs_cut_where_tokenize_does(sql: str) -> None:
    cut = literal_runs(sql)
    if cut is None:
        return
    pieces, texts = cut
    runs, kinds = pieces[::2], pieces[1::2]
    assert len(runs) == len(texts) + 1
    assert "".join(r + text for r, text in zip(runs, [*texts, ""], strict=True)) == sql
    assert list(zip(kinds, texts, strict=True)) == literals_of(sql), sql
    assert not any(kind in LITERAL_KINDS for run in runs for kind, _, _ in tokenize(run))


def test_literal_runs_hand_cases() -> None:
    sql = "QUEUE ADD PRIORITY -3 E'a\\'b' 'it''s' $t$x$t$ \"d\"\"q\" `b` k1 $1::int8 .5"
    pieces, texts = literal_runs(sql)  # type: ignore[misc]
    runs, kinds = pieces[::2], pieces[1::2]
    assert list(zip(kinds, texts, strict=True)) == [("NUMBER", "3"), ("ESTRING", "E'a\\'b'"), ("STRING", "'it''s'"),
                        ("DOLLAR", "$t$x$t$"), ("DQ", '"d""q"'), ("BT", "`b`"), ("NUMBER", ".5")]
    assert runs[0] == "QUEUE ADD PRIORITY -" and runs[-2] == " k1 $1::int8 "
    for hard in ["CACHE GET /* c */ 'k'", "CACHE GET 'k' -- c", "CACHE GET 'k", "CACHE GET \x01"]:
        assert literal_runs(hard) is None, hard
    assert shape_of("CACHE GET 'k") is None
    commented, spaced = shape_of("CACHE GET /* c */ 'k'"), shape_of("CACHE  GET 'j'")
    assert commented is not None and spaced is not None
    assert commented == (spaced[0], ["'k'"])


def outcome(run, sql):  # type: ignore[no-untyped-def]
    try:
        return ("ok", run(sql))
    except QueueError as exc:
        return ("error", type(exc), exc.message, exc.position)


SHARED = StatementCache()
HEADS = st.sampled_from(["QUEUE ADD ", "CACHE SET ", "CACHE GET ", "QUEUE ACK ", "QUEUE RESULT_BLOCKING "])


@settings(deadline=None, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(HEADS, TEXTS)
def test_one_cache_across_odd_texts_answers_as_the_parse(head: str, tail: str) -> None:
    """One cache shared by every example, so texts of one key from different examples
    meet: a key that merged two different token sequences would fail here."""
    sql = head + tail
    for _ in range(3):  # shape miss, shape hit, exact-text hit
        assert outcome(SHARED.parse, sql) == outcome(parse, sql), sql


def reference_quoted_end(sql: str, pos: int, quote: str, backslashes: bool) -> int:
    """One character at a time, as the rule reads (tokens.py's module docstring)."""
    i = pos
    while i < len(sql):
        c = sql[i]
        if backslashes and c == "\\":
            i += 2
        elif c == quote:
            if sql.startswith(quote, i + 1):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return -1


@settings(deadline=None, max_examples=3000)
@given(st.text(alphabet="'\\\"a", max_size=24), st.sampled_from([("'", True), ('"', False)]))
def test_quoted_end_is_the_character_by_character_rule(body: str, quoting: tuple[str, bool]) -> None:
    from cubequeue.grammar.tokens import _quoted_end

    quote, backslashes = quoting
    sql = "E" + quote + body
    assert _quoted_end(sql, 2, quote, backslashes) == reference_quoted_end(sql, 2, quote, backslashes)


_REFERENCE_ESCAPE = re.compile(r"\\([\s\S])|''")
_CONTROL = {"0": "\0", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def reference_decode_string(token: str) -> str:
    """The rule as one regex pass (what decode_string did before its split loop)."""

    def one(m: re.Match[str]) -> str:
        ch = m.group(1)
        return "'" if ch is None else _CONTROL.get(ch, ch)

    return _REFERENCE_ESCAPE.sub(one, token[1:-1])


@settings(deadline=None, max_examples=3000)
@given(st.text(alphabet="'\\\"anZ0x\x01\x02", max_size=24))
def test_decode_string_is_the_one_pass_rule(body: str) -> None:
    sql = "'" + body
    end = reference_quoted_end(sql, 1, "'", True)
    if end < 0:
        return
    token = sql[:end]
    assert decode_string(token) == reference_decode_string(token), token
