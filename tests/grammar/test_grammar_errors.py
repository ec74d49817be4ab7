"""Every parse error of the contract: message wording (§1.1, §1.3, §4.7, §5.1, §8 rules 3
and 10) and SQLSTATE."""

from __future__ import annotations

import pytest

from cubequeue.grammar import parse
from cubequeue.grammar.errors import InvalidParameterValue, QueueError, SyntaxError

ERRORS = [
    # unknown commands (§1.1, §4.7, §5.1)
    ("QUEUE foo", SyntaxError, "Unknown queue command: foo"),
    ("QUEUE FOO 'x'", SyntaxError, "Unknown queue command: foo"),
    ("QUEUE GETX 5", SyntaxError, "Unknown queue command: getx"),
    ("CACHE Bar 'k'", SyntaxError, "Unknown cache command: bar, available: SET|GET|KEYS|INCR|REMOVE|TRUNCATE|PURGE"),
    ("SYS CACHESTORE FOO", SyntaxError, "Unknown cachestore command"),
    ("SYS CACHESTORE", SyntaxError, "Unknown cachestore command"),
    ("SYS FOO", SyntaxError, "Unknown system command"),
    ("QUEUE 'add'", SyntaxError, "Invalid token: 'add', expected Word (command)"),
    ("CACHE 5", SyntaxError, "Invalid token: 5, expected Word (command)"),
    ("QUEUE", SyntaxError, "Invalid token: EOF, expected Word (command)"),
    # duplicate options (§8 rule 3)
    ("QUEUE ADD PRIORITY 1 PRIORITY 2 'p' 'v'", SyntaxError, "Duplicate option: PRIORITY"),
    ("QUEUE ADD EXCLUSIVE EXCLUSIVE 'p' 'v'", SyntaxError, "Duplicate option: EXCLUSIVE"),
    ("QUEUE ADD ORPHANED 1 orphaned 2 'p' 'v'", SyntaxError, "Duplicate option: ORPHANED"),
    ("QUEUE ADD EXTERNAL_ID 'a' EXTERNAL_ID 'b' 'p' 'v'", SyntaxError, "Duplicate option: EXTERNAL_ID"),
    ("QUEUE ADD_AND_RETRIEVE PRIORITY 1 PRIORITY 2 'p' 'v' 1", SyntaxError, "Duplicate option: PRIORITY"),
    ("QUEUE RETRIEVE EXTENDED EXTENDED 'p'", SyntaxError, "Duplicate option: EXTENDED"),
    ("QUEUE RETRIEVE CONCURRENCY 1 CONCURRENCY 2 'p'", SyntaxError, "Duplicate option: CONCURRENCY"),
    ("QUEUE LIST WITH_PAYLOAD WITH_PAYLOAD 'p'", SyntaxError, "Duplicate option: WITH_PAYLOAD"),
    ("CACHE SET NX NX 'k' 'v'", SyntaxError, "Duplicate option: NX"),
    ("CACHE SET TTL 1 TTL 2 'k' 'v'", SyntaxError, "Duplicate option: TTL"),
    # trailing tokens (§8 rule 3)
    ("CACHE REMOVE 'key_to_rm' 'myvalue';", SyntaxError, "Expected: end of statement, found: 'myvalue' at Line: 1, Column: 26"),
    ("QUEUE RETRIEVE CONCURRENCY 1 EXTENDED 'p' 'q'", SyntaxError, "found: 'q' at Line: 1, Column: 43"),
    ("QUEUE TRUNCATE;;", SyntaxError, "Expected: end of statement, found: ; at Line: 1, Column: 16"),
    ("QUEUE ACK 'p'\n  'r'\n  extra", SyntaxError, "found: extra at Line: 3, Column: 3"),
    # missing arguments, bad tokens
    ("QUEUE ACK 'p'", SyntaxError, "Expected: literal string, found: EOF at Line: 1, Column: 14"),
    ("QUEUE ADD 'p' 'unterminated", SyntaxError, "Unterminated string literal, found: 'unterminated at Line: 1, Column: 15"),
    ("QUEUE ADD 'p' $$open", SyntaxError, "Unterminated string literal"),
    ("QUEUE GET 5abc", SyntaxError, "found: 5abc"),
    ("SELECT 1", SyntaxError, "found: SELECT at Line: 1, Column: 1"),
    ("", SyntaxError, "found: EOF"),
    ("QUEUE GET $x", SyntaxError, "found: $"),
    # integers (§1.3, §8 rule 10: 22023)
    ("QUEUE RETRIEVE CONCURRENCY -1 'p'", InvalidParameterValue, "concurrency must be a non-negative integer, actual: -1"),
    ("QUEUE RETRIEVE CONCURRENCY 1.5 'p'", InvalidParameterValue, "concurrency must be a valid integer, error: invalid digit found in string"),
    ("QUEUE RETRIEVE CONCURRENCY 4294967296 'p'", InvalidParameterValue, "concurrency must be a valid integer, error: number too large to fit in target type"),
    ("QUEUE ADD ORPHANED -5 'p' 'v'", InvalidParameterValue, "orphaned must be a positive integer, actual: -5"),
    ("QUEUE ADD PRIORITY 9223372036854775808 'p' 'v'", InvalidParameterValue, "priority must be a valid integer, error: number too large"),
    ("QUEUE ADD PRIORITY -9223372036854775809 'p' 'v'", InvalidParameterValue, "priority must be a valid integer, error: number too small"),
    ("CACHE SET TTL -5 'k' 'v'", InvalidParameterValue, "ttl must be a positive integer, actual: -5"),
    ("QUEUE RESULT_BLOCKING -1 'p'", InvalidParameterValue, "timeout must be a positive integer, actual: -1"),
    ("QUEUE RESULT_BLOCKING 18446744073709551616 'p'", InvalidParameterValue, "timeout must be a valid integer"),
    ("QUEUE TO_CANCEL -1 1 'p'", InvalidParameterValue, "heartbeat timeout must be a positive integer, actual: -1"),
    ("QUEUE TO_CANCEL 1 4294967296 'p'", InvalidParameterValue, "orphaned timeout must be a valid integer"),
    ("QUEUE STALLED 1e3 'p'", InvalidParameterValue, "heartbeat timeout must be a valid integer, error: invalid digit"),
    ("QUEUE ORPHANED -7 'p'", InvalidParameterValue, "orphaned timeout must be a positive integer, actual: -7"),
    ("QUEUE GET -5", InvalidParameterValue, "id must be a positive integer, actual: -5"),
    ("QUEUE ACK 18446744073709551616 NULL", InvalidParameterValue, "id must be a valid integer"),
    ("QUEUE ADD_AND_RETRIEVE 'p' 'v' -1", InvalidParameterValue, "concurrency must be a non-negative integer, actual: -1"),
    ("SYS CLOCK ADVANCE -1", InvalidParameterValue, "ms must be a positive integer, actual: -1"),
    # placeholders (§8 rules 4, 5)
    ("QUEUE ADD $1 ?", SyntaxError, "cannot mix $n and ? placeholders"),
    ("QUEUE ADD $1 $3", SyntaxError, "could not determine data type of parameter $2"),
    ("QUEUE ADD $0 'v'", SyntaxError, "there is no parameter $0"),
    ("QUEUE RESULT_BLOCKING $1 $1", SyntaxError, "inconsistent types deduced for parameter $1"),
    ("QUEUE ADD 'p' E'\\U00110000'", SyntaxError, "invalid Unicode escape value"),
]


