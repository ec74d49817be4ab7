"""The PostgreSQL store: stateless cubequeue front ends over one PostgreSQL database.

Entry point: :class:`PostgresStore` (``--store postgresql://…``). Every statement is one
PL/pgSQL function call (``migrations/``), serialised per prefix with an advisory lock.
"""

from __future__ import annotations

from cubequeue.storage.postgres.errors import StatementInDoubt, StoreRefused, StoreUnavailable
from cubequeue.storage.postgres.migrate import migrate
from cubequeue.storage.postgres.store import PostgresStore

__all__ = ["PostgresStore", "StatementInDoubt", "StoreRefused", "StoreUnavailable", "migrate"]
