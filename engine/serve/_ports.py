"""E2B's sandbox URLs: ``Sandbox.get_host(port)`` names ``PORT-SANDBOXID.DOMAIN``, and an HTTP
request to the server whose Host says so reaches what listens on that port inside the sandbox
(a web app, a notebook, an API the sandbox serves). Point ``*.DOMAIN`` at the server (``E2B_DOMAIN``
on the client), or send the Host header yourself.

The sandbox still has no network: each request is carried by a relay the server runs in the
sandbox as its user (``Sandbox.connect_port``), as one HTTP/1.1 exchange with ``Connection:
close``; a WebSocket is opened again on the sandbox's side (wsproto) and its messages pass on as
they come, both ways, until either side closes. As in E2B, a sandbox's URLs are open to whoever
knows its id unless it was created with ``network.allowPublicTraffic`` false: then a request needs
the sandbox's traffic access token in ``e2b-traffic-access-token``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import h11
import wsproto
import wsproto.events as ws
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from .._errors import SandboxError, SandboxNotFound
from ..sandboxes._sandbox import PortRefused, PortStream, Sandbox
from ._admission import Dialect
from ._control import error
from ._state import PRIVATE_TRAFFIC, state_of

__all__ = ["SANDBOX_PORTS", "SandboxPorts"]

HOST = re.compile(r"(?P<port>[0-9]{1,5})-(?P<sandbox>[0-9a-f]{20})(?:[.:]|$)")
TRAFFIC_TOKEN = "e2b-traffic-access-token"  # noqa: S105 - a header's name
# Each connection's own (RFC 9110, 7.6.1), and what the server sets itself.
NOT_PASSED_ON = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
        TRAFFIC_TOKEN.encode(),
    }
)


# Unguarded: a sandbox's URLs answer whoever knows them, or its traffic token (see above).
SANDBOX_PORTS = Dialect("ports", (), (), guarded=False, hosts=HOST)


class SandboxPorts:
    """Answers the requests whose Host names a sandbox's port; passes every other one on. Inside
    ``Admission``, which counts them and bounds their bodies as ``SANDBOX_PORTS``'."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        named = HOST.match(Headers(scope=scope).get("host", "")) if scope["type"] in ("http", "websocket") else None
        if named is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await relay_websocket(WebSocket(scope, receive, send), int(named["port"]), named["sandbox"])
        else:
            response = await forward(Request(scope, receive), int(named["port"]), named["sandbox"])
            await response(scope, receive, send)


def _sandbox(request: HTTPConnection, sandbox_id: str) -> Sandbox | None:
    state = state_of(request)
    granted = state.grants.get(sandbox_id)
    if granted is None:
        return None
    try:
        sandbox = state.engine.sandboxes.get(sandbox_id)
    except SandboxNotFound:
        return None
    if sandbox.metadata.get(PRIVATE_TRAFFIC) and not secrets.compare_digest(
        request.headers.get(TRAFFIC_TOKEN, ""), granted.token
    ):
        return None
    return sandbox


async def forward(request: Request, port: int, sandbox_id: str) -> Response:
    """One request to ``port`` in the sandbox, and its answer as it streams back."""
    sandbox = _sandbox(request, sandbox_id)
    if sandbox is None:
        # A wrong token, and a sandbox that is not there, look alike.
        return error(502, f"sandbox {sandbox_id} is not running here, or its URLs need its traffic access token")
    if not 1 <= port <= 65535:
        return error(400, f"a port is from 1 to 65535, not {port}")
    body = await request.body()
    exchange = h11.Connection(h11.CLIENT)
    target = _target(request)
    headers = [(name, value) for name, value in request.headers.raw if name.lower() not in NOT_PASSED_ON]
    head = h11.Request(
        method=request.method,
        target=target,
        headers=[*headers, (b"content-length", str(len(body)).encode()), (b"connection", b"close")],
    )
    sent = exchange.send(head) or b""
    sent += (exchange.send(h11.Data(data=body)) or b"") if body else b""
    sent += exchange.send(h11.EndOfMessage()) or b""
    opened = contextlib.AsyncExitStack()
    try:
        stream = await opened.enter_async_context(sandbox.connect_port(port))
        await stream.send(sent)
        answer = await _next(exchange, stream)
        while isinstance(answer, h11.InformationalResponse):
            answer = await _next(exchange, stream)
        if not isinstance(answer, h11.Response):
            raise h11.RemoteProtocolError("the connection closed before an answer")
    except PortRefused:
        await opened.aclose()
        return error(502, f"port {port} of sandbox {sandbox_id} is not open: nothing listens on it")
    except h11.RemoteProtocolError as exc:
        await opened.aclose()
        return error(502, f"port {port} of sandbox {sandbox_id} did not answer in HTTP/1.1: {exc}")
    except (SandboxError, SandboxNotFound) as exc:
        await opened.aclose()
        return error(502, f"sandbox {sandbox_id}: {exc}")
    except BaseException:
        await opened.aclose()
        raise

    async def rest() -> AsyncIterator[bytes]:
        async with opened:
            while isinstance(event := await _next(exchange, stream), h11.Data):
                yield bytes(event.data)

    response = StreamingResponse(rest(), status_code=answer.status_code)
    response.raw_headers = [(name, value) for name, value in answer.headers if name.lower() not in NOT_PASSED_ON]
    return response


