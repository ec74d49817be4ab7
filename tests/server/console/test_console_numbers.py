"""The console API's numbers: any digit string gets a 400 naming its parameter, never 500.

``?limit=``, ``?top=``, ``?since=`` and ``?id=`` with 5,000 digits (past Python's 4,300
digit limit for ``int()``) or 34 digits answered HTTP 500; each is measured before it is
read (grammar.lexical.bounded_int) and range-checked, with SQLSTATE 22023 as the SQL side
would say.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cubequeue.server.pytest_plugin import CubequeueServer

BIG = "9" * 5000

#: (path, parameter, the most it takes, the least)
NUMBERS = [
    ("/api/v1/prefixes?limit={n}", "limit", 1000, 1),
    ("/api/v1/items?prefix=p&limit={n}", "limit", 1000, 1),
    ("/api/v1/item?id=1&limit={n}", "limit", 65536, 1),
    ("/api/v1/departures?limit={n}", "limit", 1000, 1),
    ("/api/v1/depth?top={n}", "top", 20, 1),
    ("/api/v1/depth?since={n}", "since", 2**62, 0),
    ("/api/v1/live?limit={n}", "limit", 1000, 1),
    ("/api/v1/live?top={n}", "top", 20, 1),
]


@pytest.fixture(scope="module")
def srv(launcher: Callable[..., CubequeueServer]) -> CubequeueServer:
    return launcher()


def _get(srv: CubequeueServer, path: str) -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection(srv.host, srv.http_port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body.startswith(b"{") else {}
    finally:
        conn.close()


@pytest.mark.parametrize(("path", "name", "most", "least"), NUMBERS)
@pytest.mark.parametrize("text", [BIG, "-" + BIG, "9" * 34, str(2**63), str(2**64), "-1",
                                  "0" * 5000 + "1" + "0" * 30])
def test_out_of_range_numbers_are_400_naming_the_parameter(
        srv: CubequeueServer, path: str, name: str, most: int, least: int, text: str) -> None:
    status, body = _get(srv, path.format(n=text))
    assert status == 400, body
    assert body["sqlstate"] == "22023"
    error = str(body["error"])
    assert error.startswith(f"{name} must be between {least} and {most}"), error
    assert len(error) < 200


@settings(deadline=None, max_examples=80,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, len(NUMBERS) - 1),
       value=st.one_of(st.integers(-(10**40), 10**40),
                       st.integers(21, 6000).map(lambda n: int("9" * min(n, 40)))))
def test_any_integer_is_served_or_named(srv: CubequeueServer, index: int, value: int) -> None:
    path, name, most, least = NUMBERS[index]
    status, body = _get(srv, path.format(n=value))
    if least <= value <= most:
        assert status in (200, 404), body  # 404: there is no item 1
    else:
        assert status == 400 and str(body["error"]).startswith(f"{name} must be between")


@pytest.mark.parametrize("text", [BIG, "9" * 34, str(2**64)])
def test_an_item_id_past_every_queue_id_is_400(srv: CubequeueServer, text: str) -> None:
    status, body = _get(srv, f"/api/v1/item?id={text}")
    assert status == 400 and body["sqlstate"] == "22023"
    assert str(body["error"]).startswith("id must be at most 18446744073709551615")


def test_the_largest_queue_id_is_looked_up(srv: CubequeueServer) -> None:
    status, body = _get(srv, f"/api/v1/item?id={2**64 - 1}")
    assert status == 404 and "no queue item" in str(body["error"])


@pytest.mark.parametrize("path", ["/api/v1/items?prefix=" + BIG,
                                  "/api/v1/departures?prefix=" + BIG,
                                  "/api/v1/live?prefix=" + BIG])
def test_a_digit_prefix_is_text(srv: CubequeueServer, path: str) -> None:
    assert _get(srv, path)[0] == 200


@pytest.mark.parametrize("text", ["--5", "+5", "5-", "1e3", "٣"])
def test_what_is_not_an_integer_says_so(srv: CubequeueServer, text: str) -> None:
    status, body = _get(srv, f"/api/v1/prefixes?limit={urllib.parse.quote(text, safe='')}")
    assert status == 400 and str(body["error"]).startswith("limit must be an integer")
