"""The console's HTTP routes: the page at ``/``, its assets, and the JSON under ``/api/v1``.

Every route is a read: GET only (anything else is 405), no route changes the store. The
JSON carries store values as JSON strings and the page writes them with ``textContent``;
the page's Content-Security-Policy allows only its own scripts, so a path such as
``q:<img src=x onerror=alert(1)>`` is text twice over. Bad parameters get a 400 whose
JSON names the parameter and its limit, with SQLSTATE 22023 as the SQL side would.

The API (documented in the README):

* ``/api/v1/overview``: store kind and persistence, uptime, queue and cache totals,
  connections per wire, commands per second, resident memory.
* ``/api/v1/prefixes?filter=&limit=``: the deepest prefixes, stalled / orphan-prone flags.
* ``/api/v1/items?prefix=&limit=``: one prefix's items; ``/api/v1/item?id=&limit=``: one
  item's payload and extra, truncated.
* ``/api/v1/departures?prefix=&limit=``: recent rows of ``system.queue_log``.
* ``/api/v1/depth?top=&since=``: pending and active of the busiest prefixes, per second.
* ``/api/v1/live``: what the page polls once a second, the above in one answer.

While a durable store recovers, the overview's ``recovery`` says how far (phase, records
replayed, bytes, percent, seconds left), ``/api/v1/live`` carries only the overview, and
the routes that read the store answer 503 with SQLSTATE 57P03, as the wires do. Once
recovered, ``recovery`` keeps the last run's figures (``null`` without a data directory).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from cubequeue.grammar.lexical import INT_RANGES, bounded_int, shown
from cubequeue.server.console.assets import Asset, load_assets
from cubequeue.server.console.auth import CHALLENGE, ConsoleAuth
from cubequeue.server.console.counters import read_counters
from cubequeue.server.console.process import resident_bytes
from cubequeue.server.console.ring import DepthRing, DepthSeries
from cubequeue.server.console.sampler import SAMPLE_INTERVAL_S, Sampler
from cubequeue.server.console.source import StoreReader
from cubequeue.server.console.views import (
    Json,
    departures_view,
    item_preview,
    items_view,
    prefixes_view,
)
from cubequeue.storage.durable.errors import StartingUp
from cubequeue.storage.durable.progress import ProgressWatch

__all__ = ["API_PREFIX", "Console", "Limits"]

API_PREFIX = "/api/v1/"

#: (default, most) per parameter: each bound answers with an error that names it
PREFIXES_LIMIT = (50, 1000)
ITEMS_LIMIT = (200, 1000)
DEPARTURES_LIMIT = (50, 1000)
PREVIEW_CHARS = (4096, 65536)
DEPTH_TOP = (8, 20)
#: the largest queue id (the dialect's ``id`` range)
MAX_QUEUE_ID = INT_RANGES["id"][1]
_INTEGER = re.compile(r"-?[0-9]+")

_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_COMMON = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)

Limits = tuple[int, int]
_Handler = Callable[["_Params"], Coroutine[Any, Any, Json]]


class BadRequest(Exception):
    """A parameter the API cannot use; the message names it."""


class NotFound(Exception):
    pass


class _Params:
    def __init__(self, query: str) -> None:
        self._values = parse_qs(query, keep_blank_values=True)

    @classmethod
    def of(cls, **values: str) -> _Params:
        params = cls("")
        params._values = {name: [value] for name, value in values.items()}
        return params

    def text(self, name: str, default: str | None = None) -> str | None:
        values = self._values.get(name)
        return values[-1] if values else default

    def required(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise BadRequest(f"the parameter {name} is required")
        return value

    def number(self, name: str, bounds: Limits, lo: int = 1) -> int:
        default, most = bounds
        raw = self.text(name)
        if raw is None or raw == "":
            return default
        text = raw.strip()
        if _INTEGER.fullmatch(text) is None:
            raise BadRequest(f"{name} must be an integer, actual: {raw[:40]!r}")
        value = bounded_int(text)  # never int() of thousands of digits
        if value < lo or value > most:
            raise BadRequest(f"{name} must be between {lo} and {most}, actual: {shown(text)}")
        return value


def _response(status: HTTPStatus, body: bytes, content_type: str,
              extra: tuple[tuple[str, str], ...] = ()) -> Response:
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                       ("Cache-Control", "no-store"), *_COMMON, *extra])
    return Response(status.value, status.phrase, headers, body)


def _json(status: HTTPStatus, body: Json,
          extra: tuple[tuple[str, str], ...] = ()) -> Response:
    data = json.dumps(body, separators=(",", ":")).encode("ascii")
    return _response(status, data, "application/json", extra)


def _error(status: HTTPStatus, message: str, sqlstate: str | None = None) -> Response:
    body: Json = {"error": message}
    if sqlstate is not None:
        body["sqlstate"] = sqlstate
    return _json(status, body)


def _series_json(series: DepthSeries) -> Json:
    return {
        "last_seq": series.last_seq,
        "prefixes": list(series.prefixes),
        "at_ms": series.at_ms,
        "pending": series.pending,
        "active": series.active,
        "interval_ms": int(SAMPLE_INTERVAL_S * 1000),
    }


class Console:
    """Routes for one server; :meth:`respond` answers any path that :meth:`handles`."""

    def __init__(
        self,
        *,
        reader: StoreReader,
        sampler: Sampler,
        registry: CollectorRegistry,
        mode: ConsoleAuth,
        authorize: Callable[[str | None], bool],
        started_at: float,
        version: str,
        recovery: ProgressWatch | None = None,
    ) -> None:
        self.reader = reader
        self.sampler = sampler
        self.ring: DepthRing = sampler.ring
        self.mode = mode
        self._registry = registry
        self._authorize = authorize
        self._started_at = started_at
        self._version = version
        self._recovery = recovery
        self._assets: dict[str, Asset] = load_assets() if mode != "off" else {}
        self._api: dict[str, _Handler] = {
            "overview": self._overview,
            "prefixes": self._prefixes,
            "items": self._items,
            "item": self._item,
            "departures": self._departures,
            "depth": self._depth,
            "live": self._live,
        }

    def handles(self, path: str) -> bool:
        if self.mode == "off":
            return False
        return path in self._assets or path.startswith(API_PREFIX)

    def respond(self, request: Request) -> Response | Awaitable[Response]:
        split = urlsplit(request.path)
        if request.method != "GET":
            return _response(HTTPStatus.METHOD_NOT_ALLOWED, b"the console is read-only\n",
                             "text/plain; charset=utf-8", (("Allow", "GET"),))
        if self.mode == "basic" and not self._authorize(request.headers.get("Authorization")):
            return _response(HTTPStatus.UNAUTHORIZED, b"authentication required\n",
                             "text/plain; charset=utf-8", (("WWW-Authenticate", CHALLENGE),))
        asset = self._assets.get(split.path)
        if asset is not None:
            extra = (("Content-Security-Policy", _CSP),) if split.path == "/" else ()
            return _response(HTTPStatus.OK, asset.body, asset.content_type, extra)
        handler = self._api.get(split.path[len(API_PREFIX):])
        if handler is None:
            return _error(HTTPStatus.NOT_FOUND, f"no such API path: {split.path[:200]}")
        return self._run(handler, _Params(split.query))

    async def _run(self, handler: _Handler, params: _Params) -> Response:
        try:
            body = await handler(params)
        except BadRequest as err:
            return _error(HTTPStatus.BAD_REQUEST, str(err), "22023")
        except NotFound as err:
            return _error(HTTPStatus.NOT_FOUND, str(err))
        except StartingUp as err:  # the store is recovering: as the wires say, 57P03
            return _error(HTTPStatus.SERVICE_UNAVAILABLE, str(err), "57P03")
        return _json(HTTPStatus.OK, body)

    def _recovering(self) -> bool:
        return self._recovery is not None and self._recovery.recovering

    def _recovery_json(self) -> Json | None:
        latest = self._recovery.latest if self._recovery is not None else None
        if latest is None:
            return None
        return {"recovering": latest.phase != "done", **latest.as_json()}

    # -- the API ------------------------------------------------------------------------

    async def _overview(self, params: _Params) -> Json:
        stats = await self.reader.stats()
        counters = read_counters(self._registry)
        kind = self.reader.kind
        return {
            "version": self._version,
            "store": {"kind": kind, "persistence": "memory" if kind == "memory" else kind},
            "uptime_s": round(time.time() - self._started_at, 3),
            "now_ms": self.reader.now_ms(),
            "queue": {"items": stats.items_total, "prefixes": len(stats.prefixes),
                      "results": stats.results_total, "waiters": stats.waiters},
            "cache": {"keys": stats.cache_keys, "bytes": stats.cache_bytes,
                      "evictions": stats.evictions_total},
            "connections": counters.connections,
            "commands_total": counters.commands_total,
            "commands_per_second": self.sampler.rate.per_second,
            "resident_bytes": resident_bytes(),
            "sampler": {"interval_ms": int(SAMPLE_INTERVAL_S * 1000), "samples": len(self.ring)},
            "recovery": self._recovery_json(),
        }

    async def _prefixes(self, params: _Params) -> Json:
        table = await self.reader.table("queue_prefixes")
        return prefixes_view(table.columns, table.rows, filter_text=params.text("filter") or "",
                             limit=params.number("limit", PREFIXES_LIMIT))

    async def _items(self, params: _Params) -> Json:
        prefix = params.required("prefix")
        limit = params.number("limit", ITEMS_LIMIT)
        table = await self.reader.table("queue")
        return items_view(table.columns, table.rows, prefix=prefix,
                          now_ms=self.reader.now_ms(), limit=limit)

    async def _item(self, params: _Params) -> Json:
        raw = params.required("id")
        if not raw.isascii() or not raw.isdigit():
            raise BadRequest(f"id must be a queue id (digits), actual: {raw[:40]!r}")
        queue_id = bounded_int(raw)
        if queue_id > MAX_QUEUE_ID:
            raise BadRequest(f"id must be at most {MAX_QUEUE_ID}, actual: {shown(raw)}")
        limit = params.number("limit", PREVIEW_CHARS)
        table = await self.reader.table("queue")
        preview = item_preview(table.columns, table.rows, queue_id=queue_id, limit=limit)
        if preview is None:
            raise NotFound(f"no queue item with id {queue_id}")
        return preview

    async def _departures(self, params: _Params) -> Json:
        prefix = params.text("prefix")
        limit = params.number("limit", DEPARTURES_LIMIT)
        table = await self.reader.table("queue_log")
        return departures_view(table.columns, table.rows, prefix=prefix,
                               now_ms=self.reader.now_ms(), limit=limit)

    async def _depth(self, params: _Params) -> Json:
        """The busiest prefixes' depth; the page's filter (a case-insensitive substring, as
        for the prefix table) narrows them, and an opened prefix is drawn alone."""
        top = params.number("top", DEPTH_TOP)
        since = params.number("since", (0, 2**62), lo=0)
        prefix = params.text("prefix")
        if prefix is not None:
            return _series_json(self.ring.series(top, since, prefixes=(prefix,)))
        needle = (params.text("filter") or "").casefold()
        match = (lambda name: needle in name.casefold()) if needle else None
        return _series_json(self.ring.series(top, since, match=match))

    async def _live(self, params: _Params) -> Json:
        if self._recovering():  # nothing else can be read yet
            return {"overview": await self._overview(params)}
        body: Json = {
            "overview": await self._overview(params),
            "prefixes": await self._prefixes(params),
            "depth": await self._depth(params),
        }
        prefix = params.text("prefix")
        if prefix is not None:  # the drill-down: its own default limits, not the table's
            own = _Params.of(prefix=prefix)
            body["items"] = await self._items(own)
            body["departures"] = await self._departures(own)
        return body
