"""Log formats: one JSON object per line with the structured fields, or plain key=value."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from cubequeue.server.config import Config
from cubequeue.server.logs import setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    ours = logging.getLogger("cubequeue")
    saved = (list(root.handlers), root.level, ours.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.setLevel(saved[2])


def _run(config: Config) -> list[str]:
    stream = io.StringIO()
    setup_logging(config, stream=stream)
    log = logging.getLogger("cubequeue.conn")
    log.info("connection opened", extra={"conn_id": 7, "peer": "127.0.0.1:5555",
                                          "protocol": "pg"})
    log.debug("noise at debug")
    logging.getLogger("cubequeue.command").warning(
        "command failed", extra={"conn_id": 7, "sqlstate": "54000", "command": "QUEUE ADD",
                                 "ms": 1.5})
    logging.getLogger("websockets.server").info("third-party chatter")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("cubequeue.pg").exception("unexpected", extra={"conn_id": 8})
    return stream.getvalue().splitlines()


@pytest.mark.usefixtures("restore_logging")
def test_json_lines() -> None:
    lines = _run(Config(log_format="json"))
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(records) == 3
    opened, failed, crashed = records
    assert set(opened) == {"ts", "level", "logger", "msg", "conn_id", "peer", "protocol"}
    assert opened["level"] == "info"
    assert opened["logger"] == "cubequeue.conn"
    assert opened["msg"] == "connection opened"
    assert (opened["conn_id"], opened["peer"], opened["protocol"]) == (7, "127.0.0.1:5555", "pg")
    assert opened["ts"].endswith("Z") and "T" in opened["ts"]
    assert failed["sqlstate"] == "54000"
    assert failed["command"] == "QUEUE ADD"
    assert failed["ms"] == 1.5
    assert failed["level"] == "warning"
    assert crashed["level"] == "error"
    assert "RuntimeError: boom" in crashed["exc"]
    # a traceback stays inside its one JSON line
    assert all(line.startswith("{") for line in lines)


@pytest.mark.usefixtures("restore_logging")
def test_plain_lines() -> None:
    lines = _run(Config(log_format="plain"))
    assert lines[0].split(" ", 1)[1] == (
        "INFO cubequeue.conn connection opened conn_id=7 peer=127.0.0.1:5555 protocol=pg")
    assert lines[1].split(" ", 1)[1] == (
        'WARNING cubequeue.command command failed conn_id=7 command="QUEUE ADD" '
        "sqlstate=54000 ms=1.5")
    assert "third-party" not in "\n".join(lines)


@pytest.mark.usefixtures("restore_logging")
def test_debug_level_shows_ours_only() -> None:
    lines = _run(Config(log_level="debug", log_format="json"))
    msgs = [json.loads(line)["msg"] for line in lines]
    assert "noise at debug" in msgs
    assert "third-party chatter" not in msgs


@pytest.mark.usefixtures("restore_logging")
def test_error_level_hides_info_and_warning() -> None:
    lines = _run(Config(log_level="error", log_format="json"))
    assert [json.loads(line)["msg"] for line in lines] == ["unexpected"]


@pytest.mark.usefixtures("restore_logging")
def test_setup_twice_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging(Config(), stream=first)
    setup_logging(Config(log_format="json"), stream=second)
    logging.getLogger("cubequeue.x").info("once")
    assert first.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1
