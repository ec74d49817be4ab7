"""Start the real server for end-to-end tests: a subprocess on free loopback ports.

The processes are started by the same code as the public ``cubequeue_server`` fixture
(:func:`cubequeue.server.pytest_plugin.start_cubequeue`), without ``--test-clock``
unless a test asks for it.

* ``server``: one shared server (with ``--test-clock``) for the whole session; tests that
  share it keep to their own queue prefixes and cache keys, and never move its clock.
* ``launcher``: a session-scoped ``launch`` for module-scoped fixtures.
* ``start_server``: servers of one test's own (its options, its clock, or to stop it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue


def launch(*args: str, env: dict[str, str] | None = None) -> CubequeueServer:
    """``python -m cubequeue.server *args`` on free ports, once both ports accept."""
    return start_cubequeue(*args, test_clock=False, env=env)


def _tracking_launcher() -> tuple[Callable[..., CubequeueServer], list[CubequeueServer]]:
    started: list[CubequeueServer] = []

    def start(*args: str, env: dict[str, str] | None = None) -> CubequeueServer:
        proc = launch(*args, env=env)
        started.append(proc)
        return proc

    return start, started


@pytest.fixture(scope="session")
def server() -> Iterator[CubequeueServer]:
    proc = launch("--test-clock")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def launcher() -> Iterator[Callable[..., CubequeueServer]]:
    start, started = _tracking_launcher()
    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def start_server() -> Iterator[Callable[..., CubequeueServer]]:
    start, started = _tracking_launcher()
    yield start
    for proc in started:
        proc.stop()


# --- what `make quick` leaves out ---------------------------------------------------------
#
# `make quick` runs `pytest -m "not slow and not system"`: the unit and in-process tests,
# from the venv alone, in a few minutes. A test is `system` when it needs more than the
# venv (Debian's psql, PostgreSQL, Chromium, Java or promtool; npm packages; pgbench), and
# `slow` when it runs long (kill loops, failovers, large property searches). Tests mark
# themselves with @pytest.mark.slow; the modules and tests below are marked here, each with
# what it needs, so the list of what needs the machine is in one place.

#: test module (or module::test) -> what it needs beyond the venv
NEEDS_SYSTEM = {
    "tests/storage/postgres/": "a throwaway PostgreSQL (Debian's initdb, pg_ctl)",
    "tests/server/sql/test_sql_pg_reference.py": "a throwaway PostgreSQL as the reference",
    "tests/server/test_plain_wait_wire.py::test_postgresql_store_plain_sql_over_both_wires":
        "a throwaway PostgreSQL",
    "tests/server/console/test_console_browser.py": "Debian's Chromium",
    "tests/server/test_origin_browser.py": "Debian's Chromium",
    "tests/server/ops/test_ops_metrics_monitoring.py": "promtool (Debian's prometheus)",
    "tests/server/pgwire/test_pg_clients.py": "node-postgres (npm), pgjdbc and Java, psql",
    "tests/server/pgwire/test_pg_ids.py": "node-postgres (npm)",
    "tests/server/pgwire/test_pg_psql.py": "psql",
    "tests/server/pgwire/test_psql_describe.py": "psql",
    "tests/server/pgwire/test_copy.py": "psql",
    "tests/server/pgwire/test_pg_list_stream.py::test_a_large_listing_over_a_simple_query_with_psql":
        "psql",
    "tests/server/sql/test_copy_tables.py": "psql",
    "tests/server/sql/test_sql_read_payloads_wire.py": "psql",
    "tests/server/test_doors.py::test_psql_over_the_unix_socket": "psql",
    "tests/server/ops/test_ops_readme_examples.py": "psql",
    "tests/bench/test_cube_queue_bench.py": "Cube's QueryQueue (npm)",
    "tests/bench/test_floor.py": "pgbench (Debian's postgresql-contrib)",
}

#: long tests marked here rather than in their files (measured on this machine's 2 cores)
SLOW = (
    "tests/storage/durable/test_durable_kill.py",
    "tests/server/ops/test_ops_plugin.py::test_fixture_from_a_throwaway_project",
    "tests/server/ops/test_ops_live.py",
    "tests/server/cubews/test_ws_query_reader.py",
    "tests/server/cubews/test_ws_statement_accounting.py",
    "tests/server/cubews/test_ws_limits.py",
    "tests/server/test_plain_wait_wire.py",
    "tests/storage/test_storage_active_text.py",
    "tests/storage/test_storage_retrieve.py::test_fast_track_records_last_concurrency",
    # end to end with servers of their own per test: covered by make test
    "tests/server/test_doors.py",
    "tests/server/ops/test_ops_startup.py",
    "tests/server/ops/test_ops_pgclient.py",
    "tests/server/test_http_port.py",
    "tests/server/test_origin_host.py",
    "tests/server/pgwire/test_bursts.py",
    "tests/server/pgwire/test_shed_metrics.py",
    "tests/server/pgwire/test_pg_limits_extra.py",
    "tests/bench/test_bench_harness.py",
)


def _listed(nodeid: str, entries: Iterable[str]) -> bool:
    """Whether a listed folder (ending in /), module or module::test holds this test
    (a parametrized test's ids carry their [params] after the name)."""
    for entry in entries:
        if entry.endswith("/"):
            if nodeid.startswith(entry):
                return True
        elif nodeid == entry or nodeid.startswith((entry + "::", entry + "[")):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _listed(item.nodeid, NEEDS_SYSTEM):
            item.add_marker(pytest.mark.system)
        if _listed(item.nodeid, SLOW):
            item.add_marker(pytest.mark.slow)
