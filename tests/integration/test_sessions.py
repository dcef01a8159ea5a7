"""Long-lived sandboxes through the Python API: ids, time to live, the limit, streaming processes."""

from __future__ import annotations

import http.client
import signal
import time
from pathlib import Path

import anyio
import psutil
import pytest
from sandboxes import SESSION_SANDBOXES, Sandbox, ids

from engine import (
    Engine,
    FileEvent,
    FileEventType,
    SandboxError,
    SandboxLimitReached,
    SandboxNotFound,
    Settings,
    SyncEngine,
    SyncSandbox,
    Watcher,
)

pytestmark = pytest.mark.docker


@pytest.mark.anyio
async def test_sandboxes_live_by_id_expire_and_are_bounded() -> None:
    async with Engine(Settings(max_sandboxes=2, pool_size=0)) as engine:
        short = await engine.create_sandbox(timeout_s=1.5)
        kept = await engine.create_sandbox(timeout_s=120)
        assert engine.sandboxes.get(short.id) is short
        assert [s.id for s in engine.sandboxes.list()] == [short.id, kept.id]
        with pytest.raises(SandboxLimitReached, match="2 sandboxes are alive"):
            await engine.create_sandbox()
        with pytest.raises(ValueError, match="positive"):
            await engine.create_sandbox(timeout_s=0)
        await anyio.sleep(3)
        with pytest.raises(SandboxNotFound):
            engine.sandboxes.get(short.id)
        kept.set_timeout(0.5)
        assert kept.seconds_left <= 0.5
        kept.set_timeout(60)
        assert kept.seconds_left > 50
        # Room again: the expired one is gone.
        third = await engine.create_sandbox()
        assert await engine.sandboxes.kill(third.id) is True
        assert await engine.sandboxes.kill(third.id) is False


@pytest.mark.anyio
async def test_a_process_streams_takes_stdin_and_dies_with_its_session() -> None:
    async with Engine(Settings(pool_size=0)) as engine, engine.sandbox() as sandbox:
        echo = await sandbox.start(["sh", "-c", "while read line; do echo got $line; done"], stdin=True)
        with echo.subscribe() as output:
            echo.start()
            await echo.send_stdin(b"one\n")
            first = await output.receive()
            assert (first.stream, first.data) == ("stdout", b"got one\n")
            await echo.close_stdin()
        assert (await echo.wait()).exit_code == 0

        tree = await sandbox.start(["sh", "-c", "sleep 300 & sleep 300"])
        tree.start()
        await anyio.sleep(0.3)
        assert await tree.signal(signal.SIGTERM) is True
        ended = await tree.wait()
        assert ended.signal == signal.SIGTERM and ended.status == "signal: terminated"
        assert await tree.signal() is False
        left = await sandbox.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
        assert "300" not in left.stdout

        slow = await sandbox.start(["sleep", "300"], time_s=0.5)
        slow.start()
        assert (await slow.wait()).timed_out


def test_the_sync_facade_drives_sandboxes_and_processes() -> None:
    with SyncEngine(Settings(pool_size=0)) as engine:
        sandbox = engine.create_sandbox(timeout_s=60)
        assert engine.sandboxes.get(sandbox.id).id == sandbox.id
        sandbox.write_file("data/in.txt", iter([b"a", b"b", b"c"]))
        assert sandbox.read_file("~/data/in.txt") == b"abc"
        with sandbox.open_file("/home/user/data/in.txt") as chunks:
            assert b"".join(chunks) == b"abc"
        assert [e.name for e in sandbox.list_dir("data")] == ["in.txt"]
        assert sandbox.stat("data").type == "directory"
        with pytest.raises(FileExistsError):
            sandbox.make_dir("data")
        watcher = sandbox.watch("data")
        sandbox.move("data/in.txt", "out.txt")
        with pytest.raises(FileNotFoundError):
            sandbox.stat("data/in.txt")
        assert next(watcher.events()) == FileEvent(name="in.txt", type=FileEventType.RENAME)
        sandbox.remove("data")
        assert [event.name for event in watcher.events()] == ["."] and watcher.ended
        assert watcher.drain() == []
        watcher.stop()
        process = sandbox.start(["sh", "-c", "cat out.txt; echo; echo err >&2"])
        seen = [(chunk.stream, chunk.data) for chunk in process.output()]
        assert b"".join(d for s, d in seen if s == "stdout") == b"abc\n" and ("stderr", b"err\n") in seen
        assert process.wait().exit_code == 0
        started = time.monotonic()
        assert engine.sandboxes.kill(sandbox.id) is True
        assert time.monotonic() - started < 30
        assert engine.sandboxes.list() == []