def _target(request: HTTPConnection) -> bytes:
    query: bytes = request.scope["query_string"]
    path: bytes = request.scope["raw_path"]
    return path + (b"?" + query if query else b"")


# Closing a WebSocket before accepting it answers its handshake with 403.
WS_REFUSED = 1008
# The sandbox's side ended without a closing handshake (1006 is never sent).
WS_LOST = 1011


async def relay_websocket(websocket: WebSocket, port: int, sandbox_id: str) -> None:
    """A WebSocket to ``port`` in the sandbox: the handshake is made again on the sandbox's side,
    with the client's path, headers and subprotocols; accepted with what the sandbox chose."""
    sandbox = _sandbox(websocket, sandbox_id)
    if sandbox is None or not 1 <= port <= 65535:
        await websocket.close(WS_REFUSED)
        return
    upstream = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    passed_on = NOT_PASSED_ON | {b"host"}
    handshake = ws.Request(
        host=websocket.headers.get("host", ""),
        target=_target(websocket).decode("latin-1"),
        subprotocols=list(websocket.scope.get("subprotocols", [])),
        extra_headers=[
            (name, value)
            for name, value in websocket.headers.raw
            if name.lower() not in passed_on and not name.lower().startswith(b"sec-websocket-")
        ],
    )
    try:
        async with sandbox.connect_port(port) as stream:
            await stream.send(upstream.send(handshake))
            answer = await _next_websocket_event(upstream, stream)
            if not isinstance(answer, ws.AcceptConnection):
                await websocket.close(WS_REFUSED)
                return
            await websocket.accept(answer.subprotocol)
            async with anyio.create_task_group() as relays:

                async def until_either_ends(direction: Callable[[], Awaitable[None]]) -> None:
                    # A client gone while its message was on the way ends the relay too.
                    with contextlib.suppress(WebSocketDisconnect):
                        await direction()
                    relays.cancel_scope.cancel()

                relays.start_soon(until_either_ends, lambda: _to_sandbox(websocket, upstream, stream))
                relays.start_soon(until_either_ends, lambda: _to_client(websocket, upstream, stream))
    except WebSocketDisconnect:
        return  # the client left before it was accepted
    except (PortRefused, SandboxError, SandboxNotFound, wsproto.utilities.RemoteProtocolError):
        await _close(websocket, WS_LOST if websocket.application_state is WebSocketState.CONNECTED else WS_REFUSED)


async def _next_websocket_event(connection: wsproto.WSConnection, stream: PortStream) -> ws.Event | None:
    """The sandbox's answer to the handshake; None if it closed first."""
    while (event := next(connection.events(), None)) is None:
        data = await stream.receive()
        if not data:
            return None
        connection.receive_data(data)
    return event


async def _to_sandbox(websocket: WebSocket, upstream: wsproto.WSConnection, stream: PortStream) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            if upstream.state is wsproto.connection.ConnectionState.OPEN:
                await stream.send(upstream.send(ws.CloseConnection(code=message.get("code", 1000))))
            return
        text = message.get("text")
        sent = ws.TextMessage(data=text) if text is not None else ws.BytesMessage(data=message.get("bytes") or b"")
        await stream.send(upstream.send(sent))


async def _to_client(websocket: WebSocket, upstream: wsproto.WSConnection, stream: PortStream) -> None:
    texts: list[str] = []
    chunks: list[bytes] = []
    while True:
        # What came with the handshake's answer first, then what the sandbox sends.
        for event in upstream.events():
            if isinstance(event, ws.TextMessage):
                texts.append(event.data)
                if event.message_finished:
                    await websocket.send_text("".join(texts))
                    texts = []
            elif isinstance(event, ws.BytesMessage):
                chunks.append(bytes(event.data))
                if event.message_finished:
                    await websocket.send_bytes(b"".join(chunks))
                    chunks = []
            elif isinstance(event, ws.Ping):
                await stream.send(upstream.send(event.response()))
            elif isinstance(event, ws.CloseConnection):
                with contextlib.suppress(wsproto.utilities.LocalProtocolError):
                    await stream.send(upstream.send(event.response()))
                await _close(websocket, event.code, event.reason or "")
                return
        data = await stream.receive()
        if not data:
            await _close(websocket, WS_LOST, "the sandbox's side ended without closing")
            return
        upstream.receive_data(data)


async def _close(websocket: WebSocket, code: int, reason: str = "") -> None:
    """Close the client's side, unless the client already has."""
    if (
        websocket.client_state is not WebSocketState.DISCONNECTED
        and websocket.application_state is not WebSocketState.DISCONNECTED
    ):
        with contextlib.suppress(RuntimeError, OSError):
            await websocket.close(code, reason)


async def _next(connection: h11.Connection, stream: PortStream) -> object:
    """The next thing the port said, reading more as needed (what ends the stream ends it)."""
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(await stream.receive())
