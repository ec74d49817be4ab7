"""The console in a real browser: Debian's Chromium driven by Playwright for Python.

Playwright's own browser download cannot work here, so the system browser is launched
(``executable_path``). Screenshots of the overview and of a prefix page land in
``build/``; ``docs/console-*.png`` are copies of them. Without Chromium or Playwright the
tests skip, except under CI, where ``make test`` installs both and a skip would hide a
failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium import CHROMIUM, CHROMIUM_ARGS, skip_without_browser

from cubequeue.server.pytest_plugin import CubequeueServer, start_cubequeue

BUILD = Path(__file__).resolve().parents[3] / "build"
#: real waits (the sampler ticks once a second): generous, never asserted as timings
WAIT_MS = 30_000
XSS_KEY = "<img src=x onerror=alert(1)>"
XSS_PREFIX = "<img src=x onerror=alert(2)>"

try:
    from playwright.sync_api import Browser, Dialog, Page, sync_playwright
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # pragma: no cover - exercised where playwright is absent
    sync_playwright = None  # type: ignore[assignment]

skip_without_browser(sync_playwright is not None, "the console's browser tests")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def workload(s: CubequeueServer) -> None:
    """A small deployment: a stuck worker, an old pending item, busy and finished prefixes."""
    s.query("QUEUE ADD PRIORITY 1 'stuck:job-1' '{\"sql\":\"SELECT 1\"}'")
    s.query("QUEUE RETRIEVE CONCURRENCY 2 'stuck:job-1'")
    s.query("QUEUE ADD 'old:job-1' '{}'")
    s.advance(120_001)  # past Cube's heartbeat and orphaned timeouts
    for i in range(12):
        s.query(f"QUEUE ADD PRIORITY {i % 4} 'orders:q{i}' "
                f"'{{\"sql\":\"SELECT * FROM orders WHERE shard = {i}\"}}'")
    s.query("QUEUE RETRIEVE CONCURRENCY 3 'orders:q0'")
    s.query("QUEUE RETRIEVE CONCURRENCY 3 'orders:q1'")
    s.query("QUEUE MERGE_EXTRA 'orders:q0' '{\"startQueryTime\":1}'")
    s.query("QUEUE ADD 'orders:done' '{}'")
    s.query("QUEUE RETRIEVE CONCURRENCY 3 'orders:done'")
    s.query("QUEUE ACK 'orders:done' '{\"rows\":[]}'")
    s.query("QUEUE ADD 'orders:dropped' '{}'")
    s.query("QUEUE CANCEL 'orders:dropped'")
    for i in range(5):
        s.query(f"QUEUE ADD 'reports:r{i}' '{{}}'")
    s.query(f"QUEUE ADD 'q:{XSS_KEY}' '\"<script>alert(3)</script>\"'")
    s.query(f"QUEUE ADD '{XSS_PREFIX}:k' '{{}}'")
    s.query("CACHE SET 'c:lock' '1'")


def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    # CSP off in the page under test, so the escaping itself is what keeps the markup inert.
    context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(url)
    return page, dialogs


def points(page: Page) -> int:
    return int(page.get_attribute("#depth-chart", "data-points") or 0)


@pytest.fixture
def server() -> Iterator[CubequeueServer]:
    s = start_cubequeue()
    try:
        workload(s)
        yield s
    finally:
        s.stop()


def test_overview_chart_live_updates_and_drill_down(browser: Browser,
                                                    server: CubequeueServer) -> None:
    page, dialogs = open_page(browser, server.http_url + "/")
    page.wait_for_selector("tr[data-prefix='orders']", timeout=WAIT_MS)
    page.evaluate("window.__sameDocument = true")

    rows = page.locator("#prefix-rows tr")
    names = [rows.nth(i).get_attribute("data-prefix") for i in range(rows.count())]
    assert names[0] == "orders"  # deepest first
    assert {"orders", "reports", "stuck", "old", "q", XSS_PREFIX} <= set(names)
    assert "stalled" in (page.get_attribute("tr[data-prefix='stuck']", "class") or "")
    assert "orphan-prone" in (page.get_attribute("tr[data-prefix='old']", "class") or "")
    assert not page.get_attribute("tr[data-prefix='reports']", "class")
    cards = page.locator("#overview .card")
    assert cards.count() >= 10
    assert page.locator(".card[data-label='items'] .value").text_content() == "21"

    # The chart: uPlot's canvas, then more points without a reload.
    page.wait_for_selector("#depth-chart .uplot canvas", timeout=WAIT_MS)
    first = points(page)
    page.wait_for_function(f"() => Number(document.getElementById('depth-chart')"
                           f".dataset.points) >= {first + 2}", timeout=WAIT_MS)
    assert (page.locator("#depth-chart .u-legend").text_content() or "").count("pending") >= 3

    # Live rows: a prefix added now shows up by itself.
    server.query("QUEUE ADD 'arrived:late' '{}'")
    page.wait_for_selector("tr[data-prefix='arrived']", timeout=WAIT_MS)
    page.fill("#filter", "rep")
    page.wait_for_function("() => document.querySelectorAll('#prefix-rows tr').length === 1 && "
                           "document.querySelector('#prefix-rows tr').dataset.prefix === "
                           "'reports'", timeout=WAIT_MS)
    page.fill("#filter", "")
    page.wait_for_selector("tr[data-prefix='orders']", timeout=WAIT_MS)
    assert page.evaluate("window.__sameDocument") is True
    BUILD.mkdir(exist_ok=True)
    page.screenshot(path=str(BUILD / "console-overview.png"), full_page=True)

    # Drill-down: items, a payload preview, departures with their reasons.
    page.click("tr[data-prefix='orders'] button")
    page.wait_for_selector("#drill:not([hidden]) #item-rows tr[data-id]", timeout=WAIT_MS)
    assert page.locator("#item-rows tr[data-id]").count() == 12
    assert page.locator("#drill-prefix").text_content() == "orders"
    first_item = page.locator("#item-rows tr[data-id]").first
    assert "active" in (first_item.text_content() or "")
    first_item.locator("button").click()
    page.wait_for_selector("#preview:not([hidden])", timeout=WAIT_MS)
    page.wait_for_function("() => document.getElementById('preview-payload').textContent"
                           ".includes('shard = 0')", timeout=WAIT_MS)
    assert "startQueryTime" in (page.locator("#preview-extra").text_content() or "")
    page.wait_for_function("() => document.getElementById('departure-rows').textContent"
                           ".includes('acked')", timeout=WAIT_MS)
    departures = page.locator("#departure-rows").text_content() or ""
    assert "orders:done" in departures and "cancelled" in departures
    page.screenshot(path=str(BUILD / "console-prefix.png"), full_page=True)
    assert page.evaluate("window.__sameDocument") is True
    assert dialogs == []


def test_markup_in_store_values_renders_as_text(browser: Browser,
                                                server: CubequeueServer) -> None:
    page, dialogs = open_page(browser, server.http_url + "/")
    page.wait_for_selector("tr[data-prefix='q']", timeout=WAIT_MS)
    cell = page.locator(f"tr[data-prefix={XSS_PREFIX!r}] button")
    assert cell.text_content() == XSS_PREFIX
    page.click("tr[data-prefix='q'] button")
    page.wait_for_selector("#item-rows tr[data-id]", timeout=WAIT_MS)
    assert page.locator("#item-rows tr[data-id] td.mono").first.text_content() == XSS_KEY
    page.locator("#item-rows tr[data-id] button").first.click()
    page.wait_for_function("() => document.getElementById('preview-payload').textContent"
                           ".includes('<script>')", timeout=WAIT_MS)
    assert page.locator("img").count() == 0
    assert page.locator("#preview script").count() == 0
    assert dialogs == []


def test_basic_auth_prompt_then_the_page(browser: Browser) -> None:
    s = start_cubequeue("--ws-auth", "none", "--auth", "scram-sha-256", "--password", "s3cret")
    try:
        # Headless Chromium cannot show the prompt (the navigation fails with
        # ERR_INVALID_AUTH_CREDENTIALS), so the browser's own HTTP stack shows the 401 and
        # the challenge that makes a headed browser ask.
        context = browser.new_context()
        page = context.new_page()
        for path in ("/", "/api/v1/overview"):
            answer = page.request.get(s.http_url + path)
            assert answer.status == 401
            assert answer.headers["www-authenticate"] == \
                'Basic realm="cubequeue console", charset="UTF-8"'
        with pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
            page.goto(s.http_url + "/")
        context.close()
        context = browser.new_context(http_credentials={"username": "cube",
                                                        "password": "s3cret"})
        page = context.new_page()
        response = page.goto(s.http_url + "/")
        assert response is not None and response.status == 200
        page.wait_for_selector(".card[data-label='store']", timeout=WAIT_MS)
        assert page.locator(".card[data-label='store'] .value").text_content() == "memory"
        context.close()
    finally:
        s.stop()


def test_screenshots_are_committed_copies() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs"
    for name in ("console-overview.png", "console-prefix.png"):
        assert (docs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_claim_order_preview_at_the_row_chart_follows_the_filter_and_stale_page(
        browser: Browser) -> None:
    """Issue 27's console: items in the order they will be claimed, the preview opened
    under its row and pretty-printed, the chart narrowed by the filter and the opened
    prefix (emptied prefixes gone from it), and a page that says it is stale (and dims)
    when the server stops answering."""
    s = start_cubequeue()
    try:
        s.query("QUEUE ADD PRIORITY 1 'jobs:low' '{\"sql\":\"SELECT 1\",\"n\":1}'")
        s.query("QUEUE ADD PRIORITY 9 'jobs:high' '{\"sql\":\"SELECT 9\",\"n\":9}'")
        s.query("QUEUE ADD PRIORITY 5 'jobs:mid' '{}'")
        s.query("QUEUE ADD 'gone:one' '{}'")
        s.query("QUEUE ADD 'reports:r1' '{}'")
        page, dialogs = open_page(browser, s.http_url + "/")
        page.wait_for_selector("tr[data-prefix='gone']", timeout=WAIT_MS)
        s.query("QUEUE CANCEL 'gone:one'")  # emptied: it leaves the chart's legend
        page.wait_for_function("() => !document.querySelector(\"tr[data-prefix='gone']\")",
                               timeout=WAIT_MS)
        page.wait_for_function("() => { const l = document.querySelector('#depth-chart "
                               ".u-legend'); return l && l.textContent.includes('jobs') && "
                               "!l.textContent.includes('gone'); }", timeout=WAIT_MS)
        page.fill("#filter", "rep")
        page.wait_for_function("() => { const l = document.querySelector('#depth-chart "
                               ".u-legend'); return l && l.textContent.includes('reports') && "
                               "!l.textContent.includes('jobs'); }", timeout=WAIT_MS)
        page.fill("#filter", "")
        page.click("tr[data-prefix='jobs'] button")
        page.wait_for_selector("#item-rows tr[data-id]", timeout=WAIT_MS)
        page.wait_for_function("() => { const l = document.querySelector('#depth-chart "
                               ".u-legend'); return l && l.textContent.includes('jobs') && "
                               "!l.textContent.includes('reports'); }", timeout=WAIT_MS)
        keys = page.locator("#item-rows tr[data-id] td.mono.wrap").all_text_contents()
        assert keys == ["high", "mid", "low"]  # priority order, not id order
        page.locator("#item-rows tr[data-id]").nth(1).locator("button").click()
        page.locator("#item-rows tr[data-id]").nth(0).locator("button").click()
        page.wait_for_function("() => document.getElementById('preview-payload').textContent"
                               ".includes('SELECT 9')", timeout=WAIT_MS)
        # the preview is the row right under the item it shows, and the JSON is indented
        assert page.evaluate("() => document.getElementById('preview-row')"
                             ".previousElementSibling.dataset.id") == \
            page.locator("#item-rows tr[data-id]").nth(0).get_attribute("data-id")
        assert page.locator("#preview-payload").text_content() == \
            '{\n  "sql": "SELECT 9",\n  "n": 9\n}'
        assert page.evaluate("() => document.body.classList.contains('stale')") is False
        assert page.locator("#stale").is_hidden()
        s.stop()
        page.wait_for_selector("#stale:not([hidden])", timeout=WAIT_MS)
        assert page.evaluate("() => document.body.classList.contains('stale')") is True
        assert "last updated" in (page.locator("#stale").text_content() or "")
        opacity = page.evaluate("() => getComputedStyle(document.getElementById('overview'))"
                                ".opacity")
        assert float(opacity) < 1
        assert dialogs == []
    finally:
        s.stop()
