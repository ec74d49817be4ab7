"""split_statements() and is_dialect()."""

from __future__ import annotations

import pytest

from cubequeue.grammar import is_dialect, split_statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("QUEUE GET 1; QUEUE GET 2", ["QUEUE GET 1", "QUEUE GET 2"]),
        ("QUEUE GET 1;", ["QUEUE GET 1"]),
        ("", []),
        ("  ;; ; ", []),
        ("-- only a comment", []),
        ("/* a */ ; -- b\n", []),
        ("CACHE SET k 'a;b'; X", ["CACHE SET k 'a;b'", "X"]),
        ("CACHE SET k 'it''s;'; X", ["CACHE SET k 'it''s;'", "X"]),
        ("CACHE SET k 'a\\';b'; X", ["CACHE SET k 'a\\';b'", "X"]),
        ("CACHE SET k E'a\\';b'; X", ["CACHE SET k E'a\\';b'", "X"]),
        ("CACHE SET k 'a\\\\'; X", ["CACHE SET k 'a\\\\'", "X"]),
        ('CACHE SET "k;" `v;`; X', ['CACHE SET "k;" `v;`', "X"]),
        ('CACHE SET "a""b;" v; X', ['CACHE SET "a""b;" v', "X"]),
        ("CACHE SET k $$a;b$$; X", ["CACHE SET k $$a;b$$", "X"]),
        ("CACHE SET k $t$a;$$;b$t$; X", ["CACHE SET k $t$a;$$;b$t$", "X"]),
        ("QUEUE GET $1; X", ["QUEUE GET $1", "X"]),
        ("SELECT a$b$; X", ["SELECT a$b$", "X"]),
        ("A -- c;\n B; C", ["A -- c;\n B", "C"]),
        ("A /* c; /* nested; */ still; */ B; C", ["A /* c; /* nested; */ still; */ B", "C"]),
        ("A 'unterminated; B", ["A 'unterminated; B"]),
        ("A $$unterminated; B", ["A $$unterminated; B"]),
        ("A - B / C; D", ["A - B / C", "D"]),
    ],
)
def test_split(sql, expected):
    assert split_statements(sql) == expected


def test_split_large_payload_is_fast():
    body = "x;" * 2_500_000
    stmts = split_statements(f"CACHE SET k '{body}'; CACHE GET k")
    assert len(stmts) == 2
    assert stmts[0] == f"CACHE SET k '{body}'"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("QUEUE GET 1", True),
        ("  queue get 1", True),
        ("-- c\n/* d */Cache GET k", True),
        ("SYS CACHESTORE INFO", True),
        ("SYS", True),
        ("SELECT 1", False),
        ("QUEUEX", False),
        ("system.queue", False),
        ("", False),
        (" " * 100_000 + "x", False),
    ],
)
def test_is_dialect(sql, expected):
    assert is_dialect(sql) is expected
