"""The extended query protocol: Parse, Bind, Describe, Execute, Close and Sync
(PostgreSQL's protocol docs, "Extended Query"). Prepared statements and portals live in
:class:`~.statements.Names`; a statement's decoders, encoders and Describe reply are
built once at Parse and reused by every Bind and Execute."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from cubequeue.grammar import bind
from cubequeue.grammar.binding import param_text
from cubequeue.grammar.commands import Command
from cubequeue.grammar.errors import FeatureNotSupported, SyntaxError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.errors import ConfigurationLimitExceeded, bind_count_error
from cubequeue.server.executor import PlainWait, Prepared, WaitFor, ends_block, plain_outcome
from cubequeue.server.pgwire import messages as m
from cubequeue.server.pgwire.encoder import (
    BIND_COMPLETE,
    CLOSE_COMPLETE,
    EMPTY_QUERY,
    PARSE_COMPLETE,
    PORTAL_SUSPENDED,
    READY,
    encode_command_complete,
)
from cubequeue.server.pgwire.replies import MAX_CONSTANT_REPLIES, Replies
from cubequeue.server.pgwire.session_core import Run, split
from cubequeue.server.pgwire.statements import (
    Portal,
    PreparedStatement,
    columns_of,
    dialect_param_oids,
)
from cubequeue.server.row_sink import StreamedRows
from cubequeue.server.sql import PlainOutcome

__all__ = ["ExtendedQuery"]


class ExtendedQuery(Replies):
    """The extended protocol's actions."""

    def _parse(self, msg: m.Parse) -> None:
        if not msg.name:
            # A client that does not name its statements (psycopg without prepare,
            # pgbench -M extended, JDBC's first executions) parses the same text again
            # and again: PostgreSQL re-plans it, we keep the statement, its cached
            # decoders, encoders and Describe reply, when nothing it was built from changed
            last = self.names.statements.get("")
            if last is not None and last.reuse is not None and last.reuse == (
                    msg.query, msg.param_oids):
                self.wire.append(PARSE_COMPLETE)
                return
        self.names.check_new_statement(msg.name)
        if msg.name:
            self._check_names_cap(self.names.statements, "prepared statements")
        statements = split(msg.query)
        if len(statements) > 1:
            raise SyntaxError("cannot insert multiple commands into a prepared statement")
        if not statements:
            self.names.statements[msg.name] = PreparedStatement(
                msg.name, "", "empty", tuple(msg.param_oids), None
            )
            self.wire.append(PARSE_COMPLETE)
            return
        sql = statements[0]
        desc = self.executor.describe(sql, self._session(), origin=self.origin)
        if isinstance(desc, Prepared):
            oids = dialect_param_oids(desc.params, msg.param_oids)
            spec = columns_of(desc.columns)
            stmt = PreparedStatement(msg.name, sql, "dialect", oids, spec, desc,
                                     reuse=(msg.query, msg.param_oids))
        else:
            count = max(desc.param_count, len(msg.param_oids))
            oids = tuple(
                (msg.param_oids[i] if i < len(msg.param_oids) else 0)
                or (desc.param_oids[i] if i < len(desc.param_oids) else 25)
                for i in range(count)
            )
            spec = None if desc.columns is None else columns_of(desc.columns, desc.type_oids)
            stmt = PreparedStatement(msg.name, sql, "plain", oids, spec, None, ends_block(sql),
                                     reuse=(msg.query, msg.param_oids) if desc.stable else None)
        self.names.statements[msg.name] = stmt
        self.wire.append(PARSE_COMPLETE)

    def _bind(self, msg: m.Bind) -> None:
        names = self.names
        stmt = names.statement(msg.statement)
        names.check_new_portal(msg.portal)
        if msg.portal:
            self._check_names_cap(names.portals, "portals")
        plain = self.plain
        if plain is None or plain.tx_status == "E":  # only a failed block refuses
            self.executor.check_open(self._session(), stmt.ends_block, text=stmt.sql,
                                     origin=self.origin)
        expected = len(stmt.param_oids)
        if len(msg.params) != expected:
            raise bind_count_error(len(msg.params), expected, stmt.name)
        values = stmt.loader(msg.param_formats)(msg.params)
        tz = self._tz
        shape = stmt.shape(msg.result_formats, tz if tz is UTC or stmt.zoned else UTC)
        command = None
        if stmt.prepared is not None:
            command = bind(stmt.prepared.command, values)
        names.portals[msg.portal] = Portal(msg.portal, stmt, command, values, shape)
        self.wire.append(BIND_COMPLETE)

    def _check_names_cap(self, held: dict[str, Any], what: str) -> None:
        """``--max-prepared-statements`` caps named statements and named portals each
        (the unnamed ones are replaced, never added), so one client cannot grow them."""
        limit = self.ctx.config.max_prepared_statements
        count = len(held) - ("" in held)
        if count >= limit:
            raise ConfigurationLimitExceeded(
                f"too many named {what} on this connection ({count}): the limit is "
                f"--max-prepared-statements ({limit}, CUBEQUEUE_MAX_PREPARED_STATEMENTS)",
                hint="Close or DEALLOCATE the ones no longer used.",
            )

    def _describe(self, msg: m.Describe) -> None:
        if msg.kind == "S":
            self.wire.append(self.names.statement(msg.name).description())
        else:
            self.wire.append(self.names.portal(msg.name).shape.description)

    def _execute(self, msg: m.Execute) -> Run | None:
        """Run the portal's statement once (its rows are then sent in max_rows slices);
        only a step that waits goes through a generator, :meth:`_execute_wait`."""
        portal = self.names.portal(msg.portal)
        if portal.rows is None:
            stmt = portal.statement
            plain = self.plain
            if plain is None or plain.tx_status == "E":  # only a failed block refuses
                self.executor.check_open(self._session(), stmt.ends_block, text=stmt.sql,
                                         origin=self.origin)
            command = portal.command
            if command is not None:
                step = self.executor.run(command, self.process_id, text=stmt.sql,
                                         origin=self.origin)
                if isinstance(step, WaitFor):
                    return self._execute_wait(portal, step, msg.max_rows)
                self._portal_result(portal, command, step)
            elif stmt.kind == "empty":
                portal.rows = []
            else:
                answer = self.executor.plain(stmt.sql, self._session(),
                                             [param_text(v) for v in portal.params],
                                             origin=self.origin)
                if isinstance(answer, PlainWait):
                    return self._execute_plain_wait(portal, answer, msg.max_rows)
                self._plain_portal(portal, answer)
                if answer.constant and msg.max_rows <= 0:
                    self._constant_portal(portal, answer)
                    return None
        self._send_portal(portal, msg.max_rows)
        return None

    def _constant_portal(self, portal: Portal, outcome: PlainOutcome) -> None:
        """A constant outcome's DataRows and CommandComplete for an Execute without a
        row limit, encoded once per (outcome, result shape) and then appended as is."""
        shape = portal.shape
        replies = self._constant_portals
        reply = replies.get((id(outcome), id(shape)))
        if reply is not None and reply[0] is outcome and reply[1] is shape:
            self.wire.append(reply[2])
            portal.pos = len(portal.rows or ())
            return
        mark = len(self.wire)
        self._send_portal(portal, 0)
        if len(replies) >= MAX_CONSTANT_REPLIES:
            replies.clear()
        replies[(id(outcome), id(shape))] = (outcome, shape, b"".join(self.wire[mark:]))

    def _execute_wait(self, portal: Portal, wait: WaitFor, max_rows: int) -> Run:
        if max_rows <= 0 and portal.columns is not None:
            shape = portal.shape
            self._stream_plan = lambda _columns: (shape, False)
        else:
            self._stream_plan = None
        result = yield wait
        assert portal.command is not None, "a dialect portal's wait"
        self._portal_result(portal, portal.command, result)
        if isinstance(result, StreamedRows):  # the rows went already: the portal is done
            self.wire.append(encode_command_complete(f"{portal.tag} {result.count}"))
            return
        self._send_portal(portal, max_rows)

    def _execute_plain_wait(self, portal: Portal, wait: PlainWait, max_rows: int) -> Run:
        result = yield wait
        self._plain_portal(portal, plain_outcome(result))
        self._send_portal(portal, max_rows)

    def _portal_result(self, portal: Portal, command: Command, result: ResultSet) -> None:
        portal.tag = command.tag
        portal.counted = portal.columns is not None
        portal.rows = result.rows if portal.counted else []

    def _plain_portal(self, portal: Portal, outcome: PlainOutcome) -> None:
        self._plain_effects(outcome)
        has_rows = outcome.result is not None and portal.columns is not None
        portal.rows = outcome.result.rows if outcome.result is not None and has_rows else []
        head, _, last = outcome.tag.rpartition(" ")
        if has_rows and head and last.isdigit():
            portal.tag, portal.counted = head, True
        else:
            portal.tag = outcome.tag
        self._parameter_status(outcome)

    def _send_portal(self, portal: Portal, max_rows: int) -> None:
        """Rows from where the last Execute stopped; PortalSuspended when max_rows is hit
        (PostgreSQL suspends whenever exactly max_rows rows were fetched)."""
        if portal.statement.kind == "empty":
            self.wire.append(EMPTY_QUERY)
            return
        rows = portal.rows or []
        start = portal.pos
        end = len(rows) if max_rows <= 0 else min(len(rows), start + max_rows)
        if start == 0 and end == len(rows):
            self._send_rows(portal.shape, rows)
        else:
            self._send_rows(portal.shape, rows[start:end])
        portal.pos = end
        if max_rows > 0 and end - start == max_rows:
            self.wire.append(PORTAL_SUSPENDED)
            return
        tag = f"{portal.tag} {end - start}" if portal.counted else portal.tag
        self.wire.append(encode_command_complete(tag))

    def _close(self, msg: m.Close) -> None:
        self.names.close(msg.kind, msg.name)
        self.wire.append(CLOSE_COMPLETE)

    def _sync(self, _msg: m.Sync) -> None:
        """The end of an extended-protocol batch: outside a block, portals end too."""
        if self.tx_status == "I":
            if self.names.portals:
                self.names.portals.clear()
            self.wire.append(READY["I"])
            return
        self._ready()

    def _function_call(self, _msg: m.FunctionCall) -> None:
        self._error(FeatureNotSupported("the fast-path function call interface is not supported"))
        self._ready()
