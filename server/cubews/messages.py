"""The decoded form of Cube Store's WebSocket messages (schema: ``http_message.fbs``).

Frozen, slotted values in the h11 style: what :func:`codec.decode_message`
returns and what :func:`codec.encode` writes. Field names follow the flatbuffers schema;
an absent optional string is ``None``, never ``""``, because
the wire keeps the difference (an absent ``string_value`` is SQL NULL).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "CommandType",
    "HttpCommand",
    "HttpError",
    "HttpMessage",
    "HttpQuery",
    "HttpResultSet",
    "HttpTable",
    "OtherCommand",
    "ParamType",
    "ParamValue",
    "ResponseFormat",
    "param_type",
]

#: A typed ``?`` parameter as decoded: Int64 → int, Bool → bool, String → str,
#: Binary → bytes, Float64 → float, Null → None (the Python type keeps the union tag).
ParamValue = int | bool | str | bytes | float | None


class CommandType(enum.IntEnum):
    """``union HttpCommand`` tags; 0 is NONE."""

    NONE = 0
    HTTP_QUERY = 1
    HTTP_RESULT_SET = 2
    HTTP_ERROR = 3
    HTTP_QUERY_RESULT = 4


class ParamType(enum.IntEnum):
    """``union HttpParameterValue`` tags, named as Cube Store names them in its
    ``Wrong parameters type, actual: <t>`` errors (``docs/dialect.md`` §1.4)."""

    INT64 = 1
    BOOL = 2
    STRING = 3
    BINARY = 4
    FLOAT64 = 5
    NULL = 6

    @property
    def wire_name(self) -> str:
        return self.name.lower()


class ResponseFormat(enum.IntEnum):
    LEGACY = 0
    ARROW = 1


def param_type(value: ParamValue) -> ParamType:
    """The union member a Python value travels as (bool before int: bool is an int)."""
    if value is None:
        return ParamType.NULL
    if isinstance(value, bool):
        return ParamType.BOOL
    if isinstance(value, int):
        return ParamType.INT64
    if isinstance(value, str):
        return ParamType.STRING
    if isinstance(value, bytes):
        return ParamType.BINARY
    return ParamType.FLOAT64


@dataclass(frozen=True, slots=True)
class HttpTable:
    """An inline table (pre-aggregation queries only; decoded so it can be refused)."""

    name: str | None
    columns: tuple[str, ...] | None
    types: tuple[str, ...] | None
    csv_rows: str | None


@dataclass(frozen=True, slots=True)
class HttpQuery:
    query: str | None
    trace_obj: str | None = None
    inline_tables: tuple[HttpTable, ...] | None = None
    #: ``None`` when the field is absent (Cube's driver inlined the values itself)
    parameters: tuple[ParamValue, ...] | None = None
    response_format: int = ResponseFormat.LEGACY


@dataclass(frozen=True, slots=True)
class HttpResultSet:
    columns: tuple[str, ...]
    #: every cell is text; ``None`` is an absent ``string_value`` (SQL NULL)
    rows: tuple[tuple[str | None, ...], ...]


@dataclass(frozen=True, slots=True)
class HttpError:
    error: str


@dataclass(frozen=True, slots=True)
class OtherCommand:
    """A union tag cubequeue does not read from a client (NONE, HttpQueryResult, or a
    tag newer than this schema); Cube Store answers such a message with an error."""

    type_tag: int


HttpCommand = HttpQuery | HttpResultSet | HttpError | OtherCommand


@dataclass(frozen=True, slots=True)
class HttpMessage:
    message_id: int
    command: HttpCommand
    #: uuid per client connection, stable across reconnects; ``None``: no dedup
    connection_id: str | None = None
