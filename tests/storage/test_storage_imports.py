"""The dialect's data types import without the parser: a store loads no Lark.

Run in a fresh interpreter, since this test process has imported the parser already.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _loads_lark(statement: str) -> bool:
    code = f"{statement}\nimport sys\nprint('lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    return out.stdout.strip() == "True"


@pytest.mark.parametrize("statement", [
    "import cubequeue.storage.store",
    "import cubequeue.storage",
    "import cubequeue.grammar.commands, cubequeue.grammar.results, cubequeue.grammar.errors",
    "from cubequeue.grammar import Command, Param, Slot",
])
def test_store_and_dialect_types_load_no_lark(statement: str) -> None:
    assert not _loads_lark(statement)


def test_the_parser_is_still_one_attribute_away() -> None:
    """Reading a parser name from the package loads it, as before."""
    assert _loads_lark("import cubequeue.grammar as g\nassert g.parse('CACHE GET x')")
