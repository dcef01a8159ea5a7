"""The engine's lifecycle against a real Docker daemon: runs, sandboxes, ownership, cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import docker
import pytest
from sandboxes import OCI, OCI_SANDBOXES

from engine import (
    Engine,
    ImageNotFound,
    Limits,
    Outcome,
    Settings,
    StdinTest,
    Submission,
    SyncEngine,
    Verdict,
)
from engine.runtime import DockerRuntime, OciRuntime
from engine.runtime._labels import MANAGED, OWNER, SESSION, Owner, run_dir

pytestmark = pytest.mark.docker


def ours(client: docker.DockerClient) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", client.api.containers(all=True, filters={"label": f"{MANAGED}=true"}))


def made_by(client: docker.DockerClient, pid: int) -> list[dict[str, Any]]:
    """Ours made by the engines of process ``pid``: another part of the suite runs beside this
    one, and its containers are its own to count."""
    return [c for c in ours(client) if c["Labels"].get(OWNER, "").split(":")[1:2] == [str(pid)]]


@pytest.fixture
def client() -> Iterator[docker.DockerClient]:
    c = docker.from_env(version="auto")
    yield c
    c.close()


@pytest.mark.anyio
async def test_the_warm_pool_serves_jobs_and_leaves_nothing(client: docker.DockerClient) -> None:
    async with Engine(Settings(pool_size=2)) as engine:
        assert (await engine.run("print(1)")).stdout == "1\n"
        with anyio.fail_after(30):
            while engine.pool.statistics().ready < 2:  # noqa: ASYNC110 - polling the pool's counters
                await anyio.sleep(0.05)
        assert (await engine.run("print(2)")).stdout == "2\n"
        stats = engine.pool.statistics()
        assert (stats.hits, stats.misses) == (1, 1)
        assert "ready: " in repr(engine.pool)
    assert made_by(client, os.getpid()) == []


@pytest.mark.anyio
async def test_async_run_and_cleanup(client: docker.DockerClient) -> None:
    async with Engine() as engine:
        results = []

        async def one(n: int) -> None:
            results.append(await engine.run(f"print({n} * {n})"))

        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(one, n)
    assert sorted(r.stdout for r in results) == ["0\n", "1\n", "4\n", "9\n"]
    assert all(r.outcome is Outcome.OK for r in results)
    assert made_by(client, os.getpid()) == []


@pytest.mark.anyio
async def test_cancelling_a_run_removes_its_container_and_frees_its_thread(client: docker.DockerClient) -> None:
    async with Engine(Settings(pool_size=0)) as engine:
        with anyio.move_on_after(3):
            await engine.run("import time\ntime.sleep(60)", limits=Limits(wall_time_s=60))
        runtime = engine.runtime
        assert isinstance(runtime, DockerRuntime)
        # Removal happens in the background, off the job's path; it must not take long.
        with anyio.fail_after(10):
            while made_by(client, os.getpid()) or runtime.statistics()["streams"]:  # noqa: ASYNC110 - polling outside state
                await anyio.sleep(0.05)


def test_sync_facade(engine: SyncEngine) -> None:
    result = engine.run("import sys\nprint(sys.stdin.read().upper())", stdin="shout")
    assert result.outcome is Outcome.OK and result.stdout == "SHOUT\n"
    usage = result.usage
    assert usage.peak_memory_kb and usage.peak_memory_kb > 1000
    assert usage.cpu_time_s is not None and usage.wall_time_s and usage.wall_time_s > 0


def test_exit_status_and_signal_are_reported(engine: SyncEngine) -> None:
    assert engine.run("import sys\nsys.exit(3)").exit_code == 3
    killed = engine.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert killed.outcome is Outcome.RUNTIME_ERROR and killed.signal == signal.SIGSEGV


def test_binary_and_unicode_output_survive(engine: SyncEngine) -> None:
    result = engine.run("import sys\nprint('héllo ✓')\nsys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff\\n')")
    assert result.stdout == "héllo ✓\n\ufffd\n"


@pytest.mark.anyio
async def test_sandbox_keeps_state_between_commands(client: docker.DockerClient) -> None:
    async with Engine() as engine, engine.sandbox() as sandbox:
        await sandbox.write_file("/tmp/data.txt", b"forty-two")
        assert await sandbox.read_file("/tmp/data.txt") == b"forty-two"
        result = await sandbox.exec(["python3", "-c", "print(open('/tmp/data.txt').read().upper())"])
        assert result.outcome is Outcome.OK and result.stdout == "FORTY-TWO\n"
        slow = await sandbox.exec(["sleep", "30"], time_s=1)
        assert slow.outcome is Outcome.TIMEOUT
        # Its programs may serve on its loopback, the one interface it has.
        network = await sandbox.exec(["sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"])
        assert network.outcome is Outcome.OK and network.stdout == "lo\n", network
        with pytest.raises(OSError):
            await sandbox.write_file("/etc/passwd", b"x")
        sandbox_id = sandbox.id
    assert sandbox_id not in {c["Id"] for c in ours(client)}


def test_the_sync_facade_streams_results_and_holds_sandboxes(engine: SyncEngine, client: docker.DockerClient) -> None:
    submissions = [
        Submission(
            id=str(n), code="print(int(input()) + 1)", tests=[StdinTest(input=str(n), expected_output=str(n + 1))]
        )
        for n in range(3)
    ]
    with engine.judging(submissions) as results:
        pairs = sorted((index, result.id, result.verdict) for index, result in results)
    assert pairs == [(n, str(n), Verdict.PASSED) for n in range(3)]
    with engine.sandbox() as sandbox:
        sandbox.write_file("/tmp/note", b"kept")
        assert sandbox.read_file("/tmp/note") == b"kept"
        assert sandbox.exec(["cat", "/tmp/note"]).stdout == "kept"
        sandbox_id = sandbox.id
    assert sandbox_id not in {c["Id"] for c in ours(client)}


def test_leftovers_of_dead_engines_are_swept_and_live_ones_kept(client: docker.DockerClient) -> None:
    """Without a lease to read, a pid proves an owner gone only in the namespace it was taken in."""
    image = str(client.images.list(name="airlock/python")[0].id)
    namespace = os.stat("/proc/self/ns/pid").st_ino
    host = os.uname().nodename
    dead = client.containers.create(image, labels={MANAGED: "true", OWNER: f"{host}:999999:1.000:{namespace}"})
    elsewhere = client.containers.create(image, labels={MANAGED: "true", OWNER: f"{host}:999999:1.000:1"})
    unknown = client.containers.create(image, labels={MANAGED: "true", OWNER: f"{host}:999999:1.000"})
    alive_owner = Owner()
    alive = client.containers.create(image, labels=alive_owner.labels("job"))
    try:
        with SyncEngine():
            pass
        remaining = {c["Id"] for c in ours(client)}
        assert dead.id not in remaining
        assert {alive.id, elsewhere.id, unknown.id} <= remaining
    finally:
        alive_owner.release()
        for container in (dead, elsewhere, unknown, alive):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


# An engine that opens (removing what it takes for left over) and closes.
OPEN_AND_CLOSE = "from engine import SyncEngine, Settings\nwith SyncEngine(Settings(pool_size=0)):\n    pass"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_an_engine_removes_only_what_provably_dead_engines_left(client: docker.DockerClient) -> None:
    """Engines in pid namespaces of their own (a server in a container) share the host: one that
    cannot see another's process must not take it for dead. Leases prove it either way."""
    script = textwrap.dedent("""
        from engine import SyncEngine, Limits, Settings
        with SyncEngine(Settings(pool_size=0)) as engine:
            engine.run("import time; time.sleep(120)", limits=Limits(wall_time_s=120))
    """)

    def in_new_namespace(*argv: str) -> subprocess.Popen[bytes]:
        # The namespace's pid 1 dies with unshare, however unshare dies.
        command = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", sys.executable, *argv]
        return subprocess.Popen(command)

    before = {c["Id"] for c in ours(client)}
    owner = in_new_namespace("-c", script)

    def left_by_it() -> list[dict[str, Any]]:
        return [c for c in ours(client) if c["Id"] not in before and c["Labels"].get(OWNER, "").split(":")[1] == "1"]

    try:
        deadline = time.monotonic() + 60
        while not left_by_it():
            assert time.monotonic() < deadline, "the engine never started its container"
            time.sleep(0.2)
        (container,) = left_by_it()
        # Its owner is pid 1 of its own namespace: here, pid 1 is another process entirely.
        with SyncEngine(Settings(pool_size=0)):
            pass
        sibling = in_new_namespace("-c", OPEN_AND_CLOSE)
        assert sibling.wait(timeout=120) == 0
        assert [c["Id"] for c in left_by_it()] == [container["Id"]]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    lease = run_dir("owners") / container["Labels"][SESSION]
    assert lease.exists()
    # Its lease is released with it: an engine in yet another namespace proves it gone.
    cleaner = in_new_namespace("-c", OPEN_AND_CLOSE)
    assert cleaner.wait(timeout=120) == 0
    assert left_by_it() == [] and not lease.exists()


