"""Connections per wire and the commands counter, read from the server's own metrics.

A restricted collect reads just these two families, so the store collector behind
``/metrics`` (which takes ``store.stats()``) is not run for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

__all__ = ["Counters", "read_counters"]

CONNECTIONS = "cubequeue_connections_open"
COMMANDS = "cubequeue_commands_total"


@dataclass(frozen=True, slots=True)
class Counters:
    connections: dict[str, int]
    commands_total: float


def read_counters(registry: CollectorRegistry) -> Counters:
    connections: dict[str, int] = {}
    total = 0.0
    for family in registry.restricted_registry([CONNECTIONS, COMMANDS]).collect():
        for sample in family.samples:
            if sample.name == CONNECTIONS:
                connections[str(sample.labels.get("protocol", ""))] = int(sample.value)
            elif sample.name == COMMANDS:
                total += float(sample.value)
    return Counters(connections, total)
