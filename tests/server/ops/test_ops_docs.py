"""README.md and docs/ stay true to the code: every doc is linked from the README,
docs/architecture.md names every module, and docs/dialect.md's SQLSTATE table lists
every SQLSTATE the server answers with."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: files whose SQLSTATEs are not answers: codes read from PostgreSQL (the store's
#: mapping of the database's errors, the client codec) and the log's "no error"
_NOT_ANSWERS = {
    "storage/postgres/errors.py",
    "server/pgwire/client.py",
    "server/pgclient.py",
    "server/logs.py",
}
_SQLSTATE = re.compile(r"""["']([0-9A-Z]{5})["']""")
#: PostgreSQL's SQLSTATE classes (Appendix A), so an OID such as "16386" is not taken for one
_CLASSES = frozenset({
    "00", "01", "02", "03", "08", "09", "0A", "0B", "0F", "0L", "0P", "0Z", "20", "21", "22",
    "23", "24", "25", "26", "27", "28", "2B", "2D", "2F", "34", "38", "39", "3B", "3D", "3F",
    "40", "42", "44", "53", "54", "55", "57", "58", "72", "F0", "HV", "P0", "XX",
})


def test_readme_links_every_doc() -> None:
    readme = README.read_text()
    wanted = [f"docs/{p.name}" for p in sorted(DOCS.glob("*.md"))] + ["docs/monitoring/"]
    missing = [doc for doc in wanted if f"]({doc})" not in readme]
    assert not missing, f"README.md does not link {missing}"


def _modules() -> list[str]:
    """The repository's modules: git's tracked files where there is a checkout (a file
    still being written in the work tree is not one yet), else the files on disk."""
    try:
        listed = subprocess.run(["git", "ls-files", "server", "grammar", "storage"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [p.relative_to(ROOT).as_posix()
                  for package in ("server", "grammar", "storage")
                  for p in (ROOT / package).rglob("*.py")]
    return sorted(m for m in listed
                  if m.endswith(".py") and not m.endswith("__init__.py") and (ROOT / m).exists())


def test_architecture_names_every_module() -> None:
    """A module is named by its file name (``steps.py``) or, at the top of server/, by
    its stem in the layer table (``executor``)."""
    text = (DOCS / "architecture.md").read_text()
    missing = [m for m in _modules()
               if f"`{Path(m).name}`" not in text and f"`{Path(m).stem}`" not in text
               and f"`{m}`" not in text and f"{Path(m).name}`" not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def _answered_sqlstates() -> dict[str, str]:
    codes: dict[str, str] = {}
    for module in _modules():
        if module in _NOT_ANSWERS:
            continue
        for code in _SQLSTATE.findall((ROOT / module).read_text()):
            if code[:2] in _CLASSES and not code.isalpha():
                codes.setdefault(code, module)
    return codes


def test_dialect_lists_every_sqlstate_answered() -> None:
    text = (DOCS / "dialect.md").read_text()
    table = text.split("10. **Errors.**", 1)[1].split("\n11. ", 1)[0]
    listed = set(re.findall(r"\b[0-9A-Z]{5}\b", table))
    missing = {code: where for code, where in _answered_sqlstates().items() if code not in listed}
    assert not missing, f"docs/dialect.md §8 rule 10 lacks {missing}"
