"""What one plain-SQL statement may cost, checked before sqlglot reads it.

sqlglot runs on the event loop and its time and memory grow with the tokens it reads (a
SELECT of a few MiB with a long IN list held the loop for seconds and took a GiB; the
figures are in bench/RESULTS-notes.md, "Timings kept out of the code"), so a statement is
measured first, with the grammar's tokenizer, which stops counting at the limit:

* its size in UTF-8 bytes: ``--max-sql-statement-bytes`` (default 1 MiB);
* its tokens (a quoted string, whatever its length, is one): :data:`MAX_SQL_TOKENS`,
  which bounds sqlglot's parse to a short hold of the loop; a psql catalog query has a
  few hundred;
* once parsed, its expression nodes, :data:`MAX_EXPRESSION_NODES` (each one is a closure
  run per row), and the items of one ``IN (…)`` list, :data:`MAX_IN_LIST_ITEMS`.

Each is 54000 naming the limit, as is a system table above ``--max-sql-rows``
(:func:`too_many_rows`; the executor counts the rows before they are built). Dialect
statements (``QUEUE``/``CACHE``) never come here: their own parser is linear and their
payloads are bounded by ``--max-payload-bytes``.
This module does not import sqlglot, so the wire can check before the first SELECT
loads it.
"""

from __future__ import annotations

from itertools import islice
from typing import Final

from cubequeue.grammar import tokens as t
from cubequeue.grammar.errors import LimitExceeded
from cubequeue.grammar.lexical import MAX_INT_DIGITS, shown

from .errors import NumericValueOutOfRange, UndefinedParameter

__all__ = [
    "MAX_EXPRESSION_NODES",
    "MAX_IN_LIST_ITEMS",
    "MAX_SQL_STATEMENT_BYTES",
    "MAX_SQL_TOKENS",
    "bound_statement",
    "check_expression_nodes",
    "check_in_list",
    "check_parameter_number",
    "too_many_rows",
]

#: default of ``--max-sql-statement-bytes``
MAX_SQL_STATEMENT_BYTES: Final = 1 << 20
#: tokens of one plain-SQL statement
MAX_SQL_TOKENS: Final = 10_000
#: sqlglot nodes of one parsed statement
MAX_EXPRESSION_NODES: Final = 10_000
#: items of one ``IN (…)`` list
MAX_IN_LIST_ITEMS: Final = 1_000
#: the highest ``$n``: a Bind message counts its values in 16 bits
MAX_PARAMETER_NUMBER: Final = 65_535
#: characters of an ``INTERVAL '…'`` literal (quotes included): sqlglot splits one with a
#: regex whose time grows with the square of a digit run's length
MAX_INTERVAL_LITERAL_CHARS: Final = 256
_STRINGS: Final = frozenset((t.STRING, t.ESTRING, t.DOLLAR))


