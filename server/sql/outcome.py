"""What plain SQL hands back to the wires: a result, a command tag, notices, effects.

The wires own the bytes; this module only says *what* PostgreSQL 15 would answer. Type
OIDs are PostgreSQL's builtin ones (``pg_type``); ``type_oids`` gives one per result column because plain
SQL answers with types the four :class:`ColumnType` values cannot tell apart (``SELECT 1``
is ``int4``, ``pg_advisory_unlock_all()`` is ``void``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cubequeue.grammar.results import Column, ColumnType, ResultSet
from cubequeue.server.pgtypes import oids

__all__ = [
    "HINT",
    "OID_BOOL",
    "OID_INT4",
    "OID_INT8",
    "OID_TEXT",
    "OID_TIMESTAMPTZ",
    "OID_VOID",
    "Effect",
    "Notice",
    "PlainDescription",
    "PlainOutcome",
    "TxChange",
    "default_oid",
]

#: The hint of every 0A000: what cubequeue answers.
HINT = (
    "cubequeue answers QUEUE, CACHE and SYS statements, session statements (SET, SHOW, "
    "BEGIN, …) and SELECT over system.queue, system.queue_results, system.cache, "
    "system.queue_prefixes and system.queue_log"
)

# The type OIDs plain SQL answers with, from the one OID table.
OID_BOOL = oids.BOOL
OID_INT8 = oids.INT8
OID_INT4 = oids.INT4
OID_TEXT = oids.TEXT
OID_TIMESTAMPTZ = oids.TIMESTAMPTZ
OID_VOID = oids.VOID

TxChange = Literal["begin", "commit", "rollback"]
#: What the wire must do to its own state (prepared statements, portals) afterwards.
Effect = (
    Literal["deallocate_all", "close_all", "discard_all"] | tuple[Literal["deallocate"], str] | None
)


def default_oid(type_: ColumnType) -> int:
    """The OID a dialect column type is sent as (text, int8, bool, timestamptz; see
    ``docs/dialect.md`` §1.5)."""
    return oids.COLUMN_OIDS[type_]


@dataclass(frozen=True, slots=True)
class Notice:
    """A NoticeResponse: ``severity`` is PostgreSQL's (WARNING, NOTICE), sqlstate its code."""

    severity: str
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class PlainOutcome:
    """The answer to one plain statement.

    * ``result`` — rows to send (RowDescription + DataRows) or None (no rows: only the
      CommandComplete ``tag``). A SELECT always has a result, even with zero rows.
    * ``type_oids`` — one OID per result column (None when ``result`` is None).
    * ``notices`` — NoticeResponses to send *before* CommandComplete.
    * ``tx`` — the transaction-control kind of the statement (informational; the
      session's ``tx_status`` has already been updated and is authoritative).
    * ``parameter_status`` — ParameterStatus messages to send (reported settings whose
      value changed), before ReadyForQuery.
    * ``effect`` — what the wire must do to its own prepared statements / portals.
    * ``constant`` — the same text always answers with this very outcome, which reads
      no state, clock or setting and has no effect or notice: a wire may keep its
      encoded reply for the text (``SELECT 1``, the one statement pgbench sends).
    """

    result: ResultSet | None
    tag: str
    notices: list[Notice] = field(default_factory=list)
    tx: TxChange | None = None
    parameter_status: dict[str, str] = field(default_factory=dict)
    effect: Effect = None
    type_oids: tuple[int, ...] | None = None
    constant: bool = False


@dataclass(frozen=True, slots=True)
class PlainDescription:
    """What Describe reports, computed without running anything.

    ``columns`` None means NoData. ``param_oids`` has one OID per placeholder ``$1..$n``
    (deduced from what the placeholder is compared with; text when nothing says).
    ``stable``: the same text always describes the same way, whatever the session (not a
    catalog query, whose columns may come from the session), so a wire may reuse a
    statement parsed from the same text instead of describing it again.
    """

    param_count: int
    columns: tuple[Column, ...] | None
    type_oids: tuple[int, ...] | None
    param_oids: tuple[int, ...] = ()
    stable: bool = False
