"""Deferred bulk work: what a bulk statement leaves to do after it answered.

A bulk statement (QUEUE TRUNCATE, QUEUE PURGE) detaches the structures it empties in O(1)
and answers at once, so it is atomic as clients see it; releasing what it detached (and
reporting each departure to the ``on_departure`` hook) costs O(n) and would hold the
event loop for seconds at 10⁶ items. That work is queued here as jobs and run a bounded
amount at a time: the store runs one budget of it after every step, and the server may run
more between steps (:meth:`~cubequeue.storage.store.MemoryStore.run_deferred`). The budget is
injected (:attr:`~cubequeue.storage.limits.Limits.work_budget`), so tests check the
slicing by counting units, never by wall time.

A unit is roughly one item's worth of work (an item released, a departure reported, a few
hundred sorted-index entries dropped); jobs run in the order they were queued.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["ENTRIES_PER_UNIT", "DeferredWork", "Job", "release_list", "release_lists"]

#: sorted-index or heap entries released per unit of work (plain ints: cheap)
ENTRIES_PER_UNIT = 256

#: ``job(budget)`` does at most ``budget`` units: (units used, finished)
Job = Callable[[int], tuple[int, bool]]


class DeferredWork:
    __slots__ = ("_jobs", "units_done")

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        #: units run since the store was made (SYS CACHESTORE INFO, tests)
        self.units_done = 0

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def push(self, job: Job) -> None:
        self._jobs.append(job)

    def run(self, budget: int) -> int:
        """Run jobs for at most ``budget`` units (at least one unit when any is queued, so
        a budget below a job's smallest step still progresses); the units used."""
        jobs = self._jobs
        used = 0
        while jobs and used < budget:
            spent, finished = jobs[0](max(1, budget - used))
            used += spent
            if finished:
                jobs.popleft()
        self.units_done += used
        return used


def release_list(values: list[int], budget: int, per_unit: int = 1) -> int:
    """Drop up to ``budget * per_unit`` entries from the end of ``values`` (a tail delete
    is O(k) and frees what only this list held); the units used."""
    count = min(len(values), budget * per_unit)
    if count:
        del values[len(values) - count :]
    return -(-count // per_unit)


def release_lists(lists: list[list[int]], budget: int) -> int:
    """Empty ``lists`` from the last one back, :data:`ENTRIES_PER_UNIT` entries a unit,
    popping each once empty, within ``budget`` units; the units used (a TRUNCATE's or a
    PURGE's detached indexes)."""
    used = 0
    while used < budget and lists:
        used += release_list(lists[-1], budget - used, ENTRIES_PER_UNIT)
        if not lists[-1]:
            lists.pop()
    return used
