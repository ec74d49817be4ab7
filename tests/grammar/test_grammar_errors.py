"""Every parse error of the contract: message wording (§1.1, §1.3, §4.7, §5.1, §8 rules 3
and 10) and SQLSTATE."""

from __future__ import annotations

import pytest

from cubequeue.grammar import parse
from cubequeue.storage.errors import InvalidParameterValue, QueueError, SyntaxError

ERRORS = [
    # unknown commands (§1.1, §4.7, §5.1)
    ("QUEUE foo", SyntaxError, "Unknown queue command: foo"),
    ("QUEUE FOO 'x'", SyntaxError, "Unknown queue command: foo"),
    ("QUEUE GETX 5", SyntaxError, "Unknown queue command: getx"),
    ("CACHE Bar 'k'", SyntaxError, "Unknown cache command: bar, available: SET|GET|KEYS|INC|REMOVE|TRUNCATE"),
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
    ("QUEUE ACK 'p'", SyntaxError, "found: EOF at Line: 1, Column: 14"),
    ("QUEUE ADD 'p' 'unterminated", SyntaxError, "Unterminated string literal, found: 'unterminated at Line: 1, Column: 15"),
    ("QUEUE ADD 'p' $$open", SyntaxError, "Unterminated string literal"),
    ("QUEUE GET 5abc", SyntaxError, "found: 5abc"),
    ("SELECT 1", SyntaxError, "found: SELECT at Line: 1, Column: 1"),
    ("", SyntaxError, "found: EOF"),
    ("QUEUE GET $x", SyntaxError, "found: $"),
    # integers (§1.3, §8 rule 10: 22023)
    ("QUEUE RETRIEVE CONCURRENCY -1 'p'", InvalidParameterValue, "concurrency must be a positive integer, actual: -1"),
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
    ("QUEUE ADD_AND_RETRIEVE 'p' 'v' -1", InvalidParameterValue, "concurrency must be a positive integer, actual: -1"),
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
