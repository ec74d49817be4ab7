"""The PostgreSQL v3 messages cubequeue exchanges, as frozen slotted dataclasses.

Names and fields follow "Message Formats" of the PostgreSQL 15 documentation
(https://www.postgresql.org/docs/15/protocol-message-formats.html). Frontend messages are
what :class:`~cubequeue.server.pgwire.decoder.Decoder` yields and
:func:`~cubequeue.server.pgwire.client.encode_frontend` writes; backend messages are what
:func:`~cubequeue.server.pgwire.encoder.encode` writes and
:class:`~cubequeue.server.pgwire.client.BackendDecoder` reads. Values are already decoded
(``str`` for C strings, ``bytes | None`` for parameter and column values), so the
session never sees wire framing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, get_args

__all__ = [
    "BACKEND_TYPES",
    "CANCEL_REQUEST_CODE",
    "GSSENC_REQUEST_CODE",
    "PROTOCOL_3_0",
    "SSL_REQUEST_CODE",
    "AuthenticationCleartextPassword",
    "AuthenticationMD5Password",
    "AuthenticationOk",
    "AuthenticationSASL",
    "AuthenticationSASLContinue",
    "AuthenticationSASLFinal",
    "BackendKeyData",
    "BackendMessage",
    "Bind",
    "BindComplete",
    "CancelRequest",
    "Close",
    "CloseComplete",
    "CommandComplete",
    "CopyData",
    "CopyDone",
    "CopyFail",
    "DataRow",
    "Describe",
    "EmptyQueryResponse",
    "ErrorResponse",
    "Execute",
    "FieldDescription",
    "Flush",
    "FrontendMessage",
    "FunctionCall",
    "GSSENCRequest",
    "NegotiateProtocolVersion",
    "NoData",
    "NoticeResponse",
    "ParameterDescription",
    "ParameterStatus",
    "Parse",
    "ParseComplete",
    "PasswordMessage",
    "PortalSuspended",
    "Query",
    "ReadyForQuery",
    "RowDescription",
    "SASLInitialResponse",
    "SSLRequest",
    "StartupMessage",
    "Sync",
    "Terminate",
]

# --- untyped first packets --------------------------------------------------------------

#: the protocol a StartupMessage asks for: major 3, minor 0
PROTOCOL_3_0: Final = 3 << 16
#: the codes that stand in for a protocol version in the other first packets
SSL_REQUEST_CODE: Final = 80877103
GSSENC_REQUEST_CODE: Final = 80877104
CANCEL_REQUEST_CODE: Final = 80877102


@dataclass(frozen=True, slots=True)
class StartupMessage:
    """``protocol`` is (major << 16) | minor; parameters keep the client's order."""

    protocol: int
    parameters: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> str | None:
        for key, value in self.parameters:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class SSLRequest:
    pass


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    pass


@dataclass(frozen=True, slots=True)
class CancelRequest:
    process_id: int
    secret_key: int


# --- typed frontend messages ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    """Type ``p``: a password, or a SASL/GSS response; only the auth state knows which."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class SASLInitialResponse:
    """The first ``p`` of a SASL exchange, decoded from a :class:`PasswordMessage`."""

    mechanism: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class Query:
    sql: str


