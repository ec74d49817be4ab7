"""The simple Query protocol, and ``COPY … TO STDOUT`` (which only it carries).

A simple Query runs its statements in order as an implicit transaction; the first error
ends it; a blank Query gets EmptyQueryResponse; one ReadyForQuery at the end. Queue
commands inside a block run at once, since the store is not transactional. A statement
that waits suspends the Query where it stands (:meth:`SimpleQuery._query_rest`).
"""

from __future__ import annotations

import re

from cubequeue.grammar import first_word
from cubequeue.grammar.commands import Command
from cubequeue.grammar.results import Column
from cubequeue.server.executor import PlainWait, WaitFor, plain_outcome
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.encoder import (
    COPY_DONE,
    EMPTY_QUERY,
    encode_command_complete,
    encode_copy_data,
    encode_copy_out_response,
)
from cubequeue.server.pgwire.replies import Replies
from cubequeue.server.pgwire.session_core import Run, split
from cubequeue.server.pgwire.statements import ResultShape, columns_of, result_shape
from cubequeue.server.sql import PlainOutcome
from cubequeue.server.sql.copy import parse_copy, run_copy

__all__ = ["SimpleQuery"]

#: a statement without these letters is not COPY: a C-speed scan spares most statements
#: the first-word read (comments may come first, so only first_word decides)
_COPY = re.compile("copy", re.IGNORECASE)


class SimpleQuery(Replies):
    """The Query message's action, and COPY."""

    def _query(self, msg: m.Query) -> Run | None:
        """Statements run here until one has to wait; the rest go to :meth:`_query_rest`."""
        try:
            statements = split(msg.sql)
            if not statements:
                self.wire.append(EMPTY_QUERY)
            for i, sql in enumerate(statements):
                run = self._simple_statement(sql)
                if run is not None:
                    return self._query_rest(run, statements[i + 1 :])
        except Exception as exc:  # QueueError, or our bug (XX000): the session survives
            self._error(exc)
        self._ready()
        return None

    def _query_rest(self, first: Run, rest: tuple[str, ...]) -> Run:
        run: Run | None = first
        try:
            while run is not None:
                yield from run
                run = None
                for i, sql in enumerate(rest):
                    run = self._simple_statement(sql)
                    if run is not None:
                        rest = rest[i + 1 :]
                        break
        except Exception as exc:
            self._error(exc)
        self._ready()

    def _simple_statement(self, sql: str) -> Run | None:
        """Run one statement of a simple Query; one that waits is returned as the
        generator that yields its wait and then answers it."""
        if _COPY.search(sql) is not None and first_word(sql) == "copy":
            return self._copy_out(sql)
        answer = self.executor.statement(sql, self._session(), self.process_id,
                                         origin=self.origin)
        if isinstance(answer, PlainOutcome):
            if answer.constant:
                self._constant_reply(answer)
            else:
                self._plain_reply(answer)
            return None
        if isinstance(answer, PlainWait):
            return self._plain_wait(answer)
        command, step = answer
        if isinstance(step, WaitFor):
            return self._dialect_wait(command, step)
        self._dialect_reply(command, step)
        return None

    def _dialect_wait(self, command: Command, wait: WaitFor) -> Run:
        self._stream_plan = self._simple_shape
        result = yield wait
        self._dialect_reply(command, result)

    def _simple_shape(self, columns: tuple[Column, ...]) -> tuple[ResultShape, bool]:
        """A simple Query's streamed result: text rows after its RowDescription."""
        spec = columns_of(columns)
        if spec is None:
            return result_shape(None, ()), False
        return result_shape(spec, (0,) * len(spec), self._zone_for(spec)), True

    def _plain_wait(self, wait: PlainWait) -> Run:
        result = yield wait
        self._plain_reply(plain_outcome(result))

    def _copy_out(self, sql: str) -> Run | None:
        """``COPY (SELECT …) TO STDOUT`` (simple Query only, as psql's ``\\copy`` and
        psycopg's ``copy()`` send it): CopyOutResponse, a CopyData per line, CopyDone.
        Its query runs as any plain SELECT, so it may wait as one."""
        answer = self.executor.plain(parse_copy(sql).query, self._session(), origin=self.origin)
        if isinstance(answer, PlainWait):
            return self._copy_wait(sql, answer)
        self._copy_reply(sql, answer)
        return None

    def _copy_wait(self, sql: str, wait: PlainWait) -> Run:
        result = yield wait
        self._copy_reply(sql, plain_outcome(result))

    def _copy_reply(self, sql: str, outcome: PlainOutcome) -> None:
        out = run_copy(sql, lambda _query: outcome, self._tz)
        wire = self.wire
        wire.append(encode_copy_out_response(0, (0,) * out.column_count))
        wire.extend([encode_copy_data(line) for line in out.lines])
        wire.append(COPY_DONE)
        wire.append(encode_command_complete(out.tag))
