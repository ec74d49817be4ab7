"""Two or more PostgresStore front ends over one real PostgreSQL: the session's cluster of
``tests/storage/postgres/conftest.py``, one fresh database per test."""

from __future__ import annotations

import itertools

import pytest
from pgcluster import Cluster

_names = itertools.count(1)


@pytest.fixture
def fresh_dsn(pg_cluster: Cluster) -> str:
    """A new, empty database for one test (the front ends migrate it themselves)."""
    return pg_cluster.create_database(f"frontends{next(_names)}")