@pytest.mark.parametrize(("sql", "kind", "message"), ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_error(sql, kind, message):
    with pytest.raises(QueueError) as info:
        parse(sql)
    err = info.value
    assert type(err) is kind
    assert message in err.message
    assert err.sqlstate == kind.sqlstate


# The "Expected:" part names what the failing slot takes in sqlparser's words, as the
# contract quotes them (§1.3, §3.4, §8 rule 10): IDENT / IDENT-P → identifier, STR / STR-P
# → literal string, INT and QKEY (parsed as INT(id) unless a word or string) → literal
# number. Whole messages: the position suffix is cubequeue's, the rest is the contract's.
FULL_MESSAGES = [
    # the audit's two cases (§3.4, §1.3)
    ("QUEUE ACK 1", "Expected: literal string, found: EOF at Line: 1, Column: 12"),
    ("QUEUE ADD PRIORITY x 'a' 'b'", "Expected: literal number, found: x at Line: 1, Column: 20"),
    # INT slots: EOF, a wrong token, after a sign, after the option it belongs to
    ("QUEUE ADD PRIORITY", "Expected: literal number, found: EOF at Line: 1, Column: 19"),
    ("QUEUE ADD ORPHANED 'x' 'p' 'v'", "Expected: literal number, found: 'x' at Line: 1, Column: 20"),
    ("QUEUE ADD PRIORITY - x 'p' 'v'", "Expected: literal number, found: x at Line: 1, Column: 22"),
    ("QUEUE ADD_AND_RETRIEVE 'p' 'v'", "Expected: literal number, found: EOF at Line: 1, Column: 31"),
    ("QUEUE ADD_AND_RETRIEVE 'p' 'v' x", "Expected: literal number, found: x at Line: 1, Column: 32"),
    ("QUEUE RETRIEVE CONCURRENCY , 'p'", "Expected: literal number, found: , at Line: 1, Column: 28"),
    ("QUEUE TO_CANCEL 1 'p'", "Expected: literal number, found: 'p' at Line: 1, Column: 19"),
    ("QUEUE STALLED", "Expected: literal number, found: EOF at Line: 1, Column: 14"),
    ("QUEUE ORPHANED p", "Expected: literal number, found: p at Line: 1, Column: 16"),
    ("QUEUE RESULT_BLOCKING 'k'", "Expected: literal number, found: 'k' at Line: 1, Column: 23"),
    ("CACHE SET TTL NX 'k' 'v'", "Expected: literal number, found: NX at Line: 1, Column: 15"),
    ("SYS CLOCK ADVANCE", "Expected: literal number, found: EOF at Line: 1, Column: 18"),
    # QKEY slots: a word or string is a path, anything else must be a number (§1.3)
    ("QUEUE GET", "Expected: literal number, found: EOF at Line: 1, Column: 10"),
    ("QUEUE CANCEL ,", "Expected: literal number, found: , at Line: 1, Column: 14"),
    ("QUEUE HEARTBEAT (", "Expected: literal number, found: ( at Line: 1, Column: 17"),
    ("QUEUE ACK", "Expected: literal number, found: EOF at Line: 1, Column: 10"),
    ("QUEUE MERGE_EXTRA ; '{}'", "Expected: literal number, found: ; at Line: 1, Column: 19"),
    ("QUEUE RESULT", "Expected: literal number, found: EOF at Line: 1, Column: 13"),
    ("QUEUE RESULT EXTERNAL_ID 'e'", "Expected: literal number, found: EOF at Line: 1, Column: 29"),
    ("QUEUE RESULT_BLOCKING 5 ,", "Expected: literal number, found: , at Line: 1, Column: 25"),
    # IDENT / IDENT-P slots: paths, prefixes, cache keys (options skipped, §1.3)
    ("QUEUE ADD", "Expected: identifier, found: EOF at Line: 1, Column: 10"),
    ("QUEUE ADD PRIORITY 1 ,", "Expected: identifier, found: , at Line: 1, Column: 22"),
    ("QUEUE ADD EXTERNAL_ID 'e' EXCLUSIVE", "Expected: identifier, found: EOF at Line: 1, Column: 36"),
    ("QUEUE ADD_AND_RETRIEVE ORPHANED 5 (", "Expected: identifier, found: ( at Line: 1, Column: 35"),
    ("QUEUE RETRIEVE", "Expected: identifier, found: EOF at Line: 1, Column: 15"),
    ("QUEUE RETRIEVE CONCURRENCY 2 5", "Expected: identifier, found: 5 at Line: 1, Column: 30"),
    ("QUEUE LIST WITH_PAYLOAD", "Expected: identifier, found: EOF at Line: 1, Column: 24"),
    ("QUEUE PENDING 1", "Expected: identifier, found: 1 at Line: 1, Column: 15"),
    ("QUEUE ACTIVE -", "Expected: identifier, found: - at Line: 1, Column: 14"),
    ("QUEUE TO_CANCEL 1 2", "Expected: identifier, found: EOF at Line: 1, Column: 20"),
    ("QUEUE STALLED 1 2", "Expected: identifier, found: 2 at Line: 1, Column: 17"),
    ("QUEUE PURGE PENDING", "Expected: identifier, found: EOF at Line: 1, Column: 20"),
    ("CACHE SET NX", "Expected: identifier, found: EOF at Line: 1, Column: 13"),
    ("CACHE SET TTL 5 7 'v'", "Expected: identifier, found: 7 at Line: 1, Column: 17"),
    ("CACHE GET", "Expected: identifier, found: EOF at Line: 1, Column: 10"),
    ("CACHE KEYS 1", "Expected: identifier, found: 1 at Line: 1, Column: 12"),
    ("CACHE REMOVE", "Expected: identifier, found: EOF at Line: 1, Column: 13"),
    ("CACHE INCR ,", "Expected: identifier, found: , at Line: 1, Column: 12"),
    ("CACHE PURGE", "Expected: identifier, found: EOF at Line: 1, Column: 12"),
    # STR / STR-P slots: payloads, values, ACK's result, JSON, EXTERNAL_ID's value
    ("QUEUE ADD 'p'", "Expected: literal string, found: EOF at Line: 1, Column: 14"),
    ("QUEUE ADD 'p' 5", "Expected: literal string, found: 5 at Line: 1, Column: 15"),
    ("QUEUE ADD ? ,", "Expected: literal string, found: , at Line: 1, Column: 13"),
    ("QUEUE ADD EXTERNAL_ID", "Expected: literal string, found: EOF at Line: 1, Column: 22"),
    ("QUEUE ADD_AND_RETRIEVE 'p' -1 1", "Expected: literal string, found: - at Line: 1, Column: 28"),
    ("QUEUE ACK 'p' 5", "Expected: literal string, found: 5 at Line: 1, Column: 15"),
    ("QUEUE ACK $1::int8 ,", "Expected: literal string, found: , at Line: 1, Column: 20"),
    ("QUEUE MERGE_EXTRA 5", "Expected: literal string, found: EOF at Line: 1, Column: 20"),
    ("QUEUE MERGE_EXTRA 'k' 5", "Expected: literal string, found: 5 at Line: 1, Column: 23"),
    ("QUEUE RESULT EXTERNAL_ID 5 'k'", "Expected: literal string, found: 5 at Line: 1, Column: 26"),
    ("CACHE SET 'k'", "Expected: literal string, found: EOF at Line: 1, Column: 14"),
    ("CACHE SET NX TTL 5 'k' (", "Expected: literal string, found: ( at Line: 1, Column: 24"),
    # a complete statement: whatever follows is a trailing token (§8 rule 3)
    ("QUEUE GET 'k' ,", "Expected: end of statement, found: , at Line: 1, Column: 15"),
    ("QUEUE ADD ? ? (", "Expected: end of statement, found: ( at Line: 1, Column: 15"),
    ("CACHE SET 'k' 'v' 'w'", "Expected: end of statement, found: 'w' at Line: 1, Column: 19"),
    ("SYS CLOCK ADVANCE 5 x", "Expected: end of statement, found: x at Line: 1, Column: 21"),
    # line and column on a later line
    ("QUEUE ACK\n  'p'\n  ,", "Expected: literal string, found: , at Line: 3, Column: 3"),
]


@pytest.mark.parametrize(("sql", "message"), FULL_MESSAGES, ids=[m[0][:40] for m in FULL_MESSAGES])
def test_full_message(sql, message):
    with pytest.raises(SyntaxError) as info:
        parse(sql)
    assert info.value.message == message
    assert info.value.sqlstate == "42601"


# Every statement form cut short before each of its values, or given a comma there: the
# message names one of the contract's slot kinds, never a list of token names.
FORMS = [
    "QUEUE ADD EXCLUSIVE PRIORITY 1 ORPHANED 2 EXTERNAL_ID 'e' 'p' 'v'",
    "QUEUE ADD_AND_RETRIEVE PRIORITY 1 EXTERNAL_ID 'e' 'p' 'v' 3",
    "QUEUE RETRIEVE EXTENDED CONCURRENCY 2 'p'",
    "QUEUE ACK 'k' 'r'",
    "QUEUE CANCEL 'k'",
    "QUEUE GET 5",
    "QUEUE HEARTBEAT 'k'",
    "QUEUE MERGE_EXTRA 'k' '{}'",
    "QUEUE LIST WITH_PAYLOAD 'p'",
    "QUEUE PENDING 'p'",
    "QUEUE ACTIVE 'p'",
    "QUEUE TO_CANCEL 1 2 'p'",
    "QUEUE STALLED 1 'p'",
    "QUEUE ORPHANED 1 'p'",
    "QUEUE RESULT EXTERNAL_ID 'e' 'k'",
    "QUEUE RESULT_BLOCKING 1 'k'",
    "QUEUE PURGE ACTIVE 'p'",
    "CACHE SET NX TTL 5 'k' 'v'",
    "CACHE GET 'k'",
    "CACHE KEYS 'k'",
    "CACHE REMOVE 'k'",
    "CACHE INCR 'k'",
    "CACHE PURGE 'k'",
    "SYS CLOCK ADVANCE 5",
]
SLOT_WORDINGS = ("identifier", "literal string", "literal number", "end of statement")


def _cuts(form: str) -> list[str]:
    words = form.replace("?", "'?'").split(" ")
    cuts = [" ".join(words[:i]) for i in range(2, len(words) + 1)]
    return [c + tail for c in cuts for tail in ("", " ,", " $$x", " ?")]


@pytest.mark.parametrize("form", FORMS)
def test_every_slot_speaks_the_contracts_words(form):
    for sql in _cuts(form):
        try:
            parse(sql)
        except SyntaxError as err:
            if not err.message.startswith("Expected: "):
                continue  # a placeholder or duplicate-option error, checked above
            what = err.message.removeprefix("Expected: ").split(", found: ")[0]
            assert what in SLOT_WORDINGS, (sql, err.message)
        except QueueError:
            continue  # range errors (22023) are checked above


@pytest.mark.parametrize(
    ("sql", "position"),
    [
        ("QUEUE foo", 7),
        ("QUEUE ADD PRIORITY 1 PRIORITY 2 p v", 22),
        ("CACHE REMOVE 'k' 'v'", 18),
        ("QUEUE ACK 'p'", 14),
        ("QUEUE RETRIEVE CONCURRENCY -1 p", 28),
    ],
)
def test_error_position_is_one_based(sql, position):
    with pytest.raises(QueueError) as info:
        parse(sql)
    assert info.value.position == position


def test_sqlstates():
    assert SyntaxError.sqlstate == "42601"
    assert InvalidParameterValue.sqlstate == "22023"


def test_long_token_is_abbreviated_in_messages():
    with pytest.raises(SyntaxError) as info:
        parse("CACHE GET 'k' '" + "x" * 10_000 + "'")
    assert len(info.value.message) < 200
    assert "…" in info.value.message
