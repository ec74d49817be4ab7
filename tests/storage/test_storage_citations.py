"""Every repository path a module cites exists, and no docstring cites a numbered rule
of a design note the repository does not hold (issue 24: words that mislead)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("grammar", "storage", "server")
#: a path as modules cite it: from the repository root, or from their own package
_CITED = re.compile(
    r"(?<![\w/.])((?:storage|grammar|server|docs|tests|bench|migrations)/[\w/.-]*\w"
    r"\.(?:py|md|sql|lark))")


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_every_cited_path_exists() -> None:
    missing = []
    for source in _sources():
        for cited in _CITED.findall(source.read_text(encoding="utf-8")):
            if "NNNN" in cited:  # a file name pattern, not a file
                continue
            if not any((base / cited).exists() for base in (ROOT, source.parent)):
                missing.append(f"{source.relative_to(ROOT)}: {cited}")
    assert missing == []


def test_no_unnumbered_design_rules_are_cited() -> None:
    cites = [f"{source.relative_to(ROOT)}" for source in _sources()
             if "design's rule" in source.read_text(encoding="utf-8")]
    assert cites == []
