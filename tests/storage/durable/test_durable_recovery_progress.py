"""Recovery progress: the reports recovery hands its callback, the once-a-second log line,
and the console (``/api/v1/overview``'s ``recovery``, the page's progress bar) while a
durable server replays its log.

The replay is slowed deterministically: an injected per-record hook stops the recovery
thread at a chosen record until the test has seen what it must see, then lets it go.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cubequeue.grammar import parse
from cubequeue.storage.clock import FakeClock
from cubequeue.storage.durable import opening
from cubequeue.storage.durable import recovery as recovery_module
from cubequeue.storage.durable.files import OsFiles
from cubequeue.storage.durable.progress import ProgressWatch, RecoveryProgress
from cubequeue.storage.durable.recovery import recover
from cubequeue.storage.limits import Limits
from cubequeue.storage.store import MemoryStore

ITEMS = 4000
PAYLOAD = "p" * 400
#: generous: a real wait on a shared machine
WAIT_S = 30.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _record_log(data_dir: Path) -> None:
    """ITEMS ADDs (about 2 MB of log) left in the log, with no snapshot after them."""

    async def run() -> None:
        durable, _ = await opening.open_store(
            MemoryStore(FakeClock(_now_ms())), data_dir=str(data_dir), fsync="no",
            wall_ms=_now_ms, on_fatal=print)
        for n in range(ITEMS):
            out = durable.execute(parse(f"QUEUE ADD PRIORITY 1 'q{n % 7}:{n}' '{PAYLOAD}'"))
            if asyncio.iscoroutine(out) or isinstance(out, asyncio.Future):
                await out
        await durable.log.close()
        assert durable.lock is not None
        durable.lock.release()

    asyncio.run(run())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("progress") / "data"
    _record_log(data_dir)
    return data_dir


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK"))
    return dst


def test_reports_grow_to_every_record_and_end_at_100_percent(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recovery_module, "REPORT_BYTES", 16 * 1024)
    data_dir = _copy(recorded, tmp_path / "data")
    reports: list[RecoveryProgress] = []
    seen: list[int] = []
    got = recover(OsFiles(), str(data_dir), "salvage", Limits(), _now_ms,
                  on_progress=reports.append, on_record=seen.append)
    assert len(got.image.items) == ITEMS
    assert len(reports) > 40, "a report every 16 KiB of a 2 MB log"
    assert [p.bytes_done for p in reports] == sorted(p.bytes_done for p in reports)
    assert [p.records for p in reports] == sorted(p.records for p in reports)
    last = reports[-1]
    assert last.bytes_done == last.bytes_total and last.percent == 100.0
    assert last.records >= ITEMS
    middle = reports[len(reports) // 2]
    assert 0 < middle.percent < 100 and middle.eta_s is not None and middle.eta_s >= 0
    assert seen == sorted(seen) and len(seen) >= ITEMS, "the hook sees every record, in order"
    # the zero-filled tail of the preallocated segment is not counted as work to do
    size = sum(p.stat().st_size for p in data_dir.glob("log-*"))
    assert last.bytes_total < size


class _Gate:
    """A per-record hook that stops the replay at record ``at`` until :meth:`open`."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.count = 0
        self.reached = threading.Event()
        self.released = threading.Event()

    def __call__(self, lsn: int) -> None:
        self.count += 1
        if self.count == self.at:
            self.reached.set()
            assert self.released.wait(WAIT_S), "the test never released the replay"

    def open(self) -> None:
        self.released.set()


