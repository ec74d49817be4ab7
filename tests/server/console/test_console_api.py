"""The console's JSON and its guards, against the real server over loopback HTTP."""

from __future__ import annotations

import base64
import http.client
import json
import urllib.parse

import pytest

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

XSS = "<img src=x onerror=alert(1)>"


def get(server: CubequeueServer, path: str, *, method: str = "GET",
        auth: tuple[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
    headers = {}
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get_json(server: CubequeueServer, path: str, **kw: object) -> dict:
    status, headers, body = get(server, path, **kw)  # type: ignore[arg-type]
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    return json.loads(body)


def q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def test_overview_prefixes_items_preview_departures(cubequeue_server) -> None:
    s = cubequeue_server
    s.query("QUEUE ADD PRIORITY 3 'orders:a' '{\"n\":1}'")
    s.query("QUEUE ADD PRIORITY 1 'orders:b' $$" + "x" * 5000 + "$$")
    s.query("QUEUE RETRIEVE CONCURRENCY 4 'orders:a'")
    s.query("QUEUE ADD 'mail:m1' '{}'")
    s.query("QUEUE RETRIEVE 'mail:m1'")
    s.query("QUEUE ACK 'mail:m1' '\"done\"'")
    s.query("CACHE SET 'c:k' 'value'")
    overview = get_json(s, "/api/v1/overview")
    assert overview["store"] == {"kind": "memory", "persistence": "memory"}
    assert overview["queue"] == {"items": 2, "prefixes": 2, "results": 1, "waiters": 0}
    assert overview["cache"]["keys"] == 1 and overview["cache"]["bytes"] > 0
    assert set(overview["connections"]) == {"pg", "ws"}
    assert overview["commands_total"] >= 7 and overview["resident_bytes"] > 1_000_000

    prefixes = get_json(s, "/api/v1/prefixes")["prefixes"]
    assert [p["prefix"] for p in prefixes] == ["orders", "mail"]
    assert prefixes[0]["pending"] == 1 and prefixes[0]["active"] == 1
    assert prefixes[0]["last_concurrency"] == 4 and prefixes[0]["stalled"] is False
    assert get_json(s, "/api/v1/prefixes?filter=MAI")["matched"] == 1

    items = get_json(s, "/api/v1/items?prefix=orders")
    assert [(i["key"], i["status"], i["priority"]) for i in items["items"]] == [
        ("a", "active", 3), ("b", "pending", 1)]
    big = items["items"][1]
    assert big["payload_bytes"] == 5000
    preview = get_json(s, f"/api/v1/item?id={big['id']}&limit=100")
    assert preview["payload"] == "x" * 100 and preview["payload_truncated"] is True

    departures = get_json(s, "/api/v1/departures?prefix=mail")["departures"]
    assert [(d["path"], d["reason"]) for d in departures] == [("mail:m1", "acked")]


def test_stalled_and_orphan_prone_after_the_clock_moves(cubequeue_server) -> None:
    s = cubequeue_server
    s.query("QUEUE ADD 'stuck:1' '{}'")
    s.query("QUEUE RETRIEVE 'stuck:1'")
    s.query("QUEUE ADD 'old:1' '{}'")
    s.advance(120_001)
    s.query("QUEUE ADD 'fresh:1' '{}'")
    by = {p["prefix"]: p for p in get_json(s, "/api/v1/prefixes")["prefixes"]}
    assert by["stuck"]["stalled"] and not by["stuck"]["orphan_prone"]
    assert by["old"]["orphan_prone"] and not by["old"]["stalled"]
    assert not (by["fresh"]["stalled"] or by["fresh"]["orphan_prone"])


def test_depth_series_and_live(cubequeue_server) -> None:
    s = cubequeue_server
    s.query("QUEUE ADD 'busy:1' '{}'")
    s.query("QUEUE ADD 'busy:2' '{}'")
    live = get_json(s, f"/api/v1/live?prefix={q('busy')}")
    assert live["prefixes"]["prefixes"][0]["prefix"] == "busy"
    assert live["items"]["total"] == 2 and live["departures"]["departures"] == []
    depth = live["depth"]
    assert depth["interval_ms"] == 1000
    assert set(depth) >= {"last_seq", "prefixes", "at_ms", "pending", "active"}
    for prefix in depth["prefixes"]:
        assert len(depth["pending"][prefix]) == len(depth["at_ms"])
    later = get_json(s, f"/api/v1/depth?since={depth['last_seq']}")
    assert later["last_seq"] >= depth["last_seq"]
    assert len(later["at_ms"]) == later["last_seq"] - depth["last_seq"]


def test_store_values_stay_json_strings(cubequeue_server) -> None:
    s = cubequeue_server
    s.query(f"QUEUE ADD 'q:{XSS}' '\"</script>\"'")
    status, headers, body = get(s, "/api/v1/items?prefix=q")
    assert status == 200 and headers["x-content-type-options"] == "nosniff"
    assert json.loads(body)["items"][0]["key"] == XSS
    status, headers, page = get(s, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in headers["content-security-policy"]
    assert b"console.js" in page


@pytest.mark.parametrize(("path", "needle"), [
    ("/api/v1/prefixes?limit=0", "limit must be between 1 and 1000"),
    ("/api/v1/prefixes?limit=5000", "limit must be between 1 and 1000"),
    ("/api/v1/items", "the parameter prefix is required"),
    ("/api/v1/items?prefix=q&limit=x", "limit must be an integer"),
    ("/api/v1/item?id=abc", "id must be a queue id"),
    ("/api/v1/depth?top=99", "top must be between 1 and 20"),
    ("/api/v1/item?id=1&limit=70000", "limit must be between 1 and 65536"),
])
def test_bad_parameters_are_400_naming_the_limit(cubequeue_server, path, needle) -> None:
    status, _, body = get(cubequeue_server, path)
    assert status == 400
    error = json.loads(body)
    assert needle in error["error"] and error["sqlstate"] == "22023"


def test_unknown_paths_missing_items_and_writes(cubequeue_server) -> None:
    s = cubequeue_server
    assert get(s, "/api/v1/nope")[0] == 404
    assert get(s, "/api/v1/item?id=99")[0] == 404
    assert get(s, "/static/nope.js")[0] == 404
    status, headers, _ = get(s, "/api/v1/overview", method="DELETE")
    assert status == 405 and headers["allow"] == "GET"
    assert get(s, "/static/uPlot.LICENSE")[2].startswith(b"The MIT License")


def _server(*args: str) -> CubequeueServer:
    return start_cubequeue(*args)


def test_basic_auth_by_default_when_the_wire_asks_for_passwords() -> None:
    s = _server("--ws-auth", "none", "--auth", "md5", "--password", "s3cret")
    try:
        for path in ("/", "/api/v1/overview"):
            status, headers, _ = get(s, path)
            assert status == 401
            assert headers["www-authenticate"].startswith('Basic realm="cubequeue console"')
            assert get(s, path, auth=("cube", "wrong"))[0] == 401
            assert get(s, path, auth=("cube", "s3cret"))[0] == 200
        assert get(s, "/healthz")[0] == 200  # the probes stay open
    finally:
        s.stop()


def test_console_auth_off_removes_console_and_json() -> None:
    s = _server("--console-auth", "off")
    try:
        assert get(s, "/")[0] == 404
        assert get(s, "/api/v1/overview")[0] == 404
        assert get(s, "/metrics")[0] == 200
    finally:
        s.stop()


def test_console_auth_none_opens_it_even_with_passwords() -> None:
    s = _server("--ws-auth", "none", "--auth", "scram-sha-256", "--password", "pw", "--console-auth", "none")
    try:
        assert get(s, "/api/v1/overview")[0] == 200
    finally:
        s.stop()
