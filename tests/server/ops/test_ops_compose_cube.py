"""docker-compose.yml's example Cube service runs what tests/node/cube-api tests: the same
Cube version, model and seed, a PostgreSQL data source, ports on loopback only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CUBE_API = ROOT / "tests" / "node" / "cube-api"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data["services"]


def _mounts(svc: dict[str, Any]) -> dict[str, str]:
    """container path → host path (relative to the compose file)."""
    return {v.split(":")[1]: v.split(":")[0] for v in svc.get("volumes", [])}


def test_cube_image_is_the_tested_version(services: dict[str, Any]) -> None:
    tested = json.loads((CUBE_API / "package.json").read_text())["dependencies"]["@cubejs-backend/server"]
    assert services["cube"]["image"] == f"cubejs/cube:v{tested}"


def test_cube_serves_the_tested_model(services: dict[str, Any]) -> None:
    host = _mounts(services["cube"])["/cube/conf/model"]
    assert (ROOT / host).resolve() == CUBE_API / "model"
    assert (CUBE_API / "model" / "cubes" / "orders.js").is_file()


def test_postgres_data_source_is_seeded_and_matches_cube_env(services: dict[str, Any]) -> None:
    pg, cube = services["postgres"], services["cube"]
    seed = [host for target, host in _mounts(pg).items() if target.startswith("/docker-entrypoint-initdb.d/")]
    assert [(ROOT / h).resolve() for h in seed] == [CUBE_API / "seed.sql"]
    env, pg_env = cube["environment"], pg["environment"]
    assert env["CUBEJS_DB_TYPE"] == "postgres" and env["CUBEJS_DB_HOST"] == "postgres"
    assert (env["CUBEJS_DB_USER"], env["CUBEJS_DB_PASS"], env["CUBEJS_DB_NAME"]) == (
        pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], pg_env["POSTGRES_DB"])
    assert cube["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in pg


def test_every_published_port_is_on_loopback(services: dict[str, Any]) -> None:
    published = [p for svc in services.values() for p in svc.get("ports", [])]
    assert published
    assert all(str(p).startswith("127.0.0.1:") for p in published), published
