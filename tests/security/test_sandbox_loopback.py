"""A long-lived sandbox's programs may open TCP and UDP sockets (``AF_INET``, ``AF_INET6``) to
serve on its own loopback, where jobs have ``AF_UNIX`` alone. Attacks by someone who has read
engine/runtime/_seccomp.py (``_with_loopback``), on every session kind: what those sockets reach
must be the sandbox's own loopback and nothing else, and every other family stays refused.

No test aims at an address outside this machine: that there is no network is proved by the
sandbox's interfaces and routes (``lo`` alone, no route), by the host's loopback being out of
reach, and by another sandbox's loopback being out of reach.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
from probes import SOCKET_FAMILIES
from sandboxes import SESSION_SANDBOXES, Sandbox, ids

from engine import SyncEngine
from engine._sync import SyncSandbox

pytestmark = pytest.mark.docker

LOOPBACK = ("inet", "inet6")
REFUSED = ("EAFNOSUPPORT", "EPERM", "EACCES", "EPROTONOSUPPORT")

FACTS = r"""
import errno, json, socket, sys
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def serve_and_reach(family, host):
    with socket.socket(family) as listener:
        listener.bind((host, 0))
        listener.listen()
        with socket.create_connection((host, listener.getsockname()[1]), timeout=5) as client:
            peer, _ = listener.accept()
            client.sendall(b"ping")
            return peer.recv(4).decode()
def routes():
    with open("/proc/net/route") as table:
        return table.read().splitlines()[1:]
host_port = int(sys.argv[1])
print(json.dumps({
    "interfaces": [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]],
    "routes": routes(),
    "ipv4": serve_and_reach(socket.AF_INET, "127.0.0.1"),
    "ipv6": attempt(lambda: serve_and_reach(socket.AF_INET6, "::1")),
    "udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
    "host_loopback": attempt(lambda: socket.create_connection(("127.0.0.1", host_port), timeout=5)),
    "families": {name: attempt(lambda: socket.socket(*made).close()) for name, made in FAMILIES.items()},
}))
"""


@pytest.fixture(scope="module", params=SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
def engine(request: pytest.FixtureRequest) -> Iterator[SyncEngine]:
    kind: Sandbox = request.param
    with SyncEngine(kind.require().settings(pool_size=0)) as opened:
        yield opened


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A server on the host's loopback that no sandbox may reach: it counts who does."""
    reached: list[object] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    done = threading.Event()

    def count() -> None:
        while not done.is_set():
            try:
                connection, peer = listener.accept()
            except TimeoutError:
                continue
            reached.append(peer)
            connection.close()

    thread = threading.Thread(target=count, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join()
    listener.close()
    assert reached == [], f"a sandbox reached the host's loopback: {reached}"


def facts(sandbox: SyncSandbox, host_port: int, user: str) -> dict[str, object]:
    script = f"FAMILIES = {SOCKET_FAMILIES!r}\n{FACTS}"
    ran = sandbox.exec(["python3", "-c", script, str(host_port)], user=user)
    assert ran.exit_code == 0, ran
    found: dict[str, object] = json.loads(ran.stdout)
    return found


def test_a_sandbox_serves_on_its_own_loopback_and_reaches_nothing_else(engine: SyncEngine, host_listener: int) -> None:
    sandbox = engine.create_sandbox(timeout_s=120)
    try:
        for user in sandbox.users:
            seen = facts(sandbox, host_listener, user)
            assert seen["ipv4"] == "ping", seen
            assert seen["udp"] == "allowed"
            # lo alone, and no route: nothing but the loopback is there to reach.
            assert seen["interfaces"] == ["lo"] and seen["routes"] == [], seen
            # The host's loopback is not the sandbox's: what listens there is out of reach.
            assert seen["host_loopback"] == "ECONNREFUSED", seen
            families = seen["families"]
            assert isinstance(families, dict)
            assert {name: families[name] for name in LOOPBACK} == {"inet": "allowed", "inet6": "allowed"}
            # Raw, packet, netlink, vsock, crypto and key sockets stay refused, to its root too. Under
            # gVisor a command's sockets are gVisor's kernel's, never the host's (a command started
            # in a running gVisor sandbox is not under our filter): its own netlink answers there.
            own = {"netlink"} if engine.settings.isolation == "gvisor" else set()
            others = {
                name: fact for name, fact in families.items() if name not in (*LOOPBACK, *own) and fact not in REFUSED
            }
            assert others == {}, others
    finally:
        engine.sandboxes.kill(sandbox.id)


def test_one_sandbox_cannot_reach_anothers_server(engine: SyncEngine) -> None:
    serving = engine.create_sandbox(timeout_s=120)
    other = engine.create_sandbox(timeout_s=120)
    try:
        server = serving.start(["python3", "-m", "http.server", "8123", "--bind", "127.0.0.1"], time_s=60)
        probe = "import socket, sys; socket.create_connection(('127.0.0.1', 8123), timeout=5); print('reached')"
        for _ in range(100):
            if serving.exec(["python3", "-c", probe]).exit_code == 0:
                break
        else:
            raise AssertionError("the server did not start")
        reached = other.exec(["python3", "-c", probe])
        assert reached.exit_code != 0 and "ConnectionRefusedError" in reached.stderr, reached
        server.signal()
    finally:
        engine.sandboxes.kill(serving.id)
        engine.sandboxes.kill(other.id)


def test_a_job_still_has_unix_sockets_alone(engine: SyncEngine) -> None:
    made = engine.run("import socket\ntry:\n    socket.socket()\nexcept OSError as exc:\n    print(exc.errno)\n")
    assert made.ok and made.stdout.strip() in ("97", "1"), made
