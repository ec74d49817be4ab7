"""Store-wide counters for metrics and ``SYS CACHESTORE INFO``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PrefixCounts", "StoreStats"]


@dataclass(frozen=True, slots=True)
class PrefixCounts:
    prefix: str
    pending: int
    active: int


@dataclass(frozen=True, slots=True)
class StoreStats:
    prefixes: list[PrefixCounts] = field(default_factory=list)
    items_total: int = 0
    results_total: int = 0
    waiters: int = 0
    cache_keys: int = 0
    cache_bytes: int = 0
    evictions_total: int = 0
