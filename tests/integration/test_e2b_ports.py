"""E2B's sandbox URLs (``Sandbox.get_host(port)``) through the unmodified SDK against `airlock
serve`, on every sandbox kind: an HTTP request or a WebSocket whose Host names a sandbox's port
reaches the server the sandbox runs there, and nothing else does."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import wsproto
import wsproto.events as ws
from integration.serving import API_KEY, Server
from sandboxes import SESSION_SANDBOXES, Sandbox, ids

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.docker

OTHER_KEY = "e2b_" + "e5" * 20
# What the sandbox serves: the request it got, as JSON, and a body past what one read carries.
ECHO = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Echo(BaseHTTPRequestHandler):
    def answer(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/large":
            payload = b"x" * (3 << 20)
        else:
            asked = {"header": "x-asked", "token": "e2b-traffic-access-token"}
            seen = {"method": self.command, "path": self.path, "body": body.decode()}
            payload = json.dumps({**seen, **{key: self.headers.get(name) for key, name in asked.items()}}).encode()
        self.send_response(201)
        self.send_header("content-length", str(len(payload)))
        self.send_header("set-cookie", "a=1")
        self.send_header("set-cookie", "b=2")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
    do_GET = do_POST = do_PUT = do_HEAD = answer
    def log_message(self, *args): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
"""
# A port that answers something that is not HTTP.
GARBLED = """
import contextlib, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen()
while True:
    connection, _ = listener.accept()
    with connection, contextlib.suppress(OSError):
        connection.sendall(b"not http at all\\r\\n\\r\\n")
"""
# A WebSocket server of the standard library's parts: it first tells the path and a header it got,
# then answers text in capitals and bytes reversed; "bye" closes with 4000. At /flood it sends 5000
# messages more at once.
WEBSOCKET_ECHO = r"""
import base64, hashlib, json, socket, struct, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen()
def frame(opcode, payload):
    size = len(payload)
    if size < 126:
        length = bytes([size])
    elif size < 65536:
        length = bytes([126]) + struct.pack(">H", size)
    else:
        length = bytes([127]) + struct.pack(">Q", size)
    return bytes([0x80 | opcode]) + length + payload
def serve(connection):
    stream = connection.makefile("rb")
    target = stream.readline().decode().split()[1]
    headers = {}
    while line := stream.readline().decode().strip():
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    key = headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    accept = base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    chosen = f"Sec-WebSocket-Protocol: {offered[0]}\r\n" if offered else ""
    connection.sendall(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\n{chosen}\r\n".encode()
    )
    connection.sendall(frame(1, json.dumps({"path": target, "asked": headers.get("x-asked")}).encode()))
    if target == "/flood":
        connection.sendall(frame(1, b"more") * 5000)
    while True:
        first, second = stream.read(2)
        opcode, size = first & 15, second & 127
        if size == 126:
            size = struct.unpack(">H", stream.read(2))[0]
        elif size == 127:
            size = struct.unpack(">Q", stream.read(8))[0]
        mask = stream.read(4)
        payload = bytes(byte ^ mask[i % 4] for i, byte in enumerate(stream.read(size)))
        if opcode == 8:
            connection.sendall(frame(8, payload[:2]))
            return
        if opcode == 1 and payload == b"bye":
            connection.sendall(frame(8, struct.pack(">H", 4000) + b"bye"))
        else:
            connection.sendall(frame(opcode, payload.upper() if opcode == 1 else payload[::-1]))
while True:
    connection, _ = listener.accept()
    try:
        serve(connection)
    except (IndexError, KeyError, ValueError, OSError):
        pass  # a probe that only connected, or a client gone
    finally:
        connection.close()
"""
LISTENS = "python3 -c 'import socket, sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))' {port}"