class _Server:
    """The HTTP port and the store of a server built from argv, on a background loop, in
    the order the console needs: the HTTP listener first, then the store's recovery."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.port = 0
        self.ctx: Any = None
        self.opened = threading.Event()
        self.failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> _Server:
        self._thread.start()
        assert self._ready.wait(WAIT_S), "the HTTP listener did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(WAIT_S)

    def _run(self) -> None:
        from cubequeue.server.app import build_context
        from cubequeue.server.http import start_http_server
        from cubequeue.server.options import load_config
        from cubequeue.server.stores import close_store, open_store

        async def main() -> None:
            config = dataclasses.replace(load_config(self.argv, {}), http_port=0)
            self.ctx = build_context(config)
            http = await start_http_server(self.ctx)
            self.port = http.port
            self._loop = asyncio.get_running_loop()
            self._done = asyncio.Event()
            self._ready.set()
            try:
                await open_store(self.ctx.store)
            except BaseException as err:
                self.failure = err
            self.opened.set()
            await self._done.wait()
            await close_store(self.ctx.store)
            http.close()
            await http.wait_closed()

        asyncio.run(main())

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                body = r.read()
                status = r.status
        except urllib.error.HTTPError as err:
            body, status = err.read(), err.code
        if body[:1] in (b"{", b"["):
            return status, json.loads(body)
        return status, body.decode()


def _until(what: Callable[[], bool], message: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.02)


@pytest.fixture
def gated(recorded: Path, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Server, _Gate]]:
    """A durable server whose replay stops at record ITEMS // 2."""
    data_dir = _copy(recorded, tmp_path / "data")
    gate = _Gate(ITEMS // 2)
    real = opening.open_store

    async def open_store_gated(*args: Any, **kwargs: Any) -> Any:
        return await real(*args, on_record=gate, **kwargs)

    monkeypatch.setattr(opening, "open_store", open_store_gated)
    server = _Server(["--host", "127.0.0.1", "--data-dir", str(data_dir), "--console-auth",
                      "none"])
    try:
        with server:
            assert gate.reached.wait(WAIT_S), "recovery never reached the gate"
            yield server, gate
            gate.open()
    finally:
        gate.open()


def test_console_shows_the_recovery_while_it_runs(
    gated: tuple[_Server, _Gate], caplog: pytest.LogCaptureFixture
) -> None:
    server, gate = gated
    caplog.set_level(logging.INFO, logger="cubequeue.durable")
    status, overview = server.get("/api/v1/overview")
    assert status == 200
    progress = overview["recovery"]
    assert progress["recovering"] is True and progress["phase"] == "log"
    # the last report came within REPORT_BYTES (64 KiB, ~140 records) before the gate
    assert ITEMS // 2 - 200 <= progress["records"] <= ITEMS // 2
    assert 0 < progress["percent"] < 100
    assert progress["bytes_done"] < progress["bytes_total"]
    assert progress["eta_s"] is None or progress["eta_s"] >= 0
    status, live = server.get("/api/v1/live")
    assert status == 200 and set(live) == {"overview"}
    status, refused = server.get("/api/v1/prefixes")
    assert status == 503 and refused["sqlstate"] == "57P03"
    status, page = server.get("/")
    assert status == 200 and 'id="recovery-bar"' in page
    # the log line comes once a second while the replay is stopped at the gate
    _until(lambda: any("recovering (log)" in r.getMessage() for r in caplog.records),
           "no progress line in the log")
    line = next(r.getMessage() for r in caplog.records if "recovering (log)" in r.getMessage())
    assert "records replayed" in line and "%" in line and "left" in line
    gate.open()
    assert server.opened.wait(WAIT_S) and server.failure is None
    status, overview = server.get("/api/v1/overview")
    done = overview["recovery"]
    assert done["recovering"] is False and done["phase"] == "done"
    assert done["percent"] == 100 and done["records"] >= ITEMS
    assert overview["queue"]["items"] == ITEMS
    status, live = server.get("/api/v1/live")
    assert status == 200 and "prefixes" in live


def test_memory_store_has_no_recovery(tmp_path: Path) -> None:
    with _Server(["--host", "127.0.0.1", "--console-auth", "none"]) as server:
        assert server.opened.wait(WAIT_S)
        status, overview = server.get("/api/v1/overview")
        assert status == 200 and overview["recovery"] is None


def test_readyz_is_503_while_recovering(gated: tuple[_Server, _Gate]) -> None:
    server, _ = gated
    status, _body = server.get("/readyz")
    assert status == 503


def test_progress_watch_keeps_the_latest() -> None:
    watch = ProgressWatch()
    assert not watch.recovering and watch.latest is None
    watch.update(RecoveryProgress("log", 10, 50, 100, 2.0))
    assert watch.recovering and watch.latest is not None
    assert watch.latest.percent == 50.0 and watch.latest.eta_s == 2.0
    watch.update(RecoveryProgress("done", 20, 100, 100, 4.0))
    assert not watch.recovering and watch.latest.eta_s == 0.0
