"""Two or more PostgresStore front ends over one real PostgreSQL (started per session)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from cubequeue.storage.postgres.cluster import Cluster, find_bin, start_cluster

_names = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs it)")
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def fresh_dsn(pg_cluster: Cluster) -> str:
    """A new, empty database for one test (the front ends migrate it themselves)."""
    return pg_cluster.create_database(f"frontends{next(_names)}")
