"""``split_statements``: a simple-Query string → its statements, split on ``;``.

A ``;`` inside a literal, a quoted word or a comment does not split: the text is read by
the one tokenizer (``tokens.py``), with the dialect's quoting rules (``docs/dialect.md``
§1.2, §8 rule 4): ``'…'`` and ``E'…'`` with backslash escapes
(``standard_conforming_strings = off``), ``"…"``, `` `…` ``, ``$$…$$`` /
``$tag$…$tag$``, ``--`` line comments and nesting ``/* */`` comments. An unterminated
literal or comment runs to the end of the text; the parser reports it.

Statements are returned stripped of surrounding whitespace; blank ones (whitespace and
comments only) are dropped, so an all-blank string gives ``[]`` and the server answers
EmptyQueryResponse.
"""

from __future__ import annotations

from cubequeue.grammar.tokens import OP, next_token

__all__ = ["split_statements"]


def split_statements(sql: str) -> list[str]:
    """The non-blank statements of ``sql`` without their ``;`` (see module docstring)."""
    if ";" not in sql:  # the usual case: one statement
        return [sql.strip()] if next_token(sql, 0) is not None else []
    out: list[str] = []
    start = pos = 0
    blank = True
    while True:
        tok = next_token(sql, pos)
        if tok is None:
            break
        kind, begin, pos = tok
        if kind == OP and sql[begin] == ";":
            if not blank:
                out.append(sql[start:begin].strip())
            start = pos
            blank = True
        else:
            blank = False
    if not blank:
        out.append(sql[start:].strip())
    return out
