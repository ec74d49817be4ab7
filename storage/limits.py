"""Caps and knobs of the store: the fixed limits of the dialect, and :class:`Limits`, set
once from the server's configuration.

The fixed limits are Cube Store's (``docs/dialect.md`` §3.1 and §6) and are defined here
only: the server reads them to check a process id before it reaches the store.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_EXTERNAL_ID_BYTES", "MAX_EXTRA_DEPTH", "MAX_PROCESS_ID_BYTES", "Limits"]

#: QUEUE ADD's EXTERNAL_ID, in UTF-8 bytes
MAX_EXTERNAL_ID_BYTES = 48
#: a connection's process id, in UTF-8 bytes (Cube Store's contract)
MAX_PROCESS_ID_BYTES = 96
#: MERGE_EXTRA's JSON nesting (arrays and objects); deeper text is refused before it is
#: parsed, so no recursive parser or printer ever sees it (Cube writes flat objects)
MAX_EXTRA_DEPTH = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    #: results are deleted this long after their ACK (§8 rule 9; hard limit 5 min)
    results_expire_ms: int = 60_000
    #: CACHE SET with a value of this many bytes or more is refused (54000)
    cache_max_entry_bytes: int = 66_060_288
    #: LRU eviction beyond these
    cache_max_keys: int = 100_000
    cache_max_bytes: int = 4_294_967_296
    #: queued items in total; ADD / ADD_AND_RETRIEVE beyond it are refused (54000)
    max_items: int = 1_000_000
    #: ADD payloads and ACK results larger than this are refused (54000)
    max_payload_bytes: int = 66_060_288
    #: an item's ``extra`` (the MERGE_EXTRA argument and the merged text) in UTF-8 bytes;
    #: larger is refused (54000): every later merge parses and prints it on the loop. Cube
    #: writes tiny patches (``{"startQueryTime":…}``); at 64 KiB the worst text (every
    #: number a float in ryu's layout) merges in a short hold of the loop, at 1 MiB in a
    #: long one (figures in bench/RESULTS-notes.md)
    max_extra_bytes: int = 65_536
    #: rows kept in system.queue_log
    queue_log_size: int = 10_000
    #: units of bulk work (items freed, swept, departures reported) a step or one
    #: :meth:`~cubequeue.storage.store.MemoryStore.run_deferred` call does at most, so no bulk
    #: statement holds the event loop for long (tests inject a small one)
    work_budget: int = 1024
    #: SYS CLOCK … is allowed (--test-clock)
    clock_control: bool = False
