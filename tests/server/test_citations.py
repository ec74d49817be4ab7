"""Words that stay true (issue 24): what the code's docstrings and comments cite exists,
and measured timings live in bench/RESULTS-notes.md, not next to the code they measured.

Scans every module of server/, grammar/ and storage/: a file path (``….py``, ``….md``,
``….lark``, ``….fbs``) must name a file of the repository (from its root, the citing
module's folder, or a package's root), a ``:mod:`` reference an importable module of
cubequeue, and no docstring or comment may carry a figure in µs, us or ms.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "grammar", "storage")
_PATH = re.compile(r"(?<![\w./-])([A-Za-z_][\w/.-]*\.(?:py|md|lark|fbs))\b")
_MODULE = re.compile(r":mod:`~?([\w.]+)`")
_TIMING = re.compile(r"(?<![\w.])\d[\d.,]*\s*(?:µs|us|ms)\b")
#: timings left in a comment, by file, with the reason
TIMINGS_LEFT: dict[str, str] = {}


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _texts(path: Path) -> list[str]:
    """Every docstring and comment of a module."""
    source = path.read_text(encoding="utf-8")
    texts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                texts.append(doc)
    texts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return texts


def _exists(cited: str, here: Path) -> bool:
    places = [ROOT / cited, here.parent / cited, *(ROOT / p / cited for p in PACKAGES)]
    return any(place.exists() for place in places)


def _module_exists(name: str, here: Path) -> bool:
    rel = here.relative_to(ROOT).with_suffix("")
    package = ["cubequeue", *rel.parts[:-1]]  # a module's package, or __init__'s own
    if name.startswith("."):
        dots = len(name) - len(name.lstrip("."))
        parts = package[: len(package) - (dots - 1)] + [p for p in name.lstrip(".").split(".") if p]
    else:
        parts = name.split(".")
    if parts[0] != "cubequeue":
        return True  # another library's module
    target = ROOT.joinpath(*parts[1:])
    return target.with_suffix(".py").exists() or (target / "__init__.py").exists()


def test_every_cited_path_exists() -> None:
    missing = []
    for path in _modules():
        for text in _texts(path):
            for match in _PATH.finditer(text):
                cited = match.group(1).rstrip(".")
                if not _exists(cited, path):
                    missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert missing == []


def test_every_cited_module_exists() -> None:
    missing = []
    for path in _modules():
        for text in _texts(path):
            for match in _MODULE.finditer(text):
                if not _module_exists(match.group(1), path):
                    missing.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert missing == []


def test_no_measured_timing_in_a_comment() -> None:
    found = []
    for path in _modules():
        name = path.relative_to(ROOT).as_posix()
        if name in TIMINGS_LEFT:
            continue
        for text in _texts(path):
            found += [f"{name}: {m.group(0)}" for m in _TIMING.finditer(text)]
    assert found == []


def test_the_timings_left_are_still_there() -> None:
    for name in TIMINGS_LEFT:
        assert any(_TIMING.search(text) for text in _texts(ROOT / name)), name
