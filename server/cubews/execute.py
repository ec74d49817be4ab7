"""Run one ``HttpQuery``: a dialect statement, plain SQL, or a refused pre-aggregation.

Dispatch follows Cube Store's (dialect doc §1.1): a statement whose first word is
QUEUE, CACHE or SYS goes to the dialect, through the shared :class:`Executor` (parse
cache, metrics, logs, the RESULT_BLOCKING wait). ``?`` placeholders are bound from the
message's typed parameters (:mod:`.params`). Other SQL goes to the plain-SQL module
(``SELECT 1``, which Cube's driver sends to test a connection, and the system tables),
except the pre-aggregation statements Cube sends when Cube Store is also its
pre-aggregation store (cube-client.md §4): those get one clear error, because
cubequeue serves only the queue and the cache (issue 6).

``response_format`` is ignored: the answer is always the legacy ``HttpResultSet``
(cube-client.md §2.3; Cube's decoder accepts it whatever was asked for).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from cubequeue.grammar import bind, is_dialect
from cubequeue.grammar.commands import QueueResultBlocking
from cubequeue.grammar.errors import FeatureNotSupported
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.server.cubews.messages import HttpQuery
from cubequeue.server.cubews.params import ws_values

if TYPE_CHECKING:
    from cubequeue.server.context import ServerContext
    from cubequeue.server.sql.session import PlainSession

__all__ = ["PREAGGREGATION_ERROR", "execute_query", "is_preaggregation"]

PREAGGREGATION_ERROR = (
    "cubequeue serves Cube Store's queue and cache only; "
    "pre-aggregation statements are not supported: {words}"
)

#: first words of the statements Cube sends to build and query pre-aggregations
_PREAGG_FIRST_WORDS = frozenset(
    {"CREATE", "INSERT", "DROP", "ALTER", "DELETE", "UPDATE", "TRUNCATE", "EXPORT", "IMPORT"}
)
_PREAGG_ANYWHERE = re.compile(
    r"\binformation_schema\b|\bfrom\s+[`\"]?\w*pre_aggregations\b", re.IGNORECASE
)
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)
_FIRST_WORDS = 3
_MAX_WORDS_CHARS = 80


def _strip_leading(sql: str) -> str:
    match = _LEADING_NOISE.match(sql)
    return sql[match.end():] if match else sql


def is_preaggregation(sql: str) -> bool:
    """CREATE/INSERT/DROP/ALTER…, or anything reading information_schema or a
    ``*pre_aggregations`` schema: statements only a pre-aggregation store would get."""
    words = _strip_leading(sql).split(None, 1)
    if words and words[0].upper() in _PREAGG_FIRST_WORDS:
        return True
    return _PREAGG_ANYWHERE.search(sql) is not None


def _first_words(sql: str) -> str:
    text = " ".join(_strip_leading(sql).split()[:_FIRST_WORDS])
    if len(text) > _MAX_WORDS_CHARS:
        text = text[: _MAX_WORDS_CHARS - 1] + "…"
    return text


async def execute_query(
    ctx: ServerContext,
    query: HttpQuery,
    process_id: str | None,
    plain_session: Callable[[], PlainSession],
) -> ResultSet:
    """The statement's result; raises :class:`QueueError` with the client's error text.

    ``plain_session`` gives the socket's plain-SQL session, made on first use."""
    sql = query.query or ""
    if is_dialect(sql):
        prepared = ctx.executor.prepare(sql)
        command = prepared.command
        if prepared.params:
            command = bind(command, ws_values(prepared.params, query.parameters))
        if isinstance(command, QueueResultBlocking):
            return await ctx.executor.run_blocking(command, process_id)
        return ctx.executor.run(command, process_id)
    if is_preaggregation(sql):
        raise FeatureNotSupported(PREAGGREGATION_ERROR.format(words=_first_words(sql)))
    from cubequeue.server.sql import run_plain

    outcome = run_plain(sql, plain_session(), ctx.store)
    return outcome.result if outcome.result is not None else EMPTY
