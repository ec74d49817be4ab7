"""The A/B command's pure parts (bench/ab.py): how it pairs runs and prepares a tree.

A whole A/B is minutes of alternated runs, so it is not run here; the floor's and the
round trip's own tests (tests/bench/test_floor.py) cover the runs it is made of.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# the repository root holds the ``bench`` package; pytest puts only tests/ on the path
from bench.ab import FLOOR, Measure, prepared_tree, summary


def test_ratios_pair_runs_of_the_same_repetition() -> None:
    m = Measure("SELECT 1 -M prepared -c 1", "server µs/round trip")
    for rep, (base, new, floor) in enumerate([(20.0, 15.0, 10.0), (30.0, 15.0, 12.0),
                                              (24.0, 18.0, 10.0)]):  # fmt: skip
        m.add("base", rep, base)
        m.add("new", rep, new)
        m.add(FLOOR, rep, floor)
    # medians 24 and 15: 0.62×; same-repetition ratios 0.75, 0.50, 0.75
    assert m.ratio("new", "base") == "0.62× (0.50–0.75)"
    assert m.spread("base") == "24.0 (20.0–30.0)"
    assert m.ratio("new", FLOOR) == "1.50× (1.25–1.80)"
    row = summary([m], "HEAD~1", "installed tree")[2]
    assert row.startswith("| SELECT 1 -M prepared -c 1, server µs/round trip | 24.0 (20.0–30.0)")
    assert row.endswith("| 0.62× (0.50–0.75) | 2.40× (2.00–2.50) | 1.50× (1.25–1.80) |")


def test_a_rejected_run_leaves_its_repetition_unpaired() -> None:
    m = Measure("cycle C=1 conc=2 normal", "server µs/cycle")
    m.add("base", 0, 800.0)
    m.add("base", 1, 900.0)
    m.add("new", 1, 450.0)  # repetition 0's new run failed its check
    assert m.ratio("new", "base") == "0.53×"  # medians 450 / 850; one pair, no range
    assert m.ratio("new", FLOOR) == "—"


def test_a_git_revision_becomes_an_importable_tree() -> None:
    with prepared_tree("HEAD") as tree:
        assert tree is not None
        for package in ("server", "grammar", "storage"):
            assert (tree / "cubequeue" / package / "__init__.py").is_file()
        made = tree
    assert not made.exists()  # removed afterwards


def test_a_checkout_is_linked_and_an_unknown_base_refused(tmp_path: Path) -> None:
    for package in ("server", "grammar", "storage"):
        (tmp_path / package).mkdir()
    with prepared_tree(str(tmp_path)) as tree:
        assert tree is not None and (tree / "cubequeue" / "server").resolve() == tmp_path / "server"
    with pytest.raises(SystemExit, match="neither a source tree nor a git revision"), \
            prepared_tree("no-such-revision-here"):  # fmt: skip
        pass
    with prepared_tree(None) as installed:
        assert installed is None
