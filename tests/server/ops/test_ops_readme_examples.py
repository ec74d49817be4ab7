"""The README's psql examples, run as printed against a real server: every ``$ psql …``
line of a ``console`` block, pointed at the test server's port, prints what the README
shows under it (trailing spaces aside, which psql pads its columns with)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")

README = Path(__file__).resolve().parents[3] / "README.md"
_CONSOLE = re.compile(r"```console\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    """(command line, expected output) for each ``$ psql`` line of a console block."""
    examples = []
    for block in _CONSOLE.findall(README.read_text()):
        command, output = None, []
        for line in [*block.splitlines(), "$ "]:
            if line.startswith("$ "):
                if command is not None:
                    examples.append((command, "\n".join(output)))
                command = line[2:].split("  #")[0] if line.startswith("$ psql ") else None
                output = []
            elif command is not None:
                output.append(line.rstrip())
    return examples


def _run(server: CubequeueServer, command: str) -> str:
    args = shlex.split(command)
    if "-p" in args:
        args[args.index("-p") + 1] = str(server.port)
    else:
        args[1:1] = ["-p", str(server.port)]
    args[args.index("-h") + 1] = server.host
    out = subprocess.run([args[0], "-X", *args[1:]], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
    assert out.returncode == 0, out.stderr
    return "\n".join(line.rstrip() for line in out.stdout.splitlines()).rstrip("\n")


def test_readme_has_psql_examples() -> None:
    assert len(_examples()) >= 2


@pytest.mark.parametrize(("command", "expected"), _examples())
def test_readme_psql_example_prints_what_the_readme_shows(command: str, expected: str) -> None:
    server = start_cubequeue()  # a fresh one: the quick start's first id is 1
    try:
        assert _run(server, command) == expected
    finally:
        server.stop()
