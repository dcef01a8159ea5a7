"""Attacks on ``airlock serve`` by someone who has read it: a tenant reaching another's sandboxes,
a caller dodging its quota or lifting the operator's limits, a sandbox making the server spend
without bound, malformed requests aimed at a 500. A real server on loopback, real sandboxes,
the unmodified E2B SDK where a client would use it.

The server's logic is the host's, the same for every isolation tier: these run on one (the
sandboxes the server makes meet the whole attack suite through ``test_session_attacks.py``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
from integration.serving import API_KEY, Server

from engine.sandboxes._sandbox import MAX_CONTEXTS

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.docker

OTHER_KEY = "e2b_" + "b2" * 20


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    limits = ("--memory-mb", "256", "--wall-time-s", "3", "--max-body-mb", "2", "--output-bytes", "65536")
    running = Server("runc", "--api-key", OTHER_KEY, *limits, api_key=API_KEY)
    yield running
    assert "Traceback" not in running.stop()


def envelope(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(data)) + data


def data_plane(
    server: Server, path: str, sandbox_id: str, token: str | None = None, body: Any = None, **extra: str
) -> httpx.Response:
    """A call to a sandbox's envd or code interpreter, as the SDK makes it."""
    headers = {"E2b-Sandbox-Id": sandbox_id, "Content-Type": "application/json", **extra}
    if token is not None:
        headers["X-Access-Token"] = token
    method = "GET" if path.startswith(("/files?", "/health")) or (path == "/contexts" and body is None) else "POST"
    content = json.dumps(body).encode() if body is not None else None
    return httpx.request(method, f"{server.url}{path}", headers=headers, content=content, timeout=60)


# -- 1. one key takes over another's sandboxes --------------------------------------------------------------


