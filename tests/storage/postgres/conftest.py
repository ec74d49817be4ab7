"""Fixtures for the store-level conformance suite: the same scenarios against the
in-memory MemoryStore and the PostgresStore, through one synchronous adapter
(:mod:`pgstore_backend`).

One throwaway PostgreSQL cluster (Debian's binaries, loopback, a temporary directory) is
started per session; each test gets the migrated database reset to empty, ids restarting
at 1 and the test clock frozen at ``START``, so both stores answer with the same ids
and times.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pgcluster import Cluster, find_bin, start_cluster
from pgstore_backend import Backend, BackendFactory

from cubequeue.storage.limits import Limits


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs it)")
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pg_dsn(pg_cluster: Cluster) -> str:
    return pg_cluster.create_database("conformance")





@pytest.fixture(params=["memory", "postgresql"])
def make_backend(request: pytest.FixtureRequest) -> Iterator[BackendFactory]:
    """``make_backend(limits=None)``: the parametrized store, built with those limits."""
    made: list[Backend] = []
    kind: str = request.param

    def make(limits: Limits | None = None) -> Backend:
        dsn = request.getfixturevalue("pg_dsn") if kind == "postgresql" else None
        backend = Backend(kind, limits or Limits(clock_control=True), dsn)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def backend(make_backend: BackendFactory) -> Backend:
    return make_backend()