@dataclass(frozen=True, slots=True)
class Parse:
    name: str
    query: str
    param_oids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...] = ()
    params: tuple[bytes | None, ...] = ()
    result_formats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Describe:
    """``kind`` is ``"S"`` (statement) or ``"P"`` (portal)."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    portal: str
    max_rows: int = 0


@dataclass(frozen=True, slots=True)
class Close:
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    pass


@dataclass(frozen=True, slots=True)
class Flush:
    pass


@dataclass(frozen=True, slots=True)
class Terminate:
    pass


@dataclass(frozen=True, slots=True)
class CopyData:
    data: bytes


@dataclass(frozen=True, slots=True)
class CopyDone:
    pass


@dataclass(frozen=True, slots=True)
class CopyFail:
    message: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """Type ``F``: the fast-path interface; kept whole because it is refused (0A000)."""

    payload: bytes


FrontendMessage = (
    StartupMessage
    | SSLRequest
    | GSSENCRequest
    | CancelRequest
    | PasswordMessage
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | CopyData
    | CopyDone
    | CopyFail
    | FunctionCall
)

# --- backend messages -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthenticationOk:
    pass


@dataclass(frozen=True, slots=True)
class AuthenticationCleartextPassword:
    pass


@dataclass(frozen=True, slots=True)
class AuthenticationMD5Password:
    salt: bytes

    def __post_init__(self) -> None:
        if len(self.salt) != 4:
            raise ValueError("an MD5 salt is 4 bytes")


@dataclass(frozen=True, slots=True)
class AuthenticationSASL:
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticationSASLContinue:
    data: bytes


@dataclass(frozen=True, slots=True)
class AuthenticationSASLFinal:
    data: bytes


@dataclass(frozen=True, slots=True)
class ParameterStatus:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class BackendKeyData:
    process_id: int
    secret_key: int


@dataclass(frozen=True, slots=True)
class ReadyForQuery:
    """``status`` is the transaction status byte: ``I``, ``T`` or ``E``."""

    status: str

    def __post_init__(self) -> None:
        if self.status not in ("I", "T", "E"):
            raise ValueError(f"invalid transaction status {self.status!r}")


@dataclass(frozen=True, slots=True)
class FieldDescription:
    name: str
    type_oid: int
    type_size: int = -1
    format: int = 0
    table_oid: int = 0
    column_attr: int = 0
    type_modifier: int = -1


@dataclass(frozen=True, slots=True)
class RowDescription:
    fields: tuple[FieldDescription, ...]


@dataclass(frozen=True, slots=True)
class DataRow:
    values: tuple[bytes | None, ...]


@dataclass(frozen=True, slots=True)
class CommandComplete:
    tag: str


@dataclass(frozen=True, slots=True)
class EmptyQueryResponse:
    pass


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """Fields are (code, value) pairs: ``S``, ``V``, ``C``, ``M`` always (in that order)."""

    fields: tuple[tuple[str, str], ...]

    def get(self, code: str) -> str | None:
        return dict(self.fields).get(code)


@dataclass(frozen=True, slots=True)
class NoticeResponse:
    fields: tuple[tuple[str, str], ...]

    def get(self, code: str) -> str | None:
        return dict(self.fields).get(code)


@dataclass(frozen=True, slots=True)
class ParseComplete:
    pass


@dataclass(frozen=True, slots=True)
class BindComplete:
    pass


@dataclass(frozen=True, slots=True)
class CloseComplete:
    pass


@dataclass(frozen=True, slots=True)
class NoData:
    pass


@dataclass(frozen=True, slots=True)
class PortalSuspended:
    pass


@dataclass(frozen=True, slots=True)
class ParameterDescription:
    type_oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NegotiateProtocolVersion:
    newest_minor: int
    unrecognized: tuple[str, ...] = field(default=())


BackendMessage = (
    AuthenticationOk
    | AuthenticationCleartextPassword
    | AuthenticationMD5Password
    | AuthenticationSASL
    | AuthenticationSASLContinue
    | AuthenticationSASLFinal
    | ParameterStatus
    | BackendKeyData
    | ReadyForQuery
    | RowDescription
    | DataRow
    | CommandComplete
    | EmptyQueryResponse
    | ErrorResponse
    | NoticeResponse
    | ParseComplete
    | BindComplete
    | CloseComplete
    | NoData
    | PortalSuspended
    | ParameterDescription
    | NegotiateProtocolVersion
)

#: every backend message class, for exhaustiveness checks in tests
BACKEND_TYPES: tuple[type, ...] = get_args(BackendMessage)
