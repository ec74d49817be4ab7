"""Another client's wait while the server works: ``SELECT 1`` in a loop on its own thread.

What the stall benchmarks (bench/stall.py, bench/metrics_scrape.py) report as "the stall it
causes": the round trips of a client that only wants a trivial answer while another does
something large.
"""

from __future__ import annotations

import threading
import time

import psycopg


class Probe(threading.Thread):
    """``SELECT 1`` in a loop; round trips in ms while :attr:`recording` is set."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.samples: list[float] = []
        self.recording = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            t0 = time.perf_counter()
            self.conn.execute("SELECT 1").fetchall()
            elapsed = (time.perf_counter() - t0) * 1000
            if self.recording.is_set():
                self.samples.append(elapsed)

    def take(self) -> list[float]:
        """The samples so far, and start afresh."""
        samples, self.samples = self.samples, []
        return samples