def test_a_key_sees_and_reaches_only_its_own_sandboxes(server: Server) -> None:
    mine = e2b.Sandbox.create(api_key=API_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    theirs = e2b.Sandbox.create(api_key=OTHER_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    try:
        other = {"api_key": OTHER_KEY, "api_url": server.url, "sandbox_url": server.url}
        # The unmodified SDK, as the other tenant: the sandbox does not exist for it.
        listed = [s.sandbox_id for s in e2b.Sandbox.list(**other).next_items()]
        assert mine.sandbox_id not in listed and theirs.sandbox_id in listed
        with pytest.raises(e2b.NotFoundException):
            e2b.Sandbox.connect(mine.sandbox_id, **other)
        with pytest.raises(e2b.NotFoundException):
            e2b.Sandbox.get_info(mine.sandbox_id, **other)
        assert e2b.Sandbox.kill(mine.sandbox_id, **other) is False
        with pytest.raises(e2b.NotFoundException):
            e2b.Sandbox.set_timeout(mine.sandbox_id, 5, **other)
        with pytest.raises(e2b.NotFoundException):
            e2b.Sandbox.pause(mine.sandbox_id, **other)
        assert mine.get_info().state == e2b.SandboxState.RUNNING

        # By hand: every control-plane route answers as for a sandbox that does not exist.
        key = {"X-API-KEY": OTHER_KEY}
        for method, path in [
            ("GET", f"/sandboxes/{mine.sandbox_id}"),
            ("DELETE", f"/sandboxes/{mine.sandbox_id}"),
            ("POST", f"/sandboxes/{mine.sandbox_id}/timeout"),
            ("POST", f"/sandboxes/{mine.sandbox_id}/connect"),
            ("POST", f"/sandboxes/{mine.sandbox_id}/resume"),
            ("GET", f"/sandboxes/{mine.sandbox_id}/metrics"),
            ("POST", f"/sandboxes/{mine.sandbox_id}/pause"),
        ]:
            body = b'{"timeout": 30}' if method == "POST" else None
            answer = httpx.request(method, f"{server.url}{path}", headers=key, content=body, timeout=30)
            assert answer.status_code == 404, (method, path, answer.text)
            assert mine.get_info().sandbox_id == mine.sandbox_id  # still there, still its owner's

        # The data plane, by the sandbox id alone or with the other tenant's own token.
        their_token = theirs._envd_access_token
        calls: list[tuple[str, Any]] = [
            ("/process.Process/List", {}),
            ("/process.Process/Update", {"process": {"pid": 1}, "pty": {"size": {"rows": 1, "cols": 1}}}),
            ("/filesystem.Filesystem/ListDir", {"path": "/home/user", "depth": 1}),
            ("/filesystem.Filesystem/CreateWatcher", {"path": "/home/user"}),
            ("/contexts", {"language": "python"}),
            ("/contexts", None),
            ("/execute", {"code": "print(1)"}),
            ("/files?path=/etc/hostname", None),
            ("/health", None),
        ]
        for path, body in calls:
            for token in (None, their_token):
                answer = data_plane(server, path, mine.sandbox_id, token, body)
                assert answer.status_code == 502, (path, token, answer.status_code, answer.text[:200])
            traffic = data_plane(server, path, mine.sandbox_id, None, body, **{"E2B-Traffic-Access-Token": "x" * 32})
            assert traffic.status_code == 502, (path, traffic.text[:200])
        # The owner, with its token, is answered (the routes work; only the tenant differs).
        assert data_plane(server, "/process.Process/List", mine.sandbox_id, mine._envd_access_token, {}).is_success
        assert mine.commands.run("echo mine").stdout == "mine\n"
    finally:
        mine.kill()
        theirs.kill()


def test_a_key_cannot_name_an_owner_in_metadata(server: Server) -> None:
    """The owner a sandbox paused to disk keeps across a restart is the server's word: metadata
    that would set it (or any key of the server's own) is refused before a sandbox is made."""
    for key in ("airlock.owner", "airlock.template", "airlock.anything"):
        body = json.dumps({"templateID": "base", "metadata": {key: "x" * 64}})
        answer = httpx.post(f"{server.url}/sandboxes", headers={"X-API-KEY": OTHER_KEY}, content=body, timeout=30)
        assert answer.status_code == 400 and key in answer.json()["message"], answer.text
    assert e2b.Sandbox.list(api_key=OTHER_KEY, api_url=server.url).next_items() == []


def test_the_code_interpreters_contexts_need_the_sandboxs_token(server: Server) -> None:
    """The code interpreter SDK sends the traffic token the control plane gave it on /contexts."""
    interpreter = pytest.importorskip("e2b_code_interpreter")
    sandbox = interpreter.Sandbox.create(api_key=API_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    try:
        context = sandbox.create_code_context()
        assert sandbox.run_code("1 + 1", context=context).text == "2"
        assert context.id in [c.id for c in sandbox.list_code_contexts()]
        bare = data_plane(server, "/contexts", sandbox.sandbox_id)
        assert bare.status_code == 502
    finally:
        sandbox.kill()


# -- 2. a second header dodges the per-key quota --------------------------------------------------------------


def test_the_quota_counts_the_key_that_authenticated() -> None:
    running = Server("runc", "--key-concurrency", "1", api_key=API_KEY)
    try:
        slow = {"code": "import time\ntime.sleep(4)\nprint('done')", "language": "python"}

        def run(headers: dict[str, str]) -> httpx.Response:
            return httpx.post(f"{running.url}/run_code", json=slow, headers=headers, timeout=60)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(run, {"Authorization": f"Bearer {API_KEY}"})
            time.sleep(1.5)
            dodging = run({"Authorization": API_KEY, "X-API-KEY": "junk"})
            assert first.result().status_code == 200
        assert dodging.status_code == 429, dodging.text
        assert httpx.post(f"{running.url}/run_code", json=slow, headers={"X-API-KEY": "junk"}).status_code == 401
    finally:
        assert "Traceback" not in running.stop()


# -- found on reading the server again: one tenant takes every sandbox, or counts the others' ----------------


def test_no_key_can_take_every_sandbox_or_count_the_others() -> None:
    running = Server("runc", "--api-key", OTHER_KEY, "--max-sandboxes", "4", api_key=API_KEY)
    made: list[Any] = []
    try:
        mine = {"api_key": API_KEY, "api_url": running.url, "sandbox_url": running.url, "timeout": 120}
        # A burst of concurrent creates gets the key its share (half of four) and no more.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            attempts = [pool.submit(e2b.Sandbox.create, **mine) for _ in range(4)]
            for attempt in attempts:
                with contextlib.suppress(e2b.RateLimitException):
                    made.append(attempt.result())
        assert len(made) == 2
        theirs = e2b.Sandbox.create(api_key=OTHER_KEY, api_url=running.url, sandbox_url=running.url, timeout=120)
        made.append(theirs)
        # /health answers anyone: it says the server is up, not how busy its tenants are.
        assert httpx.get(f"{running.url}/health").json() == {"status": "ok"}
        # /metrics names each scraping key's own sandboxes, and counts the others only in totals.
        scraped = {
            key: httpx.get(f"{running.url}/metrics", headers={"X-API-KEY": key}, timeout=30).text
            for key in (API_KEY, OTHER_KEY)
        }
        assert theirs.sandbox_id in scraped[OTHER_KEY] and theirs.sandbox_id not in scraped[API_KEY]
        assert all(sandbox.sandbox_id not in scraped[OTHER_KEY] for sandbox in made[:2])
        assert all('airlock_sandboxes{state="running"} 3.0' in text for text in scraped.values())
        # A killed sandbox gives its place back.
        made.pop(0).kill()
        made.append(e2b.Sandbox.create(**mine))
    finally:
        for sandbox in made:
            with contextlib.suppress(Exception):
                sandbox.kill()
        assert "Traceback" not in running.stop()


def test_no_key_can_take_every_snapshot_or_another_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_MAX_SNAPSHOTS", "4")
    running = Server("runc", "--api-key", OTHER_KEY, api_key=API_KEY)
    try:
        mine = {"api_key": API_KEY, "api_url": running.url, "sandbox_url": running.url}
        theirs = {"api_key": OTHER_KEY, "api_url": running.url, "sandbox_url": running.url}
        source, other = e2b.Sandbox.create(timeout=120, **mine), e2b.Sandbox.create(timeout=120, **theirs)
        # A burst of concurrent snapshots (taken one after another) gets the key its share (half of
        # four) and no more.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            attempts = [pool.submit(source.create_snapshot) for _ in range(4)]
            taken = [attempt.result() for attempt in attempts if attempt.exception() is None]
            refused = [attempt.exception() for attempt in attempts if attempt.exception() is not None]
        assert len(taken) == 2 and all(isinstance(exc, e2b.RateLimitException) for exc in refused), refused
        theirs_taken = other.create_snapshot()
        # Another key's snapshot is not theirs to start from, delete or even learn of.
        for snapshot_id in (taken[0].snapshot_id, theirs_taken.snapshot_id):
            owner, stranger = (theirs, mine) if snapshot_id == theirs_taken.snapshot_id else (mine, theirs)
            with pytest.raises(e2b.SandboxException, match="nor a snapshot of yours"):
                e2b.Sandbox.create(snapshot_id, **stranger)
            assert e2b.Sandbox.delete_snapshot(snapshot_id, **stranger) is False
            assert snapshot_id not in [s.snapshot_id for s in e2b.Sandbox.list_snapshots(**stranger).next_items()]
            assert snapshot_id in [s.snapshot_id for s in e2b.Sandbox.list_snapshots(**owner).next_items()]
        # A deleted snapshot gives its place back.
        assert e2b.Sandbox.delete_snapshot(taken.pop().snapshot_id, **mine) is True
        taken.append(source.create_snapshot())
        for snapshot in [*taken, theirs_taken]:
            e2b.Sandbox.delete_snapshot(snapshot.snapshot_id, **(theirs if snapshot is theirs_taken else mine))
        source.kill()
        other.kill()
    finally:
        assert "Traceback" not in running.stop()


# -- 3. a request lifts the operator's limits ---------------------------------------------------------------

MEMORY_LIMIT = (
    "import pathlib\n"
    "for name in ('/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/memory.max'):\n"
    "    path = pathlib.Path(name)\n"
    "    if path.exists():\n"
    "        print(int(path.read_text()) >> 20)\n"
    "        break\n"
)
SLEEPS = "import time\ntime.sleep(6)\nprint('slept')"


def test_a_request_cannot_lift_the_servers_limits(server: Server) -> None:
    key = {"X-API-KEY": API_KEY}
    fusion = {"language": "python", "memory_limit_MB": 2048, "run_timeout": 30}
    memory = httpx.post(f"{server.url}/run_code", json={**fusion, "code": MEMORY_LIMIT}, headers=key, timeout=60)
    assert memory.json()["run_result"]["stdout"] == "256\n", memory.text
    assert "memory_mb=2048" in memory.headers["airlock-limits-capped"]
    assert "lowered" in memory.json()["message"]
    slept = httpx.post(f"{server.url}/run_code", json={**fusion, "code": SLEEPS}, headers=key, timeout=60)
    assert slept.json()["run_result"]["status"] == "TimeLimitExceeded", slept.text
    assert "time_s=30" in slept.headers["airlock-limits-capped"]

    piston = {"language": "python", "files": [{"content": MEMORY_LIMIT}], "run_memory_limit": 2 << 30}
    ran = httpx.post(f"{server.url}/api/v2/execute", json=piston, headers=key, timeout=60)
    assert ran.json()["run"]["stdout"] == "256\n" and "memory_mb" in ran.headers["airlock-limits-capped"]

    limits = {"memory_mb": 2048, "wall_time_s": 30}
    submission = {"code": SLEEPS, "tests": [{"kind": "stdin", "expected_output": "slept"}], "limits": limits}
    judged = httpx.post(f"{server.url}/v1/judge", json={"submissions": [submission]}, headers=key, timeout=120)
    (line,) = [json.loads(text) for text in judged.text.splitlines()]
    asked = {"memory_mb": 2048, "time_s": 30, "wall_time_s": 30}  # wall_time_s alone is both, as it always was
    assert line["verdict"] == "timeout" and line["limits_capped"] == asked, line
    # Lowering is a request's right.
    lower = {
        **submission,
        "code": MEMORY_LIMIT,
        "limits": {"memory_mb": 128},
        "tests": [{"kind": "stdin", "expected_output": "128"}],
    }
    judged = httpx.post(f"{server.url}/v1/judge", json={"submissions": [lower]}, headers=key, timeout=120)
    (line,) = [json.loads(text) for text in judged.text.splitlines()]
    assert line.get("verdict") == "passed" and "limits_capped" not in line, line


# -- 6. /run_jupyter's output ----------------------------------------------------------------------------------


def test_a_jupyter_answer_is_capped_as_a_job_is(server: Server) -> None:
    cells = [
        "print('x' * (2 << 20))",
        "import sys\nsys.stderr.write('e' * (2 << 20))",
        "from IPython.display import display\nfor _ in range(4): display({'text/plain': 'd' * 40000}, raw=True)",
        "raise ValueError('v' * (2 << 20))",
        "print('still')",
    ]
    answer = httpx.post(f"{server.url}/run_jupyter", json={"cells": cells}, headers={"X-API-KEY": API_KEY}, timeout=120)
    assert answer.status_code == 200 and answer.json()["status"] == "Success", answer.text[:500]
    assert len(answer.content) < 16 * 65536
    printed, written, displayed, raised, last = answer.json()["cells"]
    assert len(printed["stdout"].encode()) <= 65536 and len(written["stderr"].encode()) <= 65536
    assert 1 <= len(displayed["display"]) < 4
    assert raised["error"] and len(json.dumps(raised["error"])) <= 2 * 65536 + 1000
    assert last["stdout"] == "still\n" and "was cut" in answer.json()["message"]


# -- 7. uploads broken off --------------------------------------------------------------------------------

WRITERS = (
    "import os\nprint(sum(open(f'/proc/{p}/comm').read().strip() == 'cat' for p in os.listdir('/proc') if p.isdigit()))"
)


def test_an_upload_broken_off_leaves_nothing_running(server: Server) -> None:
    sandbox = e2b.Sandbox.create(api_key=API_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    try:
        served = psutil.Process(server.process.pid)
        descriptors = served.num_fds()
        head = (
            "POST /files?path=/home/user/upload HTTP/1.1\r\nHost: sandbox\r\n"
            f"E2b-Sandbox-Id: {sandbox.sandbox_id}\r\nX-Access-Token: {sandbox._envd_access_token}\r\n"
            "Content-Type: application/octet-stream\r\n"
        )
        for _ in range(4):
            # Half of what it announced, then gone.
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                client.sendall(f"{head}Content-Length: {1 << 20}\r\n\r\n".encode() + b"x" * (512 << 10))
                time.sleep(0.5)
            # Past the body limit, in chunks that announce no length: refused with 413 on the way.
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                client.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
                chunk = b"x" * (256 << 10)
                with contextlib.suppress(OSError):
                    for _ in range(16):
                        client.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                client.settimeout(30)
                assert b" 413 " in client.recv(4096).split(b"\r\n")[0]
        deadline = time.monotonic() + 30
        while (left := sandbox.commands.run(f'python3 -c "{WRITERS}"').stdout.strip()) != "0":
            assert time.monotonic() < deadline, f"{left} writers still waiting for the rest"
            time.sleep(0.5)
        while served.num_fds() > descriptors + 2:
            assert time.monotonic() < deadline, (descriptors, served.num_fds())
            time.sleep(0.5)
        # The sandbox takes whole uploads still.
        sandbox.files.write("/home/user/after", "whole")
        assert sandbox.files.read("/home/user/after") == "whole"
    finally:
        sandbox.kill()


# -- 8. malformed envd messages and names aimed at a 500 ------------------------------------------------------

MALFORMED = [
    ("/process.Process/SendSignal", {"process": {"pid": "abc"}}, "pid"),
    ("/process.Process/SendInput", {"process": "x"}, "process"),
    ("/process.Process/CloseStdin", {"process": {"tag": {"a": 1}}}, "tag"),
    ("/process.Process/Start", {"process": {"cmd": "ls", "cwd": 5}}, "cwd"),
    ("/process.Process/Start", {"process": {"cmd": "ls"}, "tag": {"a": 1}}, "tag"),
    ("/process.Process/Start", {"process": {"cmd": "ls", "envs": {"A": 1}}}, "envs"),
    ("/process.Process/Start", {"process": {"cmd": "ls", "envs": {"A=B": "c"}}}, "envs"),
    ("/process.Process/Start", {"process": {"cmd": "l\x00s"}}, "cmd"),
    ("/process.Process/Start", {"process": ["ls"]}, "process"),
    # A terminal's size: the kernel keeps 16 bits of each side, and none is 0.
    ("/process.Process/Start", {"process": {"cmd": "sh"}, "pty": {"size": {"rows": 0, "cols": 80}}}, "rows"),
    ("/process.Process/Start", {"process": {"cmd": "sh"}, "pty": {"size": {"rows": 24, "cols": 1 << 16}}}, "cols"),
    ("/process.Process/Update", {"process": {"pid": 1}, "pty": {"size": {"rows": -1, "cols": 1}}}, "rows"),
    ("/process.Process/Update", {"process": {"pid": 1}}, "pty"),
    ("/filesystem.Filesystem/ListDir", {"path": 7}, "path"),
    ("/filesystem.Filesystem/ListDir", {"path": "/", "depth": "deep"}, "depth"),
    ("/filesystem.Filesystem/Stat", {"path": "/tmp/\x00"}, "path"),
    ("/filesystem.Filesystem/Move", {"source": "a"}, "destination"),
    ("/filesystem.Filesystem/GetWatcherEvents", {"watcherId": {"x": 1}}, "watcherId"),
    ("/filesystem.Filesystem/CreateWatcher", {"path": "/tmp", "recursive": "maybe"}, "recursive"),
]


def test_malformed_envd_messages_are_invalid_arguments(server: Server) -> None:
    sandbox = e2b.Sandbox.create(api_key=API_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    try:
        token = sandbox._envd_access_token
        for path, message, field in MALFORMED:
            answer = data_plane(server, path, sandbox.sandbox_id, token, message)
            assert answer.status_code == 400, (path, message, answer.status_code, answer.text[:300])
            assert answer.json()["code"] == "invalid_argument" and field in answer.json()["message"], answer.text
        streamed = httpx.post(
            f"{server.url}/process.Process/StreamInput",
            content=envelope({"start": "x"}),
            headers={
                "E2b-Sandbox-Id": sandbox.sandbox_id,
                "X-Access-Token": token,
                "Content-Type": "application/connect+json",
            },
            timeout=30,
        )
        assert streamed.status_code == 200 and b"invalid_argument" in streamed.content
        nul = data_plane(server, "/files?path=/tmp/a%00b", sandbox.sandbox_id, token)
        assert nul.status_code == 400, nul.text

        # Names the sandbox's user made: not UTF-8, quotes, a line break. Listed with U+FFFD
        # where bytes are not UTF-8, as envd writes them; downloaded under an encoded name.
        sandbox.commands.run(
            'mkdir -p odd && cd odd && touch "$(printf \'a\\377b\')" && touch "$(printf \'q\\"\\nr\')"'
        )
        listed = data_plane(server, "/filesystem.Filesystem/ListDir", sandbox.sandbox_id, token, {"path": "odd"})
        assert listed.status_code == 200, listed.text
        names = sorted(entry["name"] for entry in listed.json()["entries"])
        assert names == ["a\ufffdb", 'q"\nr'], names
        odd = data_plane(server, "/files?path=/home/user/odd/q%22%0Ar", sandbox.sandbox_id, token)
        assert odd.status_code == 200 and odd.headers["content-disposition"] == "inline; filename*=utf-8''q%22%0Ar"
    finally:
        sandbox.kill()


# -- found on reading the server again: what a tenant could make the server keep -----------------------------


def test_what_a_client_makes_the_server_keep_is_bounded(server: Server) -> None:
    key = {"X-API-KEY": API_KEY}
    huge = {"templateID": "base", "metadata": {"k": "v" * (64 * 1024 + 1)}}
    refused = httpx.post(f"{server.url}/sandboxes", json=huge, headers=key, timeout=30)
    assert refused.status_code == 400 and "metadata" in refused.json()["message"]
    sandbox = e2b.Sandbox.create(api_key=API_KEY, api_url=server.url, sandbox_url=server.url, timeout=120)
    try:
        token = sandbox._envd_access_token
        created = [data_plane(server, "/contexts", sandbox.sandbox_id, token, {}) for _ in range(MAX_CONTEXTS)]
        assert all(answer.status_code == 200 for answer in created)
        one_more = data_plane(server, "/contexts", sandbox.sandbox_id, token, {})
        assert one_more.status_code == 429 and "code contexts are open" in one_more.json()["message"]
    finally:
        sandbox.kill()
