"""Durable mode's log, disk, snapshot and recovery figures, read at scrape time."""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cubequeue.storage.capabilities import capabilities_of


class DurableCollector:
    """Durable mode's log, disk, snapshot and recovery figures, read at scrape time from a
    store that keeps them (:class:`~cubequeue.storage.capabilities.ReportsPersistence`,
    found when the store was attached; this module does not load the durable package); an
    in-memory store yields nothing, so the names exist only where they mean something."""

    def __init__(self, store: object) -> None:
        self._store = store

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        store = capabilities_of(self._store).persistence
        if store is None:
            return
        stats = store.log.stats
        for name, doc, value in (
                ("cubequeue_log_frames", "Log frames (group commits) written", stats.frames),
                ("cubequeue_log_bytes", "Log bytes written", stats.bytes),
                ("cubequeue_log_records", "State records written to the log", stats.records),
                ("cubequeue_log_fsyncs", "fdatasync calls on the log", stats.fsyncs),
                ("cubequeue_log_fsync_seconds", "Time spent in fdatasync on the log",
                 stats.fsync_seconds),
                ("cubequeue_log_delayed_fsyncs", "everysec fsyncs still running after 2 s "
                 "(the disk is busy)", stats.delayed_fsyncs)):
            yield CounterMetricFamily(name, doc, value=float(value))
        yield GaugeMetricFamily("cubequeue_log_fsync_max_seconds",
                                "Slowest fdatasync on the log so far",
                                value=float(stats.fsync_max_seconds))
        yield GaugeMetricFamily("cubequeue_log_stopped",
                                "1 while the log refuses writes after a failed write or "
                                "fsync (mutating commands get 58030)",
                                value=0.0 if store.log.failed is None else 1.0)
        disk = GaugeMetricFamily("cubequeue_persist_disk_bytes",
                                 "Bytes in the data directory by kind (log, snapshot, "
                                 "quarantine)", labels=["kind"])
        by_kind = dict(store.disk_by_kind())
        by_kind["log"] = by_kind.get("log", 0) + store.log.bytes_since_snapshot
        for kind, size in sorted(by_kind.items()):
            disk.add_metric([kind], float(size))
        yield disk
        yield GaugeMetricFamily("cubequeue_persist_segments",
                                "Log segment files in the data directory",
                                value=float(_log_segments(store.settings.data_dir)))
        snap = store.last_snapshot
        yield GaugeMetricFamily("cubequeue_snapshot_bytes", "Size of the latest snapshot",
                                value=float(0 if snap is None else snap.bytes))
        yield GaugeMetricFamily("cubequeue_snapshot_last_time_seconds",
                                "When the latest snapshot was finished, since the Unix "
                                "epoch (0: none this run)",
                                value=0.0 if snap is None else snap.finished_ms / 1000)
        yield GaugeMetricFamily("cubequeue_snapshot_last_lsn",
                                "Last log sequence number the latest snapshot holds",
                                value=float(0 if snap is None else snap.lsn))
        yield CounterMetricFamily("cubequeue_snapshots", "Snapshots written this run",
                                  value=float(store.snapshots_total))
        report = store.recovery
        if report is not None:
            yield GaugeMetricFamily("cubequeue_recovery_duration_seconds",
                                    "How long the startup recovery took",
                                    value=float(report.seconds))
            yield GaugeMetricFamily("cubequeue_recovery_records",
                                    "State records replayed by the startup recovery",
                                    value=float(report.records))
            yield GaugeMetricFamily("cubequeue_recovery_quarantined_frames",
                                    "Torn or corrupt frames the startup recovery moved to "
                                    "quarantine/", value=float(report.torn_tails
                                                              + report.corrupt_frames))
            yield GaugeMetricFamily("cubequeue_recovery_quarantined_records",
                                    "Records that failed validation at startup (in "
                                    "quarantine/records.jsonl)",
                                    value=float(report.quarantined_records))


def _log_segments(data_dir: str) -> int:
    """The data directory's log segments (a listing of a few names; the store is durable,
    so its layout module is loaded already)."""
    from cubequeue.storage.durable import layout

    try:
        names = os.listdir(data_dir)
    except OSError:
        return 0
    return sum(1 for name in names if (parsed := layout.parse_name(name)) and parsed[0] == "log")
