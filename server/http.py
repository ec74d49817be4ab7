"""The HTTP port (``--http-port``, default 3030): Cube Store's ``/ws`` and the probes.

One ``websockets`` server routes every request in ``process_request``:

* ``GET /ws`` upgrades to Cube Store's WebSocket protocol (:mod:`.cubews.endpoint`).
  Before the upgrade, as Cube Store's ``http/mod.rs`` does: an ``x-process-id`` over 64
  characters is refused with 400 and a JSON ``{"error": …}``; with ``--ws-auth basic`` a
  missing or wrong Basic ``Authorization`` is refused with 403 ``{"error":"Not
  authorized"}`` (checked against the same users as the PostgreSQL side). The 101
  response carries ``X-CubeStore-Version: --cubestore-version`` so Cube's driver turns
  on the features that version implies. With ``--ws-allow``, a
  peer outside the listed networks is refused with 403 before anything else; an upgrade
  carrying an ``Origin`` (a browser's page) not in ``--ws-allowed-origins`` is refused
  with 403 next (:mod:`.browsers`).
* ``/healthz`` → 200; ``/readyz`` → 200 when a real store round trip (``SYS CACHESTORE
  HEALTHCHECK``, straight to the store, not metered) answers within
  :data:`READY_STORE_TIMEOUT_S`, else 503 naming why, so an orchestrator restarts a
  server whose store stopped answering; 503 too once shutdown has begun; ``/metrics``
  → Prometheus text.
* ``/``, ``/static/…`` and ``/api/v1/…`` → the read-only web console
  (:mod:`.console`), behind ``--console-auth``; with ``off`` they are 404 like any other
  path. The console's depth sampler starts and stops with this server.

The console and ``/metrics`` answer only a ``Host`` the server is reached by (the Host
rule of :mod:`.browsers`, against DNS rebinding); others get 403 naming
``--allowed-hosts``. Both refusals are logged (rate-limited) and counted in
``cubequeue_http_refusals_total``.

``--http-tls`` serves all of it over TLS (https, wss) with ``--tls-cert``/``--tls-key``.

Every answer but the upgrade closes its connection and says so (``Connection: close``);
a socket that has not sent its request, or been answered, within ``--startup-timeout``
is closed, as a silent PostgreSQL connection is.

Message sizes: the transport's limit is twice ``--max-message-size``, so a message
between the two still arrives whole and gets a readable HttpError naming its id; past
the backstop the socket closes with 1009 and Cube Store's reason text, which Cube's
client parses into ``MessageTooLargeError``. Compression is off,
as on Cube Store, so the size checked is the size sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import json
import logging
import secrets
import sys
from collections.abc import Awaitable
from http import HTTPStatus
from typing import TYPE_CHECKING

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import PayloadTooBig
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from cubequeue.grammar import prepare
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.results import ResultSet
from cubequeue.server.browsers import HostRule, OriginRule, RefusalLog
from cubequeue.server.console import Console, build_console
from cubequeue.server.cubews.endpoint import MAX_PROCESS_ID_LEN, WsEndpoint
from cubequeue.server.metrics import metrics_auth_mode, scrape_refusal
from cubequeue.server.stores import store_ready
from cubequeue.storage.interface import RowStream

if TYPE_CHECKING:
    from cubequeue.server.context import ServerContext

__all__ = [
    "READY_STORE_TIMEOUT_S",
    "HttpServer",
    "peer_allowed",
    "start_http_server",
    "store_round_trip",
    "too_large_reason",
]

#: the transport admits this many times the configured message size (Cube Store's
#: ``TRANSPORT_SIZE_HEADROOM``); between 1x and this, the endpoint answers an HttpError
TRANSPORT_SIZE_HEADROOM = 2
WS_PATH = "/ws"
_log = logging.getLogger("cubequeue.http")
#: how long ``/readyz`` waits for the store's round trip (probes time out at 1 s by
#: default in Kubernetes; a store slower than this is not ready to serve Cube)
READY_STORE_TIMEOUT_S = 2.0


async def store_round_trip(ctx: ServerContext, timeout_s: float = READY_STORE_TIMEOUT_S) -> str | None:
    """Why the store is not ready (it refused, failed or did not answer within
    ``timeout_s``), or None when ``SYS CACHESTORE HEALTHCHECK`` came back."""
    if not store_ready(ctx.store):
        return "store not ready"
    command = prepare("SYS CACHESTORE HEALTHCHECK").command
    try:
        async with asyncio.timeout(timeout_s):
            step = ctx.store.execute(command, None)
            if not isinstance(step, ResultSet | RowStream):  # an awaitable (StepResult)
                await step
    except TimeoutError:
        return f"store did not answer within {timeout_s:g} s"
    except QueueError as exc:
        return f"store not ready: {exc.message}"
    except Exception as exc:  # the store's outage (a lost database), whatever its type
        return f"store failed: {exc}"
    return None


def too_large_reason(size: int, limit: int) -> str:
    """Cube Store's 1009 close reason (``message_too_large_reason`` in ``http/mod.rs``)."""
    return f"Message of {size} bytes exceeds the maximum message size of {limit} bytes"


