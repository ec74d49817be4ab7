"""Cube Store's WebSocket protocol: flatbuffers HttpMessage codec and the /ws endpoint.

The package exports the sans-I/O part (codec and message values); the asyncio endpoint
lives in :mod:`.endpoint` and is mounted by :mod:`cubequeue.server.http`.
"""

from __future__ import annotations

from cubequeue.server.cubews.codec import (
    cell_text,
    decode_message,
    encode,
    encode_error,
    encode_query,
    encode_result_set,
)
from cubequeue.server.cubews.messages import (
    HttpError,
    HttpMessage,
    HttpQuery,
    HttpResultSet,
    HttpTable,
    OtherCommand,
    ParamValue,
)

__all__ = [
    "HttpError",
    "HttpMessage",
    "HttpQuery",
    "HttpResultSet",
    "HttpTable",
    "OtherCommand",
    "ParamValue",
    "cell_text",
    "decode_message",
    "encode",
    "encode_error",
    "encode_query",
    "encode_result_set",
]
