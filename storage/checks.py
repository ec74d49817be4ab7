"""The argument checks every store runs before it changes anything, with their texts.

The in-memory store (:mod:`.queue_commands`) and the PostgreSQL store
(:mod:`.postgres.queue_steps`) answer bad input with the same errors, in the same order
(Cube Store's, ``docs/dialect.md`` §3.1 and §6), so both call these.
"""

from __future__ import annotations

from cubequeue.grammar.errors import InvalidParameterValue, LimitExceeded
from cubequeue.storage.limits import MAX_EXTERNAL_ID_BYTES, MAX_PROCESS_ID_BYTES, Limits
from cubequeue.storage.sizes import utf8_len

__all__ = [
    "ADD_EXCLUSIVE_NEEDS_PID",
    "RETRIEVE_NEEDS_PID",
    "check_add",
    "check_extra",
    "check_payload",
    "rust_option",
]

ADD_EXCLUSIVE_NEEDS_PID = (
    "QUEUE ADD EXCLUSIVE requires a process_id in the connection context (x-process-id header)"
)
RETRIEVE_NEEDS_PID = (
    "QUEUE RETRIEVE requires a process_id in the connection context (x-process-id header)"
)


def _check_bytes(text: str, limit: int, what: str, option: str) -> None:
    if len(text) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character
        return
    size = utf8_len(text)
    if size > limit:
        raise LimitExceeded(
            f"{what} of {size} bytes exceeds the limit of {limit} bytes ({option}={limit})"
        )


def check_payload(limits: Limits, value: str, what: str) -> None:
    """An ADD payload or ACK result above ``--max-payload-bytes``: 54000."""
    _check_bytes(value, limits.max_payload_bytes, what, "--max-payload-bytes")


def check_extra(limits: Limits, text: str, what: str) -> None:
    """A MERGE_EXTRA argument or merged ``extra`` above ``max_extra_bytes``: 54000."""
    _check_bytes(text, limits.max_extra_bytes, what, "max_extra_bytes")


def check_add(
    limits: Limits, exclusive: bool, external_id: str | None, process_id: str | None,
    payload: str,
) -> None:
    """§3.1 step 1, in Cube Store's order, then the payload cap (§6)."""
    if exclusive and process_id is None:
        raise InvalidParameterValue(ADD_EXCLUSIVE_NEEDS_PID)
    if external_id is not None and utf8_len(external_id) > MAX_EXTERNAL_ID_BYTES:
        raise InvalidParameterValue(
            f"external_id exceeds maximum allowed length of {MAX_EXTERNAL_ID_BYTES} characters"
        )
    if process_id is not None and utf8_len(process_id) > MAX_PROCESS_ID_BYTES:
        raise InvalidParameterValue(
            f"process_id exceeds maximum allowed length of {MAX_PROCESS_ID_BYTES} characters"
        )
    check_payload(limits, payload, "payload")


def rust_option(value: str | None) -> str:
    """Rust's Debug text of an ``Option<String>`` (the RESULT mismatch message, §3.11)."""
    if value is None:
        return "None"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'Some("{escaped}")'