class _CubeConnection(ServerConnection):
    """A connection whose 1009 close names the configured limit, as Cube Store's does.

    websockets words the close reason itself (``frame with N bytes exceeds limit…``, and
    the transport limit is the doubled one); Cube's client parses Cube Store's sentence.
    The sans-I/O protocol calls ``fail(1009, …)`` while handling its PayloadTooBig, so
    the wrapper finds the sizes on the exception being handled.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]  # serve()'s own arguments
        protocol = self.protocol
        original = protocol.fail
        transport_limit = protocol.max_message_size

        def fail(code: CloseCode | int, reason: str = "") -> None:
            exc = sys.exc_info()[1]
            if (
                code == CloseCode.MESSAGE_TOO_BIG
                and isinstance(exc, PayloadTooBig)
                and exc.message is None
                and exc.size is not None
                and transport_limit is not None
            ):
                size = exc.size + (exc.current_size or 0)
                reason = too_large_reason(size, transport_limit // TRANSPORT_SIZE_HEADROOM)
            original(code, reason)

        protocol.fail = fail  # type: ignore[method-assign]  # per-connection hook, see above


class HttpServer:
    """What :func:`start_http_server` returns: ``close()`` and ``await wait_closed()``."""

    def __init__(self, server: Server, endpoint: WsEndpoint, console: Console) -> None:
        self.server = server
        self.endpoint = endpoint
        self.console = console

    @property
    def port(self) -> int:
        port: int = next(iter(self.server.sockets)).getsockname()[1]
        return port

    def close(self) -> None:
        self.endpoint.stop()
        self.console.sampler.stop()
        self.server.close(close_connections=True, code=CloseCode.GOING_AWAY,
                          reason="server shutting down")

    async def wait_closed(self) -> None:
        await self.server.wait_closed()


def _json(connection: ServerConnection, status: HTTPStatus, body: dict[str, str]) -> Response:
    response = connection.respond(status, json.dumps(body, separators=(",", ":")))
    response.headers["Content-Type"] = "application/json"
    return response


def _header(headers: Headers, name: str) -> str | None:
    """One header's value, None when absent; repeated ones joined with ``, `` (which
    no Origin or Host rule allows)."""
    values = headers.get_all(name)
    if not values:
        return None
    return values[0] if len(values) == 1 else ", ".join(values)


def _basic_user(header: str | None) -> tuple[str, str] | None:
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def peer_allowed(
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...], peer: str | None
) -> bool:
    """Whether ``peer`` is in one of ``networks`` (none given: every peer is). An
    IPv4-mapped IPv6 peer (``::ffff:10.0.0.1``) counts as its IPv4 address."""
    if not networks:
        return True
    if peer is None:
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in networks)


def _authorized(ctx: ServerContext, header: str | None) -> str | None:
    """The user name when the Basic credentials match, else None (fail closed)."""
    credentials = _basic_user(header)
    if credentials is None:
        return None
    user, password = credentials
    expected = ctx.password_for(user)
    if expected is None:
        return None
    if not secrets.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
        return None
    return user


async def start_http_server(ctx: ServerContext) -> HttpServer:
    endpoint = WsEndpoint(ctx)
    config = ctx.config
    console = build_console(ctx, lambda header: _authorized(ctx, header) is not None)
    ws_networks = tuple(ipaddress.ip_network(net) for net in (config.ws_allow or "").split(",")
                        if net)
    origins = OriginRule.of(config.ws_allowed_origins)
    hosts = HostRule.of(config.allowed_hosts, config.host)
    refusals = RefusalLog(_log)

    def peer_of(connection: ServerConnection) -> str:
        remote = connection.remote_address
        return str(remote[0]) if remote else "unknown"

    def refuse_origin(connection: ServerConnection, origin: str) -> Response:
        shown = origin[:200]
        ctx.metrics.http_refused("origin")
        refusals.refused("origin", f"refused a /ws upgrade from {peer_of(connection)}: "
                         f"Origin {shown!r} is not in --ws-allowed-origins (a web page "
                         "may not drive the queue)")
        return _json(connection, HTTPStatus.FORBIDDEN, {
            "error": f"Origin {shown!r} is not allowed on /ws (--ws-allowed-origins)"})

    def refuse_host(connection: ServerConnection, path: str, host: str | None) -> Response:
        shown = "no Host header" if host is None else f"Host {host[:200]!r}"
        ctx.metrics.http_refused("host")
        refusals.refused("host", f"refused {path[:200]} from {peer_of(connection)}: {shown} "
                         "is not a name this server is reached by (--allowed-hosts)")
        return connection.respond(
            HTTPStatus.FORBIDDEN,
            f"{shown} is not allowed: this server answers localhost, IP addresses, its "
            "--host name and the names in --allowed-hosts (protection against DNS "
            "rebinding)\n")

    def process_request(
        connection: ServerConnection, request: Request
    ) -> Response | Awaitable[Response] | None:
        path = request.path.split("?", 1)[0]
        if path == WS_PATH:
            remote = connection.remote_address
            if not peer_allowed(ws_networks, str(remote[0]) if remote else None):
                return _json(connection, HTTPStatus.FORBIDDEN,
                             {"error": "peer address not allowed (--ws-allow)"})
            process_id = request.headers.get("x-process-id")
            origin = _header(request.headers, "Origin")
            if not origins.allows(origin):
                return refuse_origin(connection, str(origin))
            if process_id is not None and len(process_id) > MAX_PROCESS_ID_LEN:
                return _json(connection, HTTPStatus.BAD_REQUEST, {
                    "error": "x-process-id header exceeds maximum allowed length of "
                             f"{MAX_PROCESS_ID_LEN} characters",
                })
            if config.ws_auth == "basic":
                user = _authorized(ctx, request.headers.get("Authorization"))
                if user is None:
                    return _json(connection, HTTPStatus.FORBIDDEN, {"error": "Not authorized"})
                connection.username = user
            if ctx.shutting_down:
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "shutting down\n")
            return None
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            ctx.readiness_watched = True
            if ctx.shutting_down:
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "shutting down\n")
            return readiness(connection)
        if path == "/metrics" or console.handles(path):
            host = _header(request.headers, "Host")
            if not hosts.allows(host):
                return refuse_host(connection, path, host)
        if path == "/metrics":
            remote = connection.remote_address
            refusal = scrape_refusal(
                metrics_auth_mode(config),
                remote[0] if remote else None,
                lambda: _authorized(ctx, request.headers.get("Authorization")) is not None,
            )
            if refusal is not None:
                status = HTTPStatus(refusal.status)
                return Response(status, status.phrase, Headers(list(refusal.headers)), refusal.body)
            return scrape(request.headers.get("Accept", ""),
                          request.headers.get("Accept-Encoding", ""))
        if console.handles(path):
            return console.respond(request)
        return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")

    async def scrape(accept: str, accept_encoding: str) -> Response:
        """The store's prefixes are read in slices across loop turns (Metrics.scrape)."""
        body, headers = await ctx.metrics.scrape(accept, accept_encoding)
        return Response(HTTPStatus.OK, "OK", Headers(headers), body)

    async def readiness(connection: ServerConnection) -> Response:
        reason = await store_round_trip(ctx)
        if reason is not None:
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, reason + "\n")
        return connection.respond(HTTPStatus.OK, "ready\n")

    def process_response(
        connection: ServerConnection, request: Request, response: Response
    ) -> Response | None:
        if response.status_code == HTTPStatus.SWITCHING_PROTOCOLS:
            response.headers["X-CubeStore-Version"] = config.cubestore_version
        elif "Connection" not in response.headers:
            # websockets answers one request per connection and closes it after any
            # answer but the upgrade: say so, or a client that keeps connections alive
            # (Node's fetch) sends its next request into a closed socket
            response.headers["Connection"] = "close"
        return None

    tls = None
    if config.http_tls and config.tls_cert:
        import ssl

        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(config.tls_cert, config.tls_key or None)
    server = await serve(
        endpoint.handle,
        config.host,
        config.http_port,
        process_request=process_request,
        process_response=process_response,
        server_header=None,
        compression=None,
        max_size=config.max_message_size * TRANSPORT_SIZE_HEADROOM,
        max_queue=64,
        create_connection=_CubeConnection,
        ssl=tls,
        # a socket that sends no request (or no TLS handshake) is closed on the schedule
        # of a silent PostgreSQL one; the request's answer must come within it too
        open_timeout=config.startup_timeout,
        # The library's own per-connection INFO lines would repeat the registry's one line
        # per connection (with an object repr); outside cubequeue.* it logs warnings only.
        logger=logging.getLogger("websockets.server"),
    )
    endpoint.start()
    if console.mode != "off":
        console.sampler.start()
    return HttpServer(server, endpoint, console)