async def _events_until(watcher: Watcher, last: tuple[str, str]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    with anyio.fail_after(20):
        async for event in watcher.events():
            seen.append((event.name, event.type.value))
            if seen[-1] == last:
                return seen
    raise AssertionError(f"the watcher ended before {last}: {seen}")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
async def test_a_watcher_sees_what_happens_under_its_directory(kind: Sandbox) -> None:
    kind.require()
    async with Engine(kind.settings(pool_size=0)) as engine:
        sandbox = await engine.create_sandbox(timeout_s=120)
        await sandbox.make_dir("w/deep")
        flat = await sandbox.watch("w")
        tree = await sandbox.watch("~/w", recursive=True)
        # Neither reader is one of the sandbox's processes: a client listing them sees its own.
        assert sandbox.running() == [] and set(sandbox.watchers) == {flat.id, tree.id}
        await sandbox.exec(["sh", "-c", "echo a > w/f; chmod 600 w/f; mv w/f w/g; echo b > w/deep/x; rm w/g"])
        happened = [("f", "create"), ("f", "write"), ("f", "chmod"), ("f", "rename"), ("g", "create")]
        assert await _events_until(flat, ("g", "remove")) == [*happened, ("g", "remove")]
        assert await _events_until(tree, ("g", "remove")) == [
            *happened,
            ("deep/x", "create"),
            ("deep/x", "write"),
            ("g", "remove"),
        ]
        # A directory made after the watch began is watched too, and what was put in it before
        # its watch was in place is reported as made (racing the real events, it may come twice).
        await sandbox.exec(["sh", "-c", "mkdir -p w/new/sub && echo c > w/new/sub/y"])
        made = await _events_until(tree, ("new/sub/y", "create"))
        assert made[0] == ("new", "create") and ("new/sub", "create") in made
        assert set(made) <= {("new", "create"), ("new/sub", "create"), ("new/sub/y", "create"), ("new/sub/y", "write")}
        await sandbox.exec(["sh", "-c", "echo d >> w/new/sub/y"])
        later = await _events_until(tree, ("new/sub/y", "write"))
        assert later[-1] == ("new/sub/y", "write") and all(name.startswith("new") for name, _ in later)
        # The flat watcher saw only its own level; polling drains what came, once.
        await anyio.sleep(0.5)
        assert flat.drain() == [FileEvent(name="new", type=FileEventType.CREATE)]
        assert flat.drain() == []
        await flat.stop()
        assert flat.id not in sandbox.watchers

        await sandbox.write_file("plain", b"")
        with pytest.raises(FileNotFoundError):
            await sandbox.watch("missing")
        with pytest.raises(NotADirectoryError):
            await sandbox.watch("plain")
        if kind.isolation == "runc":
            # gVisor's inotify lets anyone watch a directory they cannot read (only the image's
            # /root here, which holds nothing of anyone's).
            with pytest.raises(PermissionError):
                await sandbox.watch("/root")
        # The image names the container's uid: the user is `user`, as in E2B.
        assert (await sandbox.exec(["sh", "-c", "whoami; echo ~"])).stdout == "user\n/home/user\n"
        await engine.sandboxes.kill(sandbox.id)
        with anyio.fail_after(10):
            async for _ in tree.events():
                pass
        assert tree.ended


# Files of every kind in every writable place, with owners, modes and times that a pause to disk
# must keep; then what the sandbox sees of them, one line each.
FILES_TO_KEEP = r"""set -e
mkdir -p ~/project/empty /tmp/scratch
printf kept > ~/project/kept.txt
chmod 640 ~/project/kept.txt
touch -d '2001-02-03 04:05:06' ~/project/kept.txt
ln -s kept.txt ~/project/link
ln ~/project/kept.txt ~/project/hard
head -c 3000000 /dev/urandom > /tmp/scratch/random.bin
chmod 500 ~/project/empty
echo shm > /dev/shm/note
echo code > /code/note
"""
# The sandbox's user is a uid leased to each container: named, not numbered. (find's own stat,
# not stat(1): gVisor refuses the statx that stat(1) calls.)
WHAT_IS_THERE = (
    "find /home/user /tmp /dev/shm /code -mindepth 1 -printf '%p %m %U %G %n %s %T@ %y %l\\n' | sort"
    " | awk -v user=$(find /home/user -maxdepth 0 -printf %U)"
    ' \'{ if ($3 == user) $3 = "user"; if ($4 == user) $4 = "user"; $7 = int($7) } 1\';'
    " sha256sum /tmp/scratch/random.bin"
)


def _kept(sandbox: SyncSandbox) -> str:
    seen = sandbox.exec(["sh", "-c", WHAT_IS_THERE], user=sandbox.users[-1])
    assert seen.exit_code == 0 and seen.stderr == "" and "/home/user/project/kept.txt 640 user" in seen.stdout, seen
    return seen.stdout


@pytest.mark.parametrize("kind", SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
def test_a_sandbox_paused_to_disk_keeps_its_files_and_outlives_its_engine(kind: Sandbox, tmp_path: Path) -> None:
    settings = kind.require().settings(pool_size=0, paused_dir=tmp_path)
    with SyncEngine(settings) as engine:
        sandbox = engine.create_sandbox(timeout_s=120)
        assert sandbox.exec(["sh", "-c", FILES_TO_KEEP]).exit_code == 0
        if "root" in sandbox.users:
            assert sandbox.exec(["sh", "-c", "echo root > ~/by-root; chmod 600 ~/by-root"], user="root").exit_code == 0
        before = _kept(sandbox)
        sleeper = sandbox.start(["sleep", "1000"])
        sleeper.start()
        assert sandbox.container is not None
        uid = sandbox.container.uid
        assert engine.sandboxes.pause(sandbox.id, keep_memory=False) is True
        assert engine.sandboxes.pause(sandbox.id, keep_memory=False) is False  # paused already
        # Nothing of it runs, and its files are on disk, readable by no one else.
        assert sandbox.on_disk and sandbox.paused and sleeper.wait().exit_code in (None, 137)
        assert not [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{sandbox.id}.json", f"{sandbox.id}.tar"]
        assert {oct(p.stat().st_mode & 0o777) for p in [tmp_path, *tmp_path.iterdir()]} <= {"0o700", "0o600"}
        with pytest.raises(SandboxError, match="paused"):
            sandbox.exec(["true"])
        sample = sandbox.metrics()
        assert sample.mem_used == 0 and sample.disk_used > 3_000_000
        engine.sandboxes.set_timeout(sandbox.id, 90)
    # A new engine on the same directory takes it up, paused, with the time it had left.
    with SyncEngine(settings) as engine:
        (again,) = engine.sandboxes.list()
        assert (again.id, again.paused, again.metadata) == (sandbox.id, True, sandbox.metadata)
        assert 60 < again.seconds_left <= 90
        assert engine.sandboxes.resume(again.id) is True
        assert engine.sandboxes.resume(again.id) is False  # running already
        assert _kept(again) == before
        # It runs afresh: none of its processes came back, and it works as any sandbox does.
        assert "sleep\x001000" not in again.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline"]).stdout
        assert (
            again.exec(["sh", "-c", "echo more >> ~/project/kept.txt && cat ~/project/kept.txt"]).stdout == "keptmore\n"
        )
        assert list(tmp_path.iterdir()) == []
        # Again and again, with what it ran left waiting on its output each time: a descriptor
        # let go of under a waiting reader once made the next command fail.
        for round_number in range(5):
            again.start(["sh", "-c", "echo started; sleep 1000"]).start()
            assert engine.sandboxes.pause(again.id, keep_memory=False) is True
            assert engine.sandboxes.resume(again.id) is True
            assert again.exec(["echo", str(round_number)]).stdout == f"{round_number}\n"
        # Paused to disk and killed: its files go with it.
        assert engine.sandboxes.pause(again.id, keep_memory=False) is True
        assert engine.sandboxes.kill(again.id) is True
        assert list(tmp_path.iterdir()) == []


def test_a_sandbox_paused_to_disk_still_expires(tmp_path: Path) -> None:
    settings = Settings(pool_size=0, paused_dir=tmp_path)
    with SyncEngine(settings) as engine:
        sandbox = engine.create_sandbox(timeout_s=120)
        assert engine.sandboxes.pause(sandbox.id, keep_memory=False) is True
        engine.sandboxes.set_timeout(sandbox.id, 1)
        time.sleep(2)
        with pytest.raises(SandboxNotFound):
            engine.sandboxes.get(sandbox.id)
        assert list(tmp_path.iterdir()) == []
        kept = engine.create_sandbox(timeout_s=120)
        assert engine.sandboxes.pause(kept.id, keep_memory=False) is True
        engine.sandboxes.set_timeout(kept.id, 1)
    # One whose time ran out while no engine ran is removed when the next one starts.
    time.sleep(1.5)
    with SyncEngine(settings) as engine:
        assert engine.sandboxes.list() == []
        assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
def test_a_snapshot_starts_new_sandboxes_with_its_files_and_outlives_its_engine(kind: Sandbox, tmp_path: Path) -> None:
    settings = kind.require().settings(pool_size=0, paused_dir=tmp_path)
    with SyncEngine(settings) as engine:
        source = engine.create_sandbox(timeout_s=120, env={"FROM": "source"})
        assert source.exec(["sh", "-c", FILES_TO_KEEP]).exit_code == 0
        if "root" in source.users:
            assert source.exec(["sh", "-c", "echo root > ~/by-root; chmod 600 ~/by-root"], user="root").exit_code == 0
        before = _kept(source)
        # A process that writes all the while: stopped while the files are taken, then going on.
        counter = source.start(["sh", "-c", "while :; do echo tick >> /tmp/count; sleep 0.01; done"])
        counter.start()
        assert source.exec(["sh", "-c", "until [ -s /tmp/count ]; do sleep 0.1; done"], time_s=30).exit_code == 0
        taken = engine.sandboxes.snapshot(source.id, name="kept", metadata={"who": "test"})
        assert (taken.name, taken.source, taken.metadata) == ("kept", source.id, {"who": "test"})
        assert engine.sandboxes.snapshots() == [taken]
        assert not source.paused and counter.exit is None
        counts = [source.exec(["sh", "-c", "sleep 0.2; wc -l < /tmp/count"]).stdout for _ in range(2)]
        assert counts[0] != counts[1]  # it went on
        assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.rglob("*")} <= {"0o700", "0o600"}
        source.exec(["sh", "-c", "rm -rf ~/project; echo changed > /code/note"])
        engine.sandboxes.kill(source.id)
    # A new engine on the same directory keeps it; a sandbox made from it has the files and the
    # environment the source had then, and none of its processes.
    with SyncEngine(settings) as engine:
        assert engine.sandboxes.snapshots() == [taken]
        made = engine.create_sandbox(snapshot=taken.id, timeout_s=120, env={"MORE": "1"})
        assert _kept(made).replace(_count_line(made), "") == before
        assert made.exec(["sh", "-c", "echo $FROM $MORE"]).stdout == "source 1\n"
        assert "while :" not in made.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline"]).stdout
        other = engine.create_sandbox(snapshot=taken.id, timeout_s=120)
        made.exec(["sh", "-c", "echo mine > ~/project/kept.txt"])
        assert other.exec(["cat", "project/kept.txt"]).stdout == "kept"  # each its own copy
        assert engine.sandboxes.delete_snapshot(taken.id) is True
        assert engine.sandboxes.delete_snapshot(taken.id) is False
        assert made.exec(["cat", "project/kept.txt"]).stdout == "mine\n"  # deleting it takes nothing
        with pytest.raises(SandboxNotFound, match="no snapshot"):
            engine.create_sandbox(snapshot=taken.id)
        # Its files deleted by hand: refused by name, and deleting it takes its record too.
        lost = engine.sandboxes.snapshot(made.id)
        (tmp_path / "snapshots" / f"{lost.id}.tar").unlink()
        with pytest.raises(SandboxNotFound, match="is gone"):
            engine.create_sandbox(snapshot=lost.id)
        assert engine.sandboxes.delete_snapshot(lost.id) is True
        for sandbox in (made, other):
            engine.sandboxes.kill(sandbox.id)
        assert [p for p in tmp_path.rglob("*") if not p.is_dir()] == []


def _count_line(sandbox: SyncSandbox) -> str:
    """What WHAT_IS_THERE says of /tmp/count, whose size and time depend on when it was taken."""
    return next(line for line in _kept(sandbox).splitlines(keepends=True) if line.startswith("/tmp/count "))


def test_a_command_that_writes_before_its_answer_is_read_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loaded machine this process may read Docker's answer to an exec after the command has
    already written: its first frames (the pid line, or all its output and its end) then sit in the
    HTTP client's buffer, past the answer. A command run so keeps its pid and its whole output."""
    with SyncEngine(Settings(pool_size=0)) as engine:
        sandbox = engine.create_sandbox(timeout_s=60)
        answered = http.client.HTTPResponse.begin

        def read_late(response: http.client.HTTPResponse) -> None:
            time.sleep(0.5)
            answered(response)

        monkeypatch.setattr(http.client.HTTPResponse, "begin", read_late)
        process = sandbox.start(["sh", "-c", "echo at once; echo too >&2"])
        seen = [(chunk.stream, chunk.data) for chunk in process.output()]
        assert ("stdout", b"at once\n") in seen and ("stderr", b"too\n") in seen, seen
        assert process.wait().exit_code == 0
        monkeypatch.undo()
        engine.sandboxes.kill(sandbox.id)
