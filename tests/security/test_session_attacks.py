"""The attacks that matter for a long-lived sandbox, made through its commands rather than a job:
what a session's user runs gets the same walls, one sandbox cannot reach another, and nothing
it starts outlives the sandbox."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import psutil
import pytest

from engine import Limits, RuntimeUnavailable, SyncEngine, SyncSandbox

pytestmark = pytest.mark.docker

SMALL = Limits(memory_mb=128, pids=64, wall_time_s=10, tmpfs_mb=16)


@pytest.fixture
def session(engine: SyncEngine) -> Iterator[SyncSandbox]:
    try:
        sandbox = engine.create_sandbox(limits=SMALL, timeout_s=120)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    yield sandbox
    engine.sandboxes.kill(sandbox.id)


def python(sandbox: SyncSandbox, code: str, time_s: float = 20) -> object:
    result = sandbox.exec(["python3", "-c", code], time_s=time_s)
    assert result.stdout, result
    return json.loads(result.stdout.splitlines()[-1])


def host_processes(uid: int) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]


def test_a_fork_bomb_is_held(engine: SyncEngine, session: SyncSandbox) -> None:
    started = time.monotonic()
    bomb = session.exec(
        ["python3", "-c", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"], time_s=3
    )
    assert bomb.outcome.value in ("timeout", "runtime_error")
    # Killed at its deadline; where the bomb left no pid to run the kill with (gVisor), the
    # sandbox was ended instead, within the kill's grace: never left running.
    if session.id in {s.id for s in engine.sandboxes.list()}:
        assert session.exec(["echo", "alive"], time_s=10).stdout == "alive\n"
    assert time.monotonic() - started < 30


def test_the_walls_of_a_job_hold_for_a_command(session: SyncSandbox, tier: str) -> None:
    facts = python(
        session,
        """
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def refused(fn):
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def write(path):
    with open(path, "w") as f:
        f.write("x")
print(json.dumps({
    "uid": os.getuid(),
    "inet": refused(lambda: socket.create_connection(("127.0.0.1", 2375), timeout=2)),
    "etc": refused(lambda: write("/etc/passwd")),
    "root": refused(lambda: write("/x")),
    "setuid0": libc.setuid(0) == 0,
    "docker_sock": os.path.exists("/var/run/docker.sock"),
}))
""",
    )
    assert isinstance(facts, dict)
    assert facts["uid"] != 0 and facts["setuid0"] is False and facts["docker_sock"] is False
    assert facts["inet"] in ({"EAFNOSUPPORT"} if tier == "runc" else {"ECONNREFUSED", "EAFNOSUPPORT"})
    assert facts["etc"] in ("EROFS", "EACCES") and facts["root"] in ("EROFS", "EACCES")


def test_one_sandbox_cannot_reach_another(engine: SyncEngine, session: SyncSandbox) -> None:
    other = engine.create_sandbox(limits=SMALL, timeout_s=120)
    try:
        session.write_file("secret.txt", b"mine")
        holder = session.start(
            [
                "python3",
                "-c",
                "import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
                "s.bind('\\0airlock-session-leak')\ns.listen(1)\nprint('bound', flush=True)\ntime.sleep(60)",
            ]
        )
        output = holder.output()
        assert next(output).data == b"bound\n"
        seen = python(
            other,
            """
import glob, json, os, socket
marker = ("airlock-session-" + "leak").encode()  # built here, so that this probe's own argv lacks it
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(b"\\0" + marker)
    reached = True
except OSError:
    reached = False
names = [open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
print(json.dumps({"reached": reached, "files": glob.glob("/home/user/*") + glob.glob("/tmp/*"),
                  "their_process": any(marker in n for n in names)}))
""",
        )
        assert seen == {"reached": False, "files": [], "their_process": False}
        holder.signal()
    finally:
        engine.sandboxes.kill(other.id)


def test_nothing_outlives_a_killed_sandbox(engine: SyncEngine, tier: str) -> None:
    try:
        sandbox = engine.create_sandbox(limits=SMALL, timeout_s=120)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    uid = int(sandbox.exec(["id", "-u"]).stdout)
    # A daemon of its own: a new session, hangups and terminations ignored, its output detached.
    sandbox.exec(
        ["sh", "-c", "nohup setsid sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 &"]
    )
    assert host_processes(uid) or tier == "gvisor"
    engine.sandboxes.kill(sandbox.id)
    deadline = time.monotonic() + 10
    while host_processes(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not host_processes(uid)
    assert sandbox.id not in {s.id for s in engine.sandboxes.list()}
