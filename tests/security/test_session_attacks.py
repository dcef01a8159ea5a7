"""The attacks that matter for a long-lived sandbox, made through its commands rather than a job:
what a session's user runs gets the same walls, one sandbox cannot reach another, and nothing
it starts outlives the sandbox."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import psutil
import pytest

from engine import (
    FileEvent,
    Limits,
    RuntimeUnavailable,
    SandboxError,
    SandboxLimitReached,
    SyncEngine,
    SyncSandbox,
    SyncWatcher,
    TerminalSize,
)
from engine.sandboxes._interpreter import MAX_LINE_BYTES, CellResult, CellText
from engine.sandboxes._watch import MAX_BUFFERED_EVENTS, MAX_NAME_CHARS, MAX_WATCHERS, WATCH_BUFFER_BYTES

pytestmark = pytest.mark.docker

SMALL = Limits(memory_mb=128, pids=64, wall_time_s=10, tmpfs_mb=16)
FORK_BOMB = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"


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


def processes_naming(container_id: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if container_id in " ".join(p.info["cmdline"] or ())]


def test_a_fork_bomb_is_held(engine: SyncEngine, session: SyncSandbox) -> None:
    started = time.monotonic()
    bomb = session.exec(["python3", "-c", FORK_BOMB], time_s=1.5)
    assert bomb.outcome.value in ("timeout", "runtime_error")

    # Killed at its deadline; where the bomb left no pid to run the kill with (gVisor), the
    # sandbox is ended instead: soon the sandbox either answers again or is gone.
    def alive() -> bool:
        return session.id in {s.id for s in engine.sandboxes.list()}

    usable = False
    while alive() and not usable and time.monotonic() - started < 30:
        try:
            usable = session.exec(["echo", "alive"], time_s=10).stdout == "alive\n"
        except SandboxError:  # no pid for the command yet: the bomb's end is under way
            time.sleep(0.5)
    if alive() and not usable:
        # The bomb's leader died of the memory limit before its deadline, leaving its forks to
        # hold every pid: the sandbox's limits hold them, and killing the sandbox ends them.
        assert engine.sandboxes.kill(session.id) is True
    assert time.monotonic() - started < 60


def test_a_command_killed_at_its_deadline_takes_what_it_started_along(session: SyncSandbox) -> None:
    """Every command leads a session of its own, whichever OCI runtime started it (crun starts an
    exec in its own session, runc in a new one): a child left in the background dies with it, and
    so do the jobs a shell on a terminal puts in process groups of their own."""
    result = session.exec(["sh", "-c", "sleep 600 & sleep 600"], time_s=1)
    assert result.outcome.value == "timeout"
    shell = session.start(["bash", "-i"], stdin=True, time_s=2, terminal=TerminalSize(rows=24, cols=80))
    shell.send_stdin(b"sleep 601 & sleep 602 & set -m; sleep 603 &\n")
    assert shell.wait().timed_out
    deadline = time.monotonic() + 10
    while "sleep 60" in (left := session.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"]).stdout):
        assert time.monotonic() < deadline, left
        time.sleep(0.2)


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
    "status": {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status") if ":" in l)},
}))
""",
    )
    assert isinstance(facts, dict)
    assert facts["uid"] != 0 and facts["setuid0"] is False and facts["docker_sock"] is False
    # A command is started apart from the container's main process (Docker's exec, the OCI
    # runtime's): it must get the same walls, not the runtime's defaults.
    status = facts["status"]
    assert {status["CapEff"], status["CapPrm"], status["CapBnd"]} == {"0000000000000000"}, status
    # gVisor's kernel shows neither (its filter is the host's, on gVisor itself).
    assert tier == "gvisor" or (status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"), status
    # Its own loopback (test_sandbox_loopback.py), where nothing listens on dockerd's port.
    assert facts["inet"] == "ECONNREFUSED"
    assert facts["etc"] in ("EROFS", "EACCES") and facts["root"] in ("EROFS", "EACCES")


def test_metrics_are_not_the_sandboxs_to_tell_or_to_stall(engine: SyncEngine) -> None:
    """CPU and memory come from the cgroup, outside; the file systems are measured inside by the
    image's own ``stat``, which a PATH of the user's choosing cannot replace. A sandbox whose
    pids are all taken gets a clean error, not a hung request."""
    try:
        sandbox = engine.create_sandbox(limits=SMALL, timeout_s=120, env={"PATH": "/home/user/bin:/usr/bin:/bin"})
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    try:
        sandbox.write_file("bin/stat", b"#!/bin/sh\necho 1 0 1\n")
        sandbox.exec(["chmod", "+x", "bin/stat"])
        assert sandbox.exec(["stat", "-f", "/tmp"]).stdout == "1 0 1\n"  # the user's own commands get it
        sandbox.write_file("filled", b"\0" * 3_000_000)
        measured = sandbox.metrics()
        assert 3_000_000 <= measured.disk_used < 4_000_000 and measured.disk_total >= 3 * (SMALL.tmpfs_mb << 20)
        sandbox.start(["sh", "-c", "while :; do sleep 60 & done"])
        time.sleep(2)
        started = time.monotonic()
        with contextlib.suppress(SandboxError):  # no pid for the probe: an error is as good as a sample
            sandbox.metrics()
        assert time.monotonic() - started < 30
    finally:
        engine.sandboxes.kill(sandbox.id)


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


def test_pausing_escapes_no_limit(engine: SyncEngine) -> None:
    """A paused sandbox's time to live runs on, and it is removed, frozen, with everything in it;
    a command whose time ran out while it was paused is killed when it runs again, and that
    costs the sandbox nothing."""
    try:
        sandbox = engine.create_sandbox(limits=SMALL, timeout_s=60)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    sleeper = sandbox.start(["sleep", "600"], time_s=1)
    sleeper.start()
    assert sandbox.pause() is True
    time.sleep(2)
    assert sandbox.resume() is True
    assert sleeper.wait().timed_out
    assert sandbox.exec(["echo", "alive"]).stdout == "alive\n"

    uid = int(sandbox.exec(["id", "-u"]).stdout)
    assert sandbox.container is not None
    container_id = sandbox.container.id
    sandbox.start(["sleep", "600"]).start()
    sandbox.set_timeout(2)
    assert sandbox.pause() is True

    # The container engine's own processes for it (a shim) count too: dockerd once gave up on a
    # paused gVisor sandbox after 10 s and left containerd's shim for it running.
    def alive() -> bool:
        return (
            sandbox.id in {s.id for s in engine.sandboxes.list()}
            or bool(host_processes(uid))
            or bool(processes_naming(container_id))
        )

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive()


def test_a_flood_of_output_is_cut_at_the_limit_and_stalls_nothing(session: SyncSandbox) -> None:
    """Past ``output_bytes`` a command is killed, however fast it writes: the kill is a command of
    its own, which output left unread held up (on Docker, for good)."""
    for _ in range(3):
        flood = session.exec(["sh", "-c", "head -c 100000000 /dev/zero; echo never"], time_s=30)
        assert flood.outcome.value == "output_limit" and flood.stdout_truncated, flood.outcome
        assert len(flood.stdout) == SMALL.output_bytes
    assert session.exec(["echo", "alive"]).stdout == "alive\n"


def kept_on_disk(engine: SyncEngine) -> list[str]:
    """The files in the engine's directory of paused sandboxes and snapshots (the suite gives every
    engine one: conftest)."""
    paused_dir = engine.settings.paused_dir
    assert paused_dir is not None
    return sorted(str(path.relative_to(paused_dir)) for path in paused_dir.rglob("*") if not path.is_dir())


# The two doors that write a sandbox's files to the host's disk.
TO_DISK = {
    "pause to disk": lambda engine, sandbox: engine.sandboxes.pause(sandbox.id, keep_memory=False),
    "snapshot": lambda engine, sandbox: engine.sandboxes.snapshot(sandbox.id),
}


@pytest.mark.parametrize("door", TO_DISK)
def test_the_files_written_to_disk_take_no_more_of_the_host_than_they_hold(
    engine: SyncEngine, session: SyncSandbox, door: str
) -> None:
    """Sparse files claim far more than their file system holds, and an archive of them would
    write all of it: a pause to disk or a snapshot is refused once the archive passes what the
    files hold, before the host's disk fills, and leaves nothing on disk; the sandbox runs on with
    its files."""
    # Each as large as the file size limit allows, and as many as it takes.
    sparse = 'for i in $(seq 200); do truncate -s "$(( $(ulimit -f) * 512 ))" ~/huge$i; done; echo small > ~/small'
    assert session.exec(["sh", "-c", sparse]).exit_code == 0
    with pytest.raises(SandboxError, match="larger than they are"):
        TO_DISK[door](engine, session)
    assert kept_on_disk(engine) == []
    assert not session.paused and session.exec(["cat", "small"]).stdout == "small\n"


def test_a_fork_bomb_leaves_a_pause_to_disk_whole_or_undone(engine: SyncEngine, session: SyncSandbox) -> None:
    """Every pid taken while its processes are ended: the pause either ends them all and keeps the
    files, or is refused and leaves nothing on disk; never a paused sandbox without its files."""
    session.write_file("kept.txt", b"kept")
    session.start(["python3", "-c", FORK_BOMB]).start()
    time.sleep(1)
    try:
        paused = engine.sandboxes.pause(session.id, keep_memory=False)
    except SandboxError as exc:
        assert kept_on_disk(engine) == [], exc
        assert not session.paused
    else:
        assert paused and session.on_disk
        assert kept_on_disk(engine) == [f"{session.id}.json", f"{session.id}.tar"]
        assert engine.sandboxes.resume(session.id) is True
        assert session.read_file("kept.txt") == b"kept"
    engine.sandboxes.kill(session.id)
    assert kept_on_disk(engine) == []


def test_a_fork_bomb_leaves_a_snapshot_whole_or_untaken_and_nothing_stopped(
    engine: SyncEngine, session: SyncSandbox
) -> None:
    """Every pid taken while its processes are stopped: the snapshot either stops them all and keeps
    the files, or is refused and leaves nothing on disk; either way every process goes on."""
    session.write_file("kept.txt", b"kept")
    session.start(["python3", "-c", FORK_BOMB]).start()
    time.sleep(1)
    try:
        taken = engine.sandboxes.snapshot(session.id)
    except SandboxError as exc:
        assert kept_on_disk(engine) == [], exc
    else:
        assert kept_on_disk(engine) == [f"snapshots/{taken.id}.json", f"snapshots/{taken.id}.tar"]
        made = engine.create_sandbox(snapshot=taken.id, limits=SMALL, timeout_s=60)
        assert made.read_file("kept.txt") == b"kept"
        engine.sandboxes.kill(made.id)
        assert engine.sandboxes.delete_snapshot(taken.id) is True
    assert not session.paused
    assert session.container is not None
    stopped = [p for p in host_processes(session.container.uid) if p.status() == psutil.STATUS_STOPPED]
    assert stopped == []
    engine.sandboxes.kill(session.id)
    assert kept_on_disk(engine) == []


# Its child waits, before it starts its program, on a pipe with no writer; the parent waits for
# the child, as a parent that made its child with vfork does (dash, posix_spawn).
HELD_BY_A_VFORK_CHILD = """import os
os.mkfifo("/tmp/held")
os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/tmp/held", os.O_RDONLY, 0)])
"""


def test_a_parent_held_by_its_vfork_child_neither_hangs_a_snapshot_nor_stays_stopped(
    engine: SyncEngine, session: SyncSandbox, tier: str
) -> None:
    """Such a parent sleeps uninterruptibly, and a stop cannot show on it while its child is
    stopped: a snapshot that waited to see it stopped hung until the sandbox expired. It is taken,
    and both go on once the child's pipe opens."""
    holder = session.start(["python3", "-c", HELD_BY_A_VFORK_CHILD])
    holder.start()
    assert session.exec(["sh", "-c", "until [ -p /tmp/held ]; do sleep 0.1; done"], time_s=20).exit_code == 0
    time.sleep(0.5)  # into the wait
    taken = engine.sandboxes.snapshot(session.id)
    assert kept_on_disk(engine) == [f"snapshots/{taken.id}.json", f"snapshots/{taken.id}.tar"]
    assert engine.sandboxes.delete_snapshot(taken.id) is True
    # Opened for reading and writing, a pipe waits for no one.
    assert session.exec(["sh", "-c", "exec 3<> /tmp/held"]).exit_code == 0
    # gVisor ends the child's wait for its pipe at the stop (EINTR: Linux would go on waiting),
    # which posix_spawn reports; the parent goes on all the same.
    assert holder.wait().exit_code == (1 if tier == "gvisor" else 0)
    engine.sandboxes.kill(session.id)


def test_a_user_writing_into_a_watchers_output_gets_nothing_unbounded(session: SyncSandbox) -> None:
    """The watcher runs as the sandbox's user, who may open its stdout through /proc and write
    forged events: the host keeps a bounded buffer of bounded names (their memory counted, empty
    names too), and nothing more. In a sandbox with a user namespace of its own the pipe is the
    host root's, whom the namespace does not map: there the open itself is refused."""
    session.exec(["mkdir", "-p", "watched"])
    watcher = session.watch("watched")
    forged = python(
        session,
        "import os, json\n"
        "pid = next(p for p in os.listdir('/proc') if p.isdigit()"
        " and b'watch.py' in open(f'/proc/{p}/cmdline', 'rb').read())\n"
        "try:\n"
        "    fd = os.open(f'/proc/{pid}/fd/1', os.O_WRONLY)\n"
        "except PermissionError:\n"
        "    print(json.dumps('refused'))\n"
        "    raise SystemExit\n"
        'line = (\'{"name": "\' + \'x\' * 4000 + \'", "type": "create"}\\n\').encode()\n'
        "for _ in range(1000): os.write(fd, line)\n"
        'os.write(fd, b\'{"name": "\' + b\'y\' * 100000 + b\'", "type": "create"}\\n\')\n'
        'os.write(fd, b\'{"name": "\' + b\'z\' * 5000 + b\'", "type": "create"}\\n\')\n'
        "print(json.dumps('written'))",
    )
    assert forged == "written" or (forged == "refused" and "root" in session.users)
    session.exec(["touch", "watched/real"])
    deadline = time.monotonic() + 20
    events: list[FileEvent] = []
    while not any(event.name == "real" for event in events) and time.monotonic() < deadline:
        time.sleep(0.2)
        events += watcher.drain()
    assert any(event.name == "real" for event in events), "the watcher stopped reporting"
    if forged == "written":
        _forged_events_stay_bounded(session, watcher, events)
    watchers = [session.watch("watched") for _ in range(MAX_WATCHERS - 1)]
    with pytest.raises(SandboxLimitReached, match="watchers are open"):
        session.watch("watched")
    for opened in [watcher, *watchers]:
        opened.stop()


def _forged_events_stay_bounded(session: SyncSandbox, watcher: SyncWatcher, events: list[FileEvent]) -> None:
    assert watcher.dropped > 0
    assert sum(len(event.name) for event in events) <= WATCH_BUFFER_BYTES + len("real")
    assert all(len(event.name) <= MAX_NAME_CHARS for event in events)
    # Events with empty names cost the host their slots: counted too, and bounded in number.
    flood = 200_000
    watcher.drain()
    dropped_before = watcher.dropped
    forged = python(
        session,
        "import os, json\n"
        "pid = next(p for p in os.listdir('/proc') if p.isdigit()"
        " and b'watch.py' in open(f'/proc/{p}/cmdline', 'rb').read())\n"
        "fd = os.open(f'/proc/{pid}/fd/1', os.O_WRONLY)\n"
        f'view = memoryview(b\'{{"name": "", "type": "chmod"}}\\n\' * {flood})\n'
        "while view: view = view[os.write(fd, view):]\n"
        "print(json.dumps('written'))",
    )
    assert forged == "written"
    session.exec(["touch", "watched/after-flood"])
    flooded: list[FileEvent] = []
    deadline = time.monotonic() + 60
    while not any(event.name == "after-flood" for event in flooded) and time.monotonic() < deadline:
        time.sleep(0.5)
        drained = watcher.drain()
        assert len(drained) <= MAX_BUFFERED_EVENTS
        flooded += drained
    assert any(event.name == "after-flood" for event in flooded), "the watcher stopped reporting"
    assert watcher.dropped - dropped_before >= flood - 2 * MAX_BUFFERED_EVENTS


def test_a_line_of_tens_of_megabytes_from_the_code_interpreter_is_read_once(engine: SyncEngine) -> None:
    """The sandbox's user writes into the code interpreter's output: a line of 40 MiB arrives
    whole (read in time linear in its length: tests/unit/test_capture.py), one past the line
    limit is dropped whole, and the context goes on."""
    try:
        sandbox = engine.create_sandbox(limits=Limits(memory_mb=1024, tmpfs_mb=16, wall_time_s=60), timeout_s=180)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    try:
        printed = "".join(
            event.text
            for event in sandbox.run_code("print('x' * (40 << 20), end='')", time_s=120)
            if isinstance(event, CellText)
        )
        assert len(printed) == 40 << 20
        # The cell's own code writes raw lines into the interpreter's report: 40 MiB of junk, and
        # a line past the limit. Neither is an event; the context goes on.
        for size in (40 << 20, MAX_LINE_BYTES + 1):
            raw = f"out = sys.stdout._channel._out\nout.write('y' * {size})\nout.write('\\n')\nout.flush()"
            events = list(sandbox.run_code(f"import sys\n{raw}", time_s=120))
            assert not any(isinstance(event, CellText) for event in events), events[:3]
            assert [e.data["text/plain"] for e in sandbox.run_code("6 * 7") if isinstance(e, CellResult)] == ["42"]
    finally:
        engine.sandboxes.kill(sandbox.id)
