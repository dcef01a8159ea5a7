"""Test doubles and a conformance kit for runtimes.

``FakeRuntime`` lets logic above the runtime seam (the engine's slots, retries, deadlines,
judging, compat layers) be tested without containers: each "container" is the real harness run
as a local process. **It isolates nothing**: use it only on code you trust, in tests. Knobs make
it misbehave the way real runtimes can (refuse to create, never end a job, never finish a
removal).

``check_runtime`` holds the behaviour every runtime must show, present and future; the suite
runs it against ``FakeRuntime`` and against every real runtime the machine offers::

    await check_runtime(lambda: DockerRuntime(owner, uids), image)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import anyio
import anyio.abc

from ._errors import SandboxError
from ._limits import Limits
from ._settings import Isolation
from .harness.protocol import PROTOCOL_VERSION
from .runtime import ContainerRef, ContainerSpec, Exchange, LineSink, MoreInput, Runtime, RuntimeInfo
from .runtime._base import send_all
from .runtime._capture import Capture
from .runtime._labels import SESSION, Owner
from .runtime._policy import Policy, Purpose

__all__ = ["FakeRuntime", "check_runtime"]

_HARNESS = Path(__file__).resolve().parent / "harness"


class _Local:
    """A fake container: the harness as a local process, in a folder of its own."""

    def __init__(self, process: anyio.abc.Process, folder: Path, labels: Mapping[str, str]) -> None:
        self.process = process
        self.folder = folder
        self.labels = dict(labels)


class FakeRuntime(Runtime):
    """Runs the harness as local processes: no container, **no isolation**. For tests only.

    :param images: the image tags it has (their content is always the harness).
    :param refuse_creates: every ``create`` fails, as a daemon that is gone.
    :param wedge_jobs: ``communicate`` never returns, as a runtime that ignores its deadline.
    :param wedge_removals: ``remove`` never returns.
    """

    name = "fake"

    def __init__(
        self,
        *,
        images: Iterable[str] = ("fake",),
        refuse_creates: bool = False,
        wedge_jobs: bool = False,
        wedge_removals: bool = False,
    ) -> None:
        self.images = set(images)
        self.refuse_creates = refuse_creates
        self.wedge_jobs = wedge_jobs
        self.wedge_removals = wedge_removals
        self.created: list[str] = []
        self.removed: list[str] = []
        self.removals_started = 0
        self._running: dict[str, _Local] = {}
        self._numbers = itertools.count()

    async def open(self) -> None:
        pass

    async def prepare(self, image: str, announce: Callable[[str], None] = lambda message: None) -> None:
        pass

    async def create(self, spec: ContainerSpec) -> ContainerRef:
        if self.refuse_creates:
            raise SandboxError("the fake runtime refuses to create containers")
        container_id = f"fake-{next(self._numbers)}"
        folder = Path(tempfile.mkdtemp(prefix="airlock-fake-"))
        launcher = f"import sys; sys.path.insert(0, {str(folder)!r}); from harness.harness import main; main()"
        shutil.copytree(_HARNESS, folder / "harness", ignore=shutil.ignore_patterns("__pycache__"))
        (folder / "tmp").mkdir()
        process = await anyio.open_process(
            [sys.executable, "-I", "-c", launcher], env={"TMPDIR": str(folder / "tmp"), "PATH": "/usr/bin:/bin"}
        )
        self._running[container_id] = _Local(process, folder, spec.labels)
        self.created.append(container_id)
        return ContainerRef(id=container_id, spec=spec, uid=0)

    async def communicate(
        self,
        container: ContainerRef,
        request: bytes,
        *,
        deadline_s: float,
        stdout_limit: int,
        stderr_limit: int,
        on_stdout_line: LineSink | None = None,
        more_input: MoreInput | None = None,
    ) -> Exchange:
        if self.wedge_jobs:
            await anyio.sleep_forever()
        local = self._running.get(container.id)
        if local is None:
            raise SandboxError(f"container {container.id} is not running")
        process = local.process
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        started = time.monotonic()
        capture = Capture(stdout_limit, stderr_limit, on_stdout_line)
        stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

        async def feed() -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await send_all(request, more_input, stdin.send)
            await stdin.aclose()

        async def drain(stream: anyio.abc.ByteReceiveStream, into: Callable[[bytes], None]) -> None:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                while not capture.done:
                    into(await stream.receive(1 << 16))

        ended = False
        with anyio.move_on_after(deadline_s):
            async with anyio.create_task_group() as group:
                group.start_soon(feed)
                group.start_soon(drain, stderr, capture.feed_stderr)
                await drain(stdout, capture.feed_stdout)
                group.cancel_scope.cancel()
            ended = not capture.done
        if capture.stopped:
            return capture.exchange(started, timed_out=False, exit_code=None)
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with anyio.move_on_after(10):
            await process.wait()
        return capture.exchange(started, timed_out=not ended and not capture.done, exit_code=process.returncode)

    async def remove(self, container: ContainerRef) -> None:
        self.removals_started += 1
        if self.wedge_removals:
            await anyio.sleep_forever()
        await self._discard(container.id)
        self.removed.append(container.id)

    async def _discard(self, container_id: str) -> None:
        local = self._running.pop(container_id, None)
        if local is not None:
            with contextlib.suppress(ProcessLookupError):
                local.process.kill()
            with anyio.CancelScope(shield=True):
                await local.process.wait()
                await local.process.aclose()
            await anyio.to_thread.run_sync(shutil.rmtree, local.folder, True)

    async def remove_leftovers(self, *, everything: bool = False, session: str | None = None) -> list[str]:
        stale = [
            container_id
            for container_id, local in self._running.items()
            if everything or (session is not None and local.labels.get(SESSION) == session)
        ]
        for container_id in stale:
            await self._discard(container_id)
        return stale

    async def list_ours(self) -> list[str]:
        return list(self._running)

    async def describe(self) -> RuntimeInfo:
        return RuntimeInfo(name=self.name, version="fake", isolations=frozenset({"runc"}), supports_exec=False)

    async def image_id(self, tag: str) -> str | None:
        return f"sha256:fake-{tag}" if tag in self.images else None

    async def aclose(self) -> None:
        # A real runtime leaves its containers to the engine; a test's processes must not outlive it.
        for container_id in list(self._running):
            await self._discard(container_id)


# -- the conformance kit ---------------------------------------------------------------------------


def _request(code: str, *, time_limit_s: float = 5.0) -> bytes:
    document = {
        "protocol": PROTOCOL_VERSION,
        "mode": "script",
        "code": code,
        "tests": [{"stdin": ""}],
        "time_limit_s": time_limit_s,
        "wall_limit_s": time_limit_s,
        "compile_time_limit_s": 10,
        "compile_wall_limit_s": 21,
        "output_limit_bytes": 1 << 20,
    }
    return json.dumps(document).encode()


async def check_runtime(make: Callable[[], Runtime], image: str, isolation: Isolation = "runc") -> None:
    """Assert what every runtime must do; raise ``AssertionError`` naming what it does not.

    ``make`` builds a fresh runtime; ``image`` is a built image whose entrypoint is the harness;
    ``isolation`` the tier to check it under.
    """
    runtime = make()
    owner = Owner()
    await runtime.open()
    try:
        info = await runtime.describe()
        assert isinstance(info, RuntimeInfo) and info.name == runtime.name and isolation in info.isolations
        assert await runtime.image_id(f"{image}-that-does-not-exist") is None
        spec = ContainerSpec(image=image, policy=Policy.for_purpose(Limits(), isolation), labels=owner.labels("check"))

        # A job: one request in, the harness's report out, line by line, ending by itself.
        container = await runtime.create(spec)
        assert container.id in await runtime.list_ours()
        lines: list[bytes] = []

        def sink(line: bytes) -> bool:
            lines.append(line)
            return bool(json.loads(line).get("type") == "done")

        exchange = await runtime.communicate(
            container,
            _request("print('conformance')"),
            deadline_s=60,
            stdout_limit=1 << 20,
            stderr_limit=1 << 16,
            on_stdout_line=sink,
        )
        frames = [json.loads(line) for line in lines]
        assert [frame["type"] for frame in frames] == ["hello", "test", "done"], frames
        assert frames[1]["stdout"] == "conformance\n" and not exchange.timed_out
        await runtime.remove(container)
        await runtime.remove(container)  # removing twice is not an error
        assert container.id not in await runtime.list_ours()

        # A deadline: a container that never reports is ended and says so.
        container = await runtime.create(spec)
        exchange = await runtime.communicate(
            container,
            _request("import time\ntime.sleep(60)", time_limit_s=60),
            deadline_s=2,
            stdout_limit=1 << 20,
            stderr_limit=1 << 16,
        )
        assert exchange.timed_out, exchange
        await runtime.remove(container)

        # A byte cap: a stream past its limit stops the reading.
        container = await runtime.create(spec)
        exchange = await runtime.communicate(
            container, _request("print('x' * 100000)"), deadline_s=60, stdout_limit=1000, stderr_limit=1 << 16
        )
        assert exchange.stdout_truncated and len(exchange.stdout) <= 1000, exchange.stdout_truncated
        await runtime.remove(container)

        # An engine's session: what it left is found and removed by its label.
        leftover = await runtime.create(spec)
        removed = await runtime.remove_leftovers(session=owner.session)
        assert leftover.id in removed and leftover.id not in await runtime.list_ours()

        if info.supports_exec:
            sandbox = Policy.for_purpose(Limits(), isolation, Purpose.SANDBOX)
            container = await runtime.create(spec.model_copy(update={"policy": sandbox}))
            try:
                command = await runtime.spawn(container, ["sh", "-c", "cat; echo done >&2"], workdir="/", env={})
                await command.send(b"in ")
                await command.close_input()
                received: dict[str, bytes] = {"stdout": b"", "stderr": b""}
                while (chunk := await command.receive()) is not None:
                    received[chunk[0]] += chunk[1]
                assert received == {"stdout": b"in ", "stderr": b"done\n"}, received
                assert await command.exit_code() == 0
                await command.aclose()
            finally:
                await runtime.remove(container)
    finally:
        with contextlib.suppress(Exception):
            await runtime.remove_leftovers(session=owner.session)
            owner.release()
        await runtime.aclose()
