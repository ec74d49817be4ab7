"""The statements only a pre-aggregation store gets, refused with one clear error.

Cube sends them when Cube Store is also its pre-aggregation store (CREATE TABLE, INSERT,
reads of ``information_schema`` or a ``*pre_aggregations`` schema); cubequeue serves only
the queue and the cache, so they get an error that says so instead of a syntax error.
The WebSocket session checks plain SQL with :func:`refuse_preaggregation` before it runs
(a dialect statement is never checked: its payload may mention anything).
"""

from __future__ import annotations

import re

from cubequeue.grammar import first_word, strip_leading_comments
from cubequeue.grammar.errors import FeatureNotSupported

__all__ = ["PREAGGREGATION_ERROR", "is_preaggregation", "refuse_preaggregation"]

PREAGGREGATION_ERROR = (
    "cubequeue serves Cube Store's queue and cache only; "
    "pre-aggregation statements are not supported: {words}"
)

#: first words of the statements Cube sends to build and query pre-aggregations
_PREAGG_FIRST_WORDS = frozenset(
    {"create", "insert", "drop", "alter", "delete", "update", "truncate", "export", "import"}
)
_PREAGG_ANYWHERE = re.compile(
    r"\binformation_schema\b|\bfrom\s+[`\"]?\w*pre_aggregations\b", re.IGNORECASE
)
_FIRST_WORDS = 3
_MAX_WORDS_CHARS = 80


def is_preaggregation(sql: str) -> bool:
    """CREATE/INSERT/DROP/ALTER…, or anything reading information_schema or a
    ``*pre_aggregations`` schema: statements only a pre-aggregation store would get."""
    if first_word(sql) in _PREAGG_FIRST_WORDS:
        return True
    return _PREAGG_ANYWHERE.search(sql) is not None


def refuse_preaggregation(sql: str) -> None:
    """Raise 0A000 naming the statement's first words when it is a pre-aggregation one."""
    if is_preaggregation(sql):
        raise FeatureNotSupported(PREAGGREGATION_ERROR.format(words=_first_words(sql)))


def _first_words(sql: str) -> str:
    """The statement's first words, for the error text (comments skipped)."""
    text = " ".join(strip_leading_comments(sql).split()[:_FIRST_WORDS])
    if len(text) > _MAX_WORDS_CHARS:
        text = text[: _MAX_WORDS_CHARS - 1] + "…"
    return text
