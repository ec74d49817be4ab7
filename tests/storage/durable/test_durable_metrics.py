"""/metrics of a durable store: the log, disk, snapshot and recovery families, as listed
in docs/metrics.md's durable section, with values read from the store."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cubequeue.grammar import parse
from cubequeue.server.metrics import Metrics
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable.opening import open_store
from cubequeue.storage.store import MemoryStore

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
_ROW = re.compile(r"^\| `([a-z_]+)` \| (\w+) \|", re.MULTILINE)
T0 = 1_700_000_000_000


def _durable_section() -> dict[str, str]:
    text = DOC.read_text().split("## Durable mode metrics")[1].split("\n## ")[0]
    return dict(_ROW.findall(text))


def _families(tmp_path: Path) -> dict[str, object]:
    async def run() -> bytes:
        durable, _ = await open_store(MemoryStore(FakeClock(T0)), data_dir=str(tmp_path),
                                      fsync="always", wall_ms=lambda: T0, on_fatal=print)
        try:
            out = durable.execute(parse("QUEUE ADD PRIORITY 1 'q:a' '{}'"))
            if inspect.isawaitable(out):
                await out
            await durable.snapshot()
            body, _ = Metrics(durable).render_for("application/openmetrics-text", "")
            return body
        finally:
            await durable.close()

    body = asyncio.run(run())
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def test_durable_families_match_the_docs_and_read_the_store(tmp_path: Path) -> None:
    families = _families(tmp_path)
    durable = {n: f.type for n, f in families.items()  # type: ignore[attr-defined]
               if n.startswith(("cubequeue_log_", "cubequeue_persist_", "cubequeue_snapshot",
                                "cubequeue_recovery_"))}
    assert durable == _durable_section()
    value = {n: f.samples[0].value for n, f in families.items() if f.samples}  # type: ignore[attr-defined]
    assert value["cubequeue_log_frames"] >= 1
    assert value["cubequeue_log_fsyncs"] >= 1
    assert value["cubequeue_snapshot_last_lsn"] >= 1
    assert value["cubequeue_log_stopped"] == 0
    kinds = {s.labels["kind"] for s in families["cubequeue_persist_disk_bytes"].samples}  # type: ignore[attr-defined]
    assert {"log", "snapshot"} <= kinds


def test_memory_store_serves_no_durable_family() -> None:
    body, _ = Metrics(MemoryStore(FakeClock(T0))).render_for("application/openmetrics-text", "")
    assert b"cubequeue_log_frames" not in body and b"cubequeue_recovery_" not in body
