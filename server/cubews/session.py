"""One WebSocket client of Cube Store's protocol, without any I/O: frames in, frames out.

:meth:`WsSession.receive` takes one WebSocket message (bytes, or the text that closes
the socket) and returns what the socket must do, in order:

* :class:`Send` — write ``frame`` to the socket ``to`` (this one, or another socket that
  joined a deduplicated message); ``key`` is the dedup key the frame answers, which the
  socket confirms once the client has provably read it (see ``endpoint.py``);
* :class:`Close` — close the socket with ``code`` and ``reason``;
* :class:`Await` — a step that has to wait: a ``QUEUE RESULT_BLOCKING``, which the
  socket holds on callbacks (``executor.begin_blocking``), or a store that answers later
  (plain SQL over a system table it answers later, a listing streamed from the store),
  whose ``executor.complete(await_.wait, timeout, sink)`` the socket awaits with a
  :class:`~.frame_sink.FrameSink`; either way it hands the result or the error (and the
  sink) to :meth:`WsSession.settle`, which returns the Sends; if the wait is cancelled
  (the socket went, shutdown), :meth:`WsSession.abandon` releases its dedup entry.

The rules, as Cube Store's ``http/mod.rs`` has them:

* a message over ``--max-message-size`` gets an HttpError naming it, and the socket
  stays up; a message that is not a flatbuffer is logged and ignored (its id is
  unknown); a text message, or a command other than HttpQuery, closes the socket;
* **dedup** by (connection_id, message_id) across sockets (:mod:`.dedup`): a resend
  after a reconnect never runs a statement twice; a message without a connection id is
  answered without dedup; a resend whose answer was not kept (a byte limit), or by
  another authenticated user, gets an HttpError saying why;
* **RESULT_BLOCKING** holds its message for as long as it waits, so one socket may hold
  at most ``--max-ws-blocking-waits`` of them, each at most
  ``--max-blocking-message-bytes`` long; beyond either, an HttpError naming the option;
* statements go to the shared executor (routing, metrics, logs, the blocking wait);
  ``?`` placeholders of the dialect are bound from the message's typed parameters
  (:mod:`.params`), and plain SQL gets them as text from the same module; each statement is
  counted and logged there, named by :attr:`WsSession.origin`.

``response_format`` is ignored: the answer is always the legacy ``HttpResultSet`` (Cube's
decoder accepts it whatever was asked for).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from websockets.frames import CloseCode

from cubequeue.grammar import is_dialect
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import EMPTY, ResultSet
from cubequeue.server.cubews.codec import decode_message, encode_error, encode_result_set
from cubequeue.server.cubews.dedup import JOINED, Cached, DedupTable, Key, Refused
from cubequeue.server.cubews.frame_sink import Frame, FrameSink
from cubequeue.server.cubews.messages import HttpMessage, HttpQuery, OtherCommand, ParamValue
from cubequeue.server.cubews.params import plain_params, ws_values
from cubequeue.server.executor import Origin, WaitFor
from cubequeue.server.row_sink import StreamedRows
from cubequeue.server.sql import PlainOutcome, PlainSession

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cubequeue.grammar.commands import Param
    from cubequeue.server.executor import Executor

__all__ = ["Await", "Close", "Event", "Send", "Ticket", "WsSession", "oversize_request_error"]

_log = logging.getLogger("cubequeue.ws")

S = TypeVar("S")

_UNEXPECTED_COMMAND: Final = "unexpected command"
_BINARY_ONLY: Final = "binary messages only"
#: statement texts whose route a session remembers (cleared when full)
_MAX_TEXTS: Final = 256


def oversize_request_error(size: int, limit: int) -> str:
    """Cube Store's answer to a request over the message limit, naming our knob."""
    return (
        f"Request of {size} bytes exceeds the maximum message size of {limit} bytes. "
        "Reduce the size of the query, or raise --max-message-size "
        "(CUBEQUEUE_MAX_MESSAGE_SIZE)."
    )


@dataclass(frozen=True, slots=True)
class Send(Generic[S]):
    to: S
    frame: Frame
    key: Key | None = None


@dataclass(frozen=True, slots=True)
class Close:
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ticket:
    """Whom a waiting message answers."""

    message_id: int
    connection_id: str | None
    key: Key | None
    #: a QUEUE RESULT_BLOCKING, counted against ``--max-ws-blocking-waits``
    blocking: bool = False


