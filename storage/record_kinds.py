"""The kinds of durable mode's state records (``cubequeue.storage.durable.records``
documents their fields). Here so the in-memory store can journal its changes without
importing the durable package and its writer thread."""

from __future__ import annotations

from typing import Final

ITEM_PUT: Final = 1
ITEM_SET: Final = 2
ITEM_DEL: Final = 3
RESULT_PUT: Final = 4
RESULT_FLAG: Final = 5
RESULT_DEL: Final = 6
CACHE_PUT: Final = 7
CACHE_DEL: Final = 8
TRUNCATE: Final = 9
ID_RESERVE: Final = 10
CLOCK: Final = 11
TRAILER: Final = 12
#: a bulk removal by prefix (QUEUE PURGE, CACHE PURGE): one record however many it removes
PURGE: Final = 13
#: what a queue prefix remembers beyond its rows (last CONCURRENCY, last TO_CANCEL timeouts)
PREFIX: Final = 14