@pytest.fixture(scope="module", params=SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    kind: Sandbox = request.param
    with Server(kind.require().isolation, *kind.cli_flags(), "--api-key", OTHER_KEY) as running:
        yield running


def serving(server: Server, **options: Any) -> Any:
    """A sandbox (the SDK's) with the echo server on port 8000, once it answers."""
    sandbox = e2b.Sandbox.create(timeout=120, api_key=API_KEY, api_url=server.url, sandbox_url=server.url, **options)
    serve(sandbox, ECHO, 8000)
    return sandbox


def serve(sandbox: Any, program: str, port: int) -> None:
    """Start ``program`` in the sandbox on ``port`` and return once something listens there."""
    sandbox.files.write(f"/home/user/serves-{port}.py", program)
    sandbox.commands.run(f"python3 /home/user/serves-{port}.py {port}", background=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(e2b.CommandExitException):
            sandbox.commands.run(LISTENS.format(port=port), timeout=10)
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within 30 s")


class WebSocketClient:
    """A WebSocket to the server (wsproto over a socket), opened with ``host`` as its Host."""

    def __init__(self, url: str, host: str, target: str = "/", **request: Any) -> None:
        address = urllib.parse.urlsplit(url)
        self.socket = socket.create_connection((address.hostname, address.port), timeout=30)
        self.connection = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        self.socket.sendall(self.connection.send(ws.Request(host=host, target=target, **request)))
        self.handshake = self._next()

    def _next(self) -> ws.Event:
        while True:
            for event in self.connection.events():
                if isinstance(event, ws.Ping):
                    self.socket.sendall(self.connection.send(event.response()))
                    continue
                return event
            self.connection.receive_data(self.socket.recv(65536) or None)

    def send(self, data: str | bytes) -> None:
        message = ws.TextMessage(data=data) if isinstance(data, str) else ws.BytesMessage(data=data)
        self.socket.sendall(self.connection.send(message))

    def receive(self) -> str | bytes | ws.CloseConnection:
        """The next whole message, or the close that came instead."""
        parts: list[Any] = []
        while True:
            event = self._next()
            if isinstance(event, ws.CloseConnection):
                return event
            assert isinstance(event, ws.Message), event
            parts.append(event.data)
            if event.message_finished:
                return "".join(parts) if isinstance(event, ws.TextMessage) else b"".join(parts)

    def close(self) -> None:
        with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
            self.socket.sendall(self.connection.send(ws.CloseConnection(code=1000)))
        self.socket.close()


def test_a_websocket_reaches_a_sandboxs_port_both_ways(server: Server) -> None:
    sandbox = serving(server)
    try:
        serve(sandbox, WEBSOCKET_ECHO, 8003)
        host = sandbox.get_host(8003)
        client = WebSocketClient(
            server.url, host, "/live?x=1", subprotocols=["chat", "other"], extra_headers=[(b"x-asked", b"yes")]
        )
        assert isinstance(client.handshake, ws.AcceptConnection), client.handshake
        assert client.handshake.subprotocol == "chat"
        try:
            assert json.loads(str(client.receive())) == {"path": "/live?x=1", "asked": "yes"}
            client.send("hello")
            assert client.receive() == "HELLO"
            client.send(b"\x01\x02\x03")
            assert client.receive() == b"\x03\x02\x01"
            large = "abc" * 100_000
            client.send(large)
            assert client.receive() == large.upper()
            client.send("bye")
            closed = client.receive()
            assert isinstance(closed, ws.CloseConnection) and (closed.code, closed.reason) == (4000, "bye")
        finally:
            client.close()
        # The server took the next connection: the relay of the last one closed it.
        again = WebSocketClient(server.url, host)
        assert isinstance(again.handshake, ws.AcceptConnection), again.handshake
        again.close()
        # Clients gone at once, while the sandbox's first message is on its way, end their relays
        # quietly.
        for _ in range(5):
            WebSocketClient(server.url, host, "/flood").socket.close()
        time.sleep(1)
        assert "Exception in ASGI application" not in server.output()
        for refused_host in (sandbox.get_host(8001), f"8003-{'0' * 20}.x"):
            refused = WebSocketClient(server.url, refused_host)
            assert isinstance(refused.handshake, ws.RejectConnection) and refused.handshake.status_code == 403
            refused.socket.close()
        deadline = time.monotonic() + 10
        while "/dev/tcp" in sandbox.commands.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout:
            assert time.monotonic() < deadline, "a WebSocket's relay outlived its connection"
            time.sleep(0.2)
    finally:
        sandbox.kill()


def test_a_sandboxs_port_answers_at_its_host(server: Server) -> None:
    sandbox = serving(server)
    try:
        host = sandbox.get_host(8000)
        assert host.startswith(f"8000-{sandbox.sandbox_id}.")
        answer = httpx.post(
            f"{server.url}/submit?q=1", headers={"Host": host, "X-Asked": "yes"}, content=b"payload", timeout=30
        )
        assert answer.status_code == 201, answer.text
        assert answer.json() == {
            "method": "POST",
            "path": "/submit?q=1",
            "body": "payload",
            "header": "yes",
            "token": None,
        }
        assert answer.headers.get_list("set-cookie") == ["a=1", "b=2"]
        assert httpx.head(f"{server.url}/", headers={"Host": host}, timeout=30).status_code == 201
        # A path the server's own API has is the sandbox's at its host, with no API key.
        assert httpx.get(f"{server.url}/sandboxes", headers={"Host": host}, timeout=30).json()["path"] == "/sandboxes"
        assert len(httpx.get(f"{server.url}/large", headers={"Host": host}, timeout=60).content) == 3 << 20
        # Nothing listens on another port; a port that is no port is refused.
        closed = httpx.get(f"{server.url}/", headers={"Host": sandbox.get_host(8001)}, timeout=30)
        assert closed.status_code == 502 and "nothing listens" in closed.json()["message"]
        no_port = httpx.get(f"{server.url}/", headers={"Host": f"99999-{sandbox.sandbox_id}.x"}, timeout=30)
        assert no_port.status_code == 400
        serve(sandbox, GARBLED, 8002)
        garbled = httpx.get(f"{server.url}/", headers={"Host": sandbox.get_host(8002)}, timeout=30)
        assert garbled.status_code == 502 and "HTTP/1.1" in garbled.json()["message"]
        # The relay leaves nothing behind in the sandbox.
        assert "/dev/tcp" not in sandbox.commands.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
    finally:
        sandbox.kill()
    gone = httpx.get(f"{server.url}/", headers={"Host": host}, timeout=30)
    assert gone.status_code == 502


def test_a_private_sandboxs_port_needs_its_traffic_token(server: Server) -> None:
    sandbox = serving(server, network={"allow_public_traffic": False})
    try:
        host = sandbox.get_host(8000)
        for headers in ({}, {"e2b-traffic-access-token": "wrong"}, {"X-API-KEY": API_KEY}, {"X-API-KEY": OTHER_KEY}):
            refused = httpx.get(f"{server.url}/", headers={"Host": host, **headers}, timeout=30)
            assert refused.status_code == 502, refused.text
        token = sandbox.traffic_access_token
        allowed = httpx.get(f"{server.url}/", headers={"Host": host, "e2b-traffic-access-token": token}, timeout=30)
        assert allowed.status_code == 201 and allowed.json()["token"] is None  # not passed on to the sandbox
        # A WebSocket too: the HTTP answer to its handshake refuses it without the token.
        for headers in ({}, {"e2b-traffic-access-token": "wrong"}, {"X-API-KEY": API_KEY}):
            websocket = WebSocketClient(
                server.url, host, extra_headers=[(k.encode(), v.encode()) for k, v in headers.items()]
            )
            assert isinstance(websocket.handshake, ws.RejectConnection), websocket.handshake
            websocket.socket.close()
    finally:
        sandbox.kill()


def test_a_sandbox_asking_for_the_network_is_refused(server: Server) -> None:
    with pytest.raises(e2b.SandboxException, match="no network"):
        e2b.Sandbox.create(
            timeout=60,
            api_key=API_KEY,
            api_url=server.url,
            sandbox_url=server.url,
            network={"allow_out": ["10.0.0.0/8"]},
        )
