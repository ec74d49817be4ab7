"""The former name of the client-side codec, :mod:`cubequeue.server.pgwire.client`.

Nothing new imports from here; it re-exports what its importers used until each one
reads :mod:`cubequeue.server.pgwire.client` (the codec) or :mod:`cubequeue.server.pgclient`
(the blocking clients), and then goes.
"""

from __future__ import annotations

from cubequeue.server.pgclient import RawClient
from cubequeue.server.pgwire.client import BackendDecoder, encode_frontend

__all__ = ["BackendDecoder", "RawClient", "encode_frontend"]