def test_a_killed_engine_leaves_nothing_after_the_next_start(client: docker.DockerClient) -> None:
    script = textwrap.dedent("""
        from engine import SyncEngine, Limits
        with SyncEngine() as engine:
            engine.run("import time; time.sleep(120)", limits=Limits(wall_time_s=120))
    """)
    process = subprocess.Popen([sys.executable, "-c", script])

    def left_by_it() -> list[dict[str, Any]]:
        return made_by(client, process.pid)

    try:
        deadline = time.monotonic() + 60
        while not left_by_it():
            assert time.monotonic() < deadline, "the engine never started its container"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert left_by_it(), "the killed engine should have left its containers behind"
    # The daemon may still be carrying out what the engine asked before it died (under load, a
    # start it had sent began 0.6 s after the kill, after the next engine's sweep): what the
    # dead engine leaves is known once the daemon's view of it stops changing.
    settled, seen, deadline = time.monotonic(), None, time.monotonic() + 30
    while time.monotonic() - settled < 2 and time.monotonic() < deadline:
        now = sorted((c["Id"], c["State"]) for c in left_by_it())
        if now != seen:
            settled, seen = time.monotonic(), now
        time.sleep(0.2)
    with SyncEngine():
        pass
    assert left_by_it() == []


@pytest.mark.parametrize(("ending", "status"), [("pass", 0), ("raise SystemExit(3)", 3), ("1 / 0", 1)])
def test_a_program_that_never_closes_its_engine_still_exits_and_leaves_nothing(
    client: docker.DockerClient, ending: str, status: int
) -> None:
    """An engine left open, by an error or by forgetting ``close``, closes at the interpreter's
    exit: before, the portal's clean-up then waited for its stopped loop for ever."""
    script = textwrap.dedent(f"""
        from engine import SyncEngine
        engine = SyncEngine()
        sandbox = engine.create_sandbox()
        print(sandbox.id, flush=True)
        {ending}
    """)
    try:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the program did not exit")
    assert run.returncode == status, run.stderr[-2000:]
    assert run.stdout.strip(), run.stderr[-2000:]
    assert run.stdout.strip() not in {c["Id"] for c in ours(client)}


