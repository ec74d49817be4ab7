"""How database failures reach clients: honestly, with a SQLSTATE, never retried blindly.

* **Never sent** (no connection to be had: refused, failing over, a read-only standby,
  too many connections, or a pooled connection found broken before the statement was
  written): :class:`StoreUnavailable`, SQLSTATE 57P03 (``cannot_connect_now``), hint
  "retry the statement". Nothing happened, so a retry is always safe.
* **Sent, no answer** (the connection died or went silent after the statement was
  written): :class:`StatementInDoubt`, SQLSTATE 08007 (PostgreSQL's
  ``transaction_resolution_unknown``), hint "check the statement's effect before repeating
  it". The statement may have committed; the store never retries it on the client's
  behalf (docs/topology.md §4 lists which statements are safe to repeat).
* A serialisation failure or deadlock (40001, 40P01) rolled the call back entirely, so the
  store retries those a few times (:data:`RETRYABLE`).
* An error the database answered with for a statement that ran and failed, meaning "not
  now" (a standby's 25006, a shutdown's 57P01): 57P03 as above, since it rolled back.
* Anything else from the database is our bug or an operator's problem: an internal error
  (XX000) naming the database's SQLSTATE and message.
* At start, a URL that can never work (:data:`PERMANENT`: no such database or role, a
  refused password or privilege) is :class:`StoreRefused`: one line naming the cause and
  the fix, and the front end stops instead of waiting for it.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from cubequeue.grammar.errors import InternalError, QueueError

__all__ = [
    "PERMANENT",
    "RETRYABLE",
    "UNAVAILABLE",
    "StatementInDoubt",
    "StoreRefused",
    "StoreUnavailable",
    "database_error",
    "is_permanent",
    "refusal",
]

#: the call rolled back and changed nothing: safe to run again
RETRYABLE = frozenset({"40001", "40P01"})
#: the server cannot serve this statement now (shutting down, starting, a standby, full)
UNAVAILABLE = frozenset({"57P01", "57P02", "57P03", "25006", "53300", "08000", "08003",
                         "08006", "08001", "08004"})
#: errors a retry cannot cure: the URL or the database's setup must change
PERMANENT = frozenset({"3D000", "28000", "28P01", "42501"})
RETRY_HINT = "the store reconnects by itself; retry the statement"
IN_DOUBT_HINT = "check the statement's effect before repeating it"


class StoreUnavailable(QueueError, sqlstate="57P03"):
    """The queue database cannot be used right now; the statement was not run."""


class StatementInDoubt(StoreUnavailable, sqlstate="08007"):
    """The statement was sent and its connection died before the answer: it may have
    taken effect. A kind of :class:`StoreUnavailable` (the database is away either way),
    with its own SQLSTATE and hint."""


class StoreRefused(Exception):
    """The store URL can never work as it is (``str(err)`` is the one line to print)."""


def is_permanent(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) in PERMANENT


def database_error(command: str, sqlstate: str | None, message: str) -> QueueError:
    """The client-facing error for a database error that is not retried."""
    if sqlstate in UNAVAILABLE:
        return StoreUnavailable(
            f"the queue database cannot serve {command} now: {message}", hint=RETRY_HINT)
    return InternalError(f"queue database error running {command}: {message} (SQLSTATE {sqlstate})")


def refusal(dsn: str, exc: BaseException) -> StoreRefused:
    """The one line for a permanent error: the cause, then what fixes it."""
    parts = urlsplit(dsn)
    host = (parts.netloc.rpartition("@")[2] or "the default host").split(",")[0]
    hostname, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    user = unquote(parts.username or "") or "the current OS user"
    database = unquote(parts.path.lstrip("/")) or user
    where = f"-h {hostname} -p {port}" if port else f"-h {hostname}"
    state = getattr(exc, "sqlstate", None)
    if state == "3D000":
        fix = (f"create it (createdb {where} -U <a role that may> -O {user} {database}) "
               "or name an existing database in --store")
    elif state == "28000" and "does not exist" in str(exc):
        fix = f"create the role (createuser {where} -U <a superuser> --login {user}) or fix --store"
    elif state == "28000":
        fix = "allow the connection in the server's pg_hba.conf or fix --store"
    elif state == "28P01":
        fix = "fix the password in --store (or in ~/.pgpass / PGPASSWORD)"
    else:
        fix = (f"grant the role what it needs (grant connect on database {database} to "
               f"{user}; grant create on schema public to {user}) or use another role")
    return StoreRefused(f"the queue database refuses the --store URL (SQLSTATE {state}: "
                        f"{exc}): {fix}")
