"""The correctness check after every run: each query ran exactly once and got
exactly one result. Duplicates and losses are errors, and a run with errors is not a
result: ``RunRecord.errors`` non-empty makes the caller discard the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Check", "check_run"]


@dataclass(frozen=True, slots=True)
class Check:
    errors: tuple[str, ...]
    duplicate_executions: tuple[str, ...]
    lost_executions: tuple[str, ...]
    duplicate_results: tuple[str, ...]
    lost_results: tuple[str, ...]
    wrong_results: tuple[str, ...]
    unknown: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


def _sample(paths: Iterable[str], n: int = 3) -> str:
    items = sorted(paths)
    more = f" … (+{len(items) - n})" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def check_run(
    submitted: Iterable[str],
    executed: Iterable[str],
    results: Iterable[tuple[str, bool]],
) -> Check:
    """``submitted``: every query's path; ``executed``: one entry per execution start;
    ``results``: one (path, result matches the path) per result a client received."""
    want = Counter(submitted)
    ran = Counter(executed)
    got = Counter(p for p, _ in results)
    wrong = tuple(sorted({p for p, ok in results if not ok}))
    dup_sub = tuple(sorted(p for p, n in want.items() if n > 1))
    dup_exec = tuple(sorted(p for p, n in ran.items() if n > 1))
    lost_exec = tuple(sorted(p for p in want if p not in ran))
    dup_res = tuple(sorted(p for p, n in got.items() if n > 1))
    lost_res = tuple(sorted(p for p in want if p not in got))
    unknown = tuple(sorted((set(ran) | set(got)) - set(want)))
    errors = []
    for label, paths in (
        ("query submitted twice (harness bug)", dup_sub),
        ("duplicate execution", dup_exec),
        ("lost execution", lost_exec),
        ("duplicate result", dup_res),
        ("lost result", lost_res),
        ("wrong result", wrong),
        ("execution/result for a query never submitted", unknown),
    ):
        if paths:
            errors.append(f"{label}: {len(paths)} ({_sample(paths)})")
    return Check(tuple(errors), dup_exec, lost_exec, dup_res, lost_res, wrong, unknown)