def test_missing_image_names_the_remedy() -> None:
    with (
        pytest.raises(ImageNotFound, match="airlock images build"),
        SyncEngine(Settings(debian_mirror="http://mirror.invalid/debian")) as engine,
    ):
        engine.run("print(1)")


@pytest.mark.anyio
async def test_unpacked_images_of_removed_builds_are_removed_and_nothing_else() -> None:
    async with Engine(OCI.require().settings(pool_size=0)) as engine:
        await engine.prepare("python")
        runtime = engine.runtime
        assert isinstance(runtime, OciRuntime)
        images = runtime._state / "images"
        current = {folder.name for folder in images.iterdir()}
        stale, unpacking = images / "0123456789abcdef01234567", images / "0123456789abcdef01234567.ab12cd34"
        for folder in (stale, unpacking):
            (folder / "rootfs").mkdir(parents=True)
        try:
            assert await runtime.remove_stale_images() == [stale.name]
            assert {folder.name for folder in images.iterdir()} == current | {unpacking.name}
            assert (await engine.run("print('still runs')")).stdout == "still runs\n"
        finally:
            shutil.rmtree(stale, ignore_errors=True)
            shutil.rmtree(unpacking, ignore_errors=True)


def test_an_engine_on_one_oci_binary_reaps_what_a_dead_one_on_the_other_left() -> None:
    """Each bundle names the binary that runs it: a runc engine stops and deletes what a killed
    crun engine left running (its state is crun's, not runc's)."""
    dead, reaper = (kind.require() for kind in OCI_SANDBOXES)
    assert dead.oci_binary is not None
    dead_state = Path("/var/lib/airlock/oci", dead.oci_binary)
    script = textwrap.dedent(f"""
        from engine import SyncEngine, Limits, Settings
        with SyncEngine(Settings(runtime={dead.runtime!r}, oci_runtime={dead.oci_binary!r}, pool_size=0)) as engine:
            engine.run("import time; time.sleep(120)", limits=Limits(wall_time_s=120))
    """)
    bundles = Path("/var/lib/airlock/oci/bundles")
    process = subprocess.Popen([sys.executable, "-c", script])

    def left_by_it() -> list[Path]:
        found = []
        for bundle in bundles.glob("airlock-*"):
            with contextlib.suppress(OSError, ValueError):
                owner = json.loads((bundle / "labels.json").read_text()).get(OWNER, "")
                if owner.split(":")[1:2] == [str(process.pid)]:
                    found.append(bundle)
        return found

    try:
        deadline = time.monotonic() + 60
        while not (left := left_by_it()) or not (dead_state / left[0].name).exists():
            assert time.monotonic() < deadline, "the engine never started its container"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    (bundle,) = left_by_it()
    assert (bundle / "oci-runtime").read_text().endswith(dead.oci_binary)
    with SyncEngine(reaper.settings(pool_size=0)):
        pass
    assert left_by_it() == []
    assert not (dead_state / bundle.name).exists()
    assert subprocess.run(["pgrep", "-f", "time.sleep\\(120\\)"], capture_output=True).stdout == b""
