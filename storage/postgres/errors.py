"""How database failures reach clients: honestly, with a SQLSTATE, never retried blindly.

* The database cannot be reached (refused, failing over, a read-only standby, too many
  connections): :class:`StoreUnavailable`, SQLSTATE 57P03 (``cannot_connect_now``), which
  the PostgreSQL wire sends as an ErrorResponse and the WebSocket wire as an error message.
* The connection is lost *during* a statement: also 57P03, but the message says that the
  outcome is unknown. The statement is not retried on the client's behalf: an ACK that did
  commit would answer ``success = false`` the second time (docs/topology.md).
* A serialisation failure or deadlock (40001, 40P01) rolled the call back entirely, so the
  store retries those a few times (:data:`RETRYABLE`).
* Anything else from the database is our bug or an operator's problem: an internal error
  (XX000) naming the database's SQLSTATE and message.
"""

from __future__ import annotations

from cubequeue.grammar.errors import InternalError, QueueError

__all__ = ["RETRYABLE", "UNAVAILABLE", "StoreUnavailable", "database_error"]

#: the call rolled back and changed nothing: safe to run again
RETRYABLE = frozenset({"40001", "40P01"})
#: the server cannot serve this statement now (shutting down, starting, a standby, full)
UNAVAILABLE = frozenset({"57P01", "57P02", "57P03", "25006", "53300", "08000", "08003",
                         "08006", "08001", "08004"})


class StoreUnavailable(QueueError, sqlstate="57P03"):
    """The queue database cannot be used right now (or was lost mid-statement)."""


def database_error(command: str, sqlstate: str | None, message: str) -> QueueError:
    """The client-facing error for a database error that is not retried."""
    if sqlstate in UNAVAILABLE:
        return StoreUnavailable(
            f"the queue database cannot serve {command} now: {message}",
            hint="the store reconnects by itself; retry the statement",
        )
    return InternalError(f"queue database error running {command}: {message} (SQLSTATE {sqlstate})")