@dataclass(frozen=True, slots=True)
class Await:
    wait: WaitFor
    ticket: Ticket

    @property
    def shared(self) -> bool:
        """Other sockets may want this answer: the wait must outlive this socket."""
        return self.ticket.key is not None


Event = Send[S] | Close | Await


class WsSession(Generic[S]):
    """One socket's protocol state; ``owner`` is the opaque socket that Sends go to."""

    def __init__(
        self,
        executor: Executor,
        dedup: DedupTable[S],
        owner: S,
        *,
        process_id: str | None,
        user: str | None,
        server_version: str,
        max_message_size: int,
        conn_id: int = 0,
        peer: str | None = None,
        max_blocking_waits: int = 1000,
        max_blocking_message_bytes: int = 65_536,
        statement_timeout_ms: int = 0,
    ) -> None:
        self.executor = executor
        self.dedup = dedup
        self.owner = owner
        self.process_id = process_id
        self.max_message_size = max_message_size
        self.conn_id = conn_id
        self.max_blocking_waits = max_blocking_waits
        self.max_blocking_message_bytes = max_blocking_message_bytes
        #: RESULT_BLOCKING waits of this socket not yet settled
        self.waits = 0
        #: statement text -> whether it is the dialect's (plain SQL's values are text)
        self._dialect: dict[str, bool] = {}
        #: who sends this socket's statements, for their log lines
        self.origin = Origin("ws", conn_id, peer, user)
        # the server's default first, as a postgresql.conf setting: SET and RESET work
        params = {"statement_timeout": str(statement_timeout_ms)}
        if process_id is not None:
            params["process_id"] = process_id
        #: the plain-SQL side (settings, SHOW, SELECT over the system tables)
        self.plain = PlainSession(
            server_version=server_version, user=user or "cube", startup_params=params
        )

    def receive(self, data: bytes | str) -> list[Event[S]]:
        """What to do about one WebSocket message (see the module docstring)."""
        if isinstance(data, str):
            _log.warning("closing ws connection %d: text message received", self.conn_id,
                         extra={"conn_id": self.conn_id})
            return [Close(CloseCode.UNSUPPORTED_DATA, _BINARY_ONLY)]
        try:
            message = decode_message(data)
        except QueueError as exc:
            _log.warning("ws connection %d: undecodable message ignored: %s", self.conn_id,
                         exc.message, extra={"conn_id": self.conn_id})
            return []
        limit = self.max_message_size
        if len(data) > limit:
            text = oversize_request_error(len(data), limit)
            _log.warning("ws connection %d: %s", self.conn_id, text, extra={"conn_id": self.conn_id})
            return [Send(self.owner, encode_error(message.message_id, message.connection_id, text))]
        query = message.command
        if not isinstance(query, HttpQuery):
            return [Send(self.owner, self._refusal(message)),
                    Close(CloseCode.POLICY_VIOLATION, _UNEXPECTED_COMMAND)]  # fmt: skip
        key: Key | None = None
        if message.connection_id is not None:
            key = (message.connection_id, message.message_id)
            outcome = self.dedup.begin(key, self.owner, self.origin.user)
            if isinstance(outcome, Cached):
                return [Send(self.owner, outcome.answer, key)]
            if isinstance(outcome, Refused):
                _log.warning("ws connection %d: resend refused: %s", self.conn_id,
                             outcome.reason, extra={"conn_id": self.conn_id})
                return [Send(self.owner, encode_error(message.message_id, message.connection_id,
                                                      outcome.reason))]
            if outcome is JOINED:
                return []
        answer = self._answer(message, query)
        if isinstance(answer, WaitFor):
            blocking = answer.blocking  # RESULT_BLOCKING, not yet at the store
            if blocking:
                refusal = self._blocking_refusal(len(data))
                if refusal is not None:
                    _log.warning("ws connection %d: %s", self.conn_id, refusal,
                                 extra={"conn_id": self.conn_id})
                    frame = encode_error(message.message_id, message.connection_id, refusal)
                    return self._deliver(key, frame)
                self.waits += 1
            ticket = Ticket(message.message_id, message.connection_id, key, blocking)
            return [Await(answer, ticket)]
        return self._deliver(key, answer)

    def _blocking_refusal(self, size: int) -> str | None:
        """Why a RESULT_BLOCKING may not wait (a limit it breaks), or None."""
        if size > self.max_blocking_message_bytes:
            return (
                f"QUEUE RESULT_BLOCKING message of {size} bytes exceeds "
                f"--max-blocking-message-bytes ({self.max_blocking_message_bytes} bytes, "
                "CUBEQUEUE_MAX_BLOCKING_MESSAGE_BYTES): a waiting message is held until "
                "it is answered"
            )
        if self.waits >= self.max_blocking_waits:
            return (
                f"Too many QUEUE RESULT_BLOCKING waits on this connection: {self.waits} "
                f"already wait, the limit is --max-ws-blocking-waits "
                f"({self.max_blocking_waits}, CUBEQUEUE_MAX_WS_BLOCKING_WAITS)"
            )
        return None

    def settle(
        self,
        ticket: Ticket,
        result: ResultSet | None = None,
        error: BaseException | None = None,
        sink: FrameSink | None = None,
        frame: Frame | None = None,
    ) -> list[Event[S]]:
        """The outcome of an :class:`Await`: the answer, to every socket that wants it.
        A :class:`StreamedRows` result's rows went to ``sink``, which finishes the frame
        (or sealed it already: ``frame``)."""
        if ticket.blocking:
            self.waits -= 1
        if frame is not None:
            pass
        elif error is not None:
            frame = self._error(ticket.message_id, ticket.connection_id, error)
        elif isinstance(result, StreamedRows):
            assert sink is not None and sink.begun, "a streamed result comes with its sink"
            frame = sink.finish(ticket.message_id, ticket.connection_id)
        else:
            assert result is not None
            frame = encode_result_set(ticket.message_id, ticket.connection_id, result)
        return self._deliver(ticket.key, frame)

    def abandon(self, ticket: Ticket) -> None:
        """The wait ended without an answer (cancelled at shutdown): forget its entry."""
        if ticket.blocking:
            self.waits -= 1
        if ticket.key is not None:
            self.dedup.abandon(ticket.key)

    # --- plumbing -------------------------------------------------------------------------

    def _deliver(self, key: Key | None, frame: Frame) -> list[Event[S]]:
        if key is None:
            return [Send(self.owner, frame)]
        return [Send(sock, frame, key) for sock in self.dedup.complete(key, frame)]

    def _plain_texts(self, text: str, values: Sequence[ParamValue] | None) -> list[str | None]:
        """Plain SQL's ``?`` values as text; a dialect statement binds them typed and never
        reads these, so they are not built for it (whether a text is dialect is kept per
        text: Cube sends a dozen distinct ones)."""
        if not values:
            return []
        dialect = self._dialect.get(text)
        if dialect is None:
            if len(self._dialect) >= _MAX_TEXTS:
                self._dialect.clear()
            dialect = self._dialect[text] = is_dialect(text)
        return [] if dialect else plain_params(values)

    def _answer(self, message: HttpMessage, query: HttpQuery) -> bytes | WaitFor:
        values = query.parameters
        text = query.query or ""

        def binder(params: tuple[Param, ...]) -> Sequence[object]:
            return ws_values(params, values)

        try:
            answer = self.executor.statement(
                text, self.plain, self.process_id, binder,
                self._plain_texts(text, values), origin=self.origin,
            )
        except Exception as exc:
            return self._error(message.message_id, message.connection_id, exc)
        if isinstance(answer, PlainOutcome):
            result = answer.result if answer.result is not None else EMPTY
        elif isinstance(answer, WaitFor):  # plain SQL over a table the store answers later
            return answer
        else:
            step = answer[1]
            if isinstance(step, WaitFor):
                return step
            result = step
        return encode_result_set(message.message_id, message.connection_id, result)

    def _error(self, message_id: int, connection_id: str | None, exc: BaseException) -> bytes:
        error = self.executor.failed(self.plain, exc)
        text = error.message
        if error.sqlstate == "0A000" and error.hint:
            # HttpError has only a message: an unsupported feature keeps its hint (the
            # setup that works), which Cube prints in its "Error while querying" line
            text = f"{text}. {error.hint}"
        return encode_error(message_id, connection_id, text)

    @staticmethod
    def _refusal(message: HttpMessage) -> bytes:
        command = message.command
        name = (f"type {command.type_tag}" if isinstance(command, OtherCommand)
                else type(command).__name__)
        text = f"Unexpected command: {name}; expected HttpQuery"
        return encode_error(message.message_id, message.connection_id, text)
