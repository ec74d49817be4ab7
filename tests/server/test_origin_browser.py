"""Browsers kept out (server/browsers.py): a page on another origin cannot drive the queue
through ``/ws``, and a DNS-rebinding page cannot read the console.

Debian's Chromium, driven by Playwright as in tests/server/console/test_console_browser.py,
loads a page from another origin on this machine (a small HTTP server on another loopback
port: any local web app or dev server) whose script opens ``ws://127.0.0.1:<port>/ws`` and
sends Cube Store's ``CACHE SET`` message. The browser sends its ``Origin``: on the defaults
the upgrade is refused and nothing is stored; with that origin in
``--ws-allowed-origins`` it is served, which shows the browser itself lets the page
through. (This Chromium's local network access checks already stop a public origin's
page; other browsers and versions differ, so the server does not rely on them.)
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator

import psycopg
import pytest
from chromium import CHROMIUM, CHROMIUM_ARGS, skip_without_browser

from cubequeue.server.cubews.codec import encode_query
from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

WAIT_MS = 30_000

try:
    from playwright.sync_api import Browser, Playwright, sync_playwright
except ImportError:  # pragma: no cover - exercised where playwright is absent
    sync_playwright = None  # type: ignore[assignment]

skip_without_browser(sync_playwright is not None, "the browser tests")

#: the page's script: open /ws, send the message, say what came of it
PAGE = """<!doctype html><title>a page on another origin</title><script>
window.outcome = new Promise((resolve) => {
  const message = Uint8Array.from(atob(%(message)s), (c) => c.charCodeAt(0));
  const ws = new WebSocket(%(url)s);
  ws.binaryType = "arraybuffer";
  ws.onopen = () => ws.send(message);
  ws.onmessage = () => { resolve("answered"); ws.close(); };
  ws.onclose = (event) => resolve("closed " + event.code);
});
</script>"""


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()


class _Page(http.server.BaseHTTPRequestHandler):
    """Serves :data:`PAGE` for whatever the test put in ``server.page``."""

    def do_GET(self) -> None:
        body = self.server.page.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def other_origin() -> Iterator[http.server.ThreadingHTTPServer]:
    """A web server on another loopback port: the attacking page's origin."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _origin(httpd: http.server.ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def _page_sets_a_key(browser: Browser, httpd: http.server.ThreadingHTTPServer,
                     srv: CubequeueServer, key: str) -> str:
    message = encode_query(1, "browser", f"CACHE SET '{key}' 'from-a-page'")
    httpd.page = PAGE % {"message": json.dumps(base64.b64encode(message).decode()),  # type: ignore[attr-defined]
                         "url": json.dumps(srv.ws_url)}
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(_origin(httpd) + "/", timeout=WAIT_MS)
        outcome: str = page.evaluate("window.outcome")
        return outcome
    finally:
        context.close()


def _stored(srv: CubequeueServer, key: str) -> str | None:
    with psycopg.connect(srv.dsn, autocommit=True) as conn:
        row = conn.execute(f"CACHE GET '{key}'").fetchone()
    return None if row is None else row[0]


@pytest.mark.parametrize("args", [(), ("--auth", "scram-sha-256", "--password", "pw",
                                       "--ws-auth", "none")], ids=["defaults", "cube-setup"])
def test_a_page_on_another_origin_cannot_cache_set(
        browser: Browser, other_origin: http.server.ThreadingHTTPServer,
        args: tuple[str, ...]) -> None:
    srv = start_cubequeue(*args, test_clock=False)
    try:
        outcome = _page_sets_a_key(browser, other_origin, srv, "browser:k")
        assert outcome.startswith("closed"), outcome  # the upgrade never happened
        if not args:
            assert _stored(srv, "browser:k") is None
        log = srv.log()
        assert "refused a /ws upgrade" in log and _origin(other_origin) in log
    finally:
        srv.stop()


def test_an_allowed_origin_is_served(browser: Browser,
                                     other_origin: http.server.ThreadingHTTPServer) -> None:
    srv = start_cubequeue("--ws-allowed-origins", _origin(other_origin), test_clock=False)
    try:
        assert _page_sets_a_key(browser, other_origin, srv, "browser:ok") == "answered"
        assert _stored(srv, "browser:ok") == "from-a-page"
    finally:
        srv.stop()


def test_a_rebound_name_cannot_read_the_console(playwright: Playwright) -> None:
    """DNS rebinding: ``evil.example`` resolves to 127.0.0.1 (Chromium's host resolver
    rules stand in for the attacker's DNS), so its page is same-origin with the console
    it loads; the server answers only the names it is reached by."""
    srv = start_cubequeue(test_clock=False)
    try:
        rebinding = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            *CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        try:
            page = rebinding.new_page()
            for path in ("/", "/api/v1/overview", "/metrics"):
                response = page.goto(f"http://evil.example:{srv.http_port}{path}",
                                     timeout=WAIT_MS)
                assert response is not None and response.status == 403, path
                assert "--allowed-hosts" in (response.text() or "")
            response = page.goto(f"http://127.0.0.1:{srv.http_port}/api/v1/overview",
                                 timeout=WAIT_MS)
            assert response is not None and response.status == 200
        finally:
            rebinding.close()
    finally:
        srv.stop()
