"""E2B's sandbox URLs (``Sandbox.get_host(port)``) through the unmodified SDK against `airlock
serve`, on every sandbox kind: an HTTP request whose Host names a sandbox's port reaches the server
the sandbox runs there, and nothing else does."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
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
import socket
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 8002))
listener.listen()
connection, _ = listener.accept()
connection.sendall(b"not http at all\\r\\n\\r\\n")
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
    sandbox.files.write("/home/user/echo.py", ECHO)
    sandbox.commands.run("python3 /home/user/echo.py 8000", background=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(e2b.CommandExitException):
            sandbox.commands.run(LISTENS.format(port=8000), timeout=10)
            return sandbox
        time.sleep(0.1)
    raise AssertionError("the echo server did not start")


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
        sandbox.files.write("/home/user/garbled.py", GARBLED)
        sandbox.commands.run("python3 /home/user/garbled.py", background=True)
        time.sleep(0.5)
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