def _utf8_len_over(sql: str, limit: int) -> int | None:
    """``sql``'s UTF-8 length when it is above ``limit``, else None (no copy when the
    character count alone decides)."""
    if len(sql) > limit:
        return len(sql.encode("utf-8", "surrogatepass"))
    if len(sql) * 4 <= limit:
        return None
    size = len(sql.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


def bound_statement(sql: str, max_bytes: int = MAX_SQL_STATEMENT_BYTES) -> None:
    """54000 when ``sql`` is larger than ``max_bytes`` or has more than
    :data:`MAX_SQL_TOKENS` tokens; costs at most that many tokens' scanning."""
    size = _utf8_len_over(sql, max_bytes)
    if size is not None:
        raise LimitExceeded(
            f"plain SQL statement of {size} bytes exceeds --max-sql-statement-bytes "
            f"({max_bytes})",
            hint="QUEUE and CACHE statements are not limited by it; "
            "for large values, pass parameters",
        )
    counted = 0
    word = (0, 0)  # the last token, when a word
    for kind, start, end in islice(t.tokenize(sql, backticks=False), MAX_SQL_TOKENS + 1):
        counted += 1
        if kind == t.PARAM and end - start > 1:
            check_parameter_number(sql[start + 1 : end], start)
        elif kind == t.NUMBER and end - start > MAX_INT_DIGITS:
            _check_long_number(sql[start:end], start)
        elif (end - start > MAX_INTERVAL_LITERAL_CHARS and kind in _STRINGS
              and sql[word[0] : word[1]].lower() == "interval"):
            raise LimitExceeded(
                f"INTERVAL literal of {end - start} characters exceeds "
                f"{MAX_INTERVAL_LITERAL_CHARS} (the limit of an interval literal)",
                position=start + 1)
        word = (start, end) if kind == t.WORD else (0, 0)
    if counted > MAX_SQL_TOKENS:
        raise LimitExceeded(
            f"plain SQL statement has more than {MAX_SQL_TOKENS} tokens "
            f"(the limit of tokens per plain SQL statement)"
        )


def check_parameter_number(digits: str, start: int | None = None) -> None:
    """42P02 for ``$n`` past :data:`MAX_PARAMETER_NUMBER`: no Bind can carry it, and a
    plan sized by it (a tuple of n parameter types) would hold the loop and memory."""
    significant = digits.lstrip("0")
    if len(significant) > 5 or int(significant or "0") > MAX_PARAMETER_NUMBER:
        raise UndefinedParameter(f"there is no parameter ${shown(digits)}",
                                 position=None if start is None else start + 1)


def _check_long_number(text: str, start: int) -> None:
    """22003 for an integer literal with more digits than any integer type holds, before
    sqlglot or a compiler calls ``int()`` on it (Python refuses past 4,300 digits;
    grammar.lexical.MAX_INT_DIGITS)."""
    if text.isdigit() and len(text.lstrip("0")) > MAX_INT_DIGITS:
        raise NumericValueOutOfRange(f"value {shown(text)} is out of range for type bigint",
                                     position=start + 1)


def check_expression_nodes(count: int) -> None:
    """54000 when a parsed statement has more than :data:`MAX_EXPRESSION_NODES` nodes."""
    if count > MAX_EXPRESSION_NODES:
        raise LimitExceeded(
            f"plain SQL statement has {count} expression nodes, more than "
            f"{MAX_EXPRESSION_NODES} (the limit of expression nodes per statement)"
        )


def check_in_list(count: int) -> None:
    """54000 for an ``IN (…)`` list longer than :data:`MAX_IN_LIST_ITEMS`."""
    if count > MAX_IN_LIST_ITEMS:
        raise LimitExceeded(
            f"IN list of {count} items exceeds {MAX_IN_LIST_ITEMS} "
            "(the limit of items per IN list)"
        )


#: what reads less than a whole system table. Plain SQL reads the table whole before
#: WHERE, LIMIT or count(*) apply, so none of those gets under ``--max-sql-rows``.
_READ_LESS: Final = {
    "queue": "QUEUE LIST / PENDING / ACTIVE '<prefix>' list one prefix's items, and "
             "system.queue_prefixes counts every prefix's items",
    "queue_prefixes": "QUEUE LIST / PENDING / ACTIVE '<prefix>' list one prefix's items",
    "queue_results": "QUEUE RESULT '<key>' reads one result",
    "cache": "CACHE KEYS '<prefix>' lists one prefix's keys, and CACHE GET '<key>' reads one",
}


def too_many_rows(table: str, limit: int) -> LimitExceeded:
    """54000 for ``system.<table>`` above ``--max-sql-rows``; the hint names what works
    instead (WHERE, LIMIT and count(*) do not: the whole table is read first)."""
    instead = _READ_LESS.get(table)
    return LimitExceeded(
        f"system.{table} holds more than {limit} rows, the most plain SQL reads "
        f"(--max-sql-rows={limit})",
        hint=(f"{instead}; " if instead else "")
        + "WHERE, LIMIT and count(*) do not help, as the whole table is read first; "
        "an operator can raise --max-sql-rows",
    )
