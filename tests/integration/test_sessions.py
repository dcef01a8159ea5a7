"""Long-lived sandboxes through the Python API: ids, time to live, the limit, streaming processes."""

from __future__ import annotations

import signal
import time

import anyio
import pytest

from engine import Engine, SandboxLimitReached, SandboxNotFound, Settings, SyncEngine

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
        sandbox.move("data/in.txt", "out.txt")
        with pytest.raises(FileNotFoundError):
            sandbox.stat("data/in.txt")
        sandbox.remove("data")
        process = sandbox.start(["sh", "-c", "cat out.txt; echo; echo err >&2"])
        seen = [(chunk.stream, chunk.data) for chunk in process.output()]
        assert b"".join(d for s, d in seen if s == "stdout") == b"abc\n" and ("stderr", b"err\n") in seen
        assert process.wait().exit_code == 0
        started = time.monotonic()
        assert engine.sandboxes.kill(sandbox.id) is True
        assert time.monotonic() - started < 30
        assert engine.sandboxes.list() == []
