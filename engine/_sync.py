"""A blocking facade over :class:`Engine` for code that is not async.

One event loop runs in a background thread; every method hands its call to that loop, so
many threads can share one ``SyncEngine`` (and its limits on containers in flight). The facade
has every operation of the async API, under the same names and parameters.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import functools
import signal
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._engine import Engine, EngineStatistics, JobObserver
from ._limits import DEFAULT_LIMITS, Limits
from ._models import Language, RunResult
from ._settings import Settings
from ._submission import Submission, SubmissionResult
from .judge._protocol import HarnessRequest, HarnessRun
from .runtime import ContainerRef, ContainerUsage, Runtime, RuntimeInfo
from .runtime._policy import SANDBOX_USER
from .runtime._pool import WarmPool
from .sandboxes._interpreter import CellEvent, CodeContext
from .sandboxes._paused import SnapshotRecord
from .sandboxes._sandbox import Entry, Exit, Metrics, Output, PortStream, Process, Sandbox, TerminalSize
from .sandboxes._sessions import DEFAULT_TIMEOUT_S, Sessions
from .sandboxes._volumes import EntryStat, VolumeRecord, Volumes
from .sandboxes._watch import FileEvent, Watcher

__all__ = [
    "SyncEngine",
    "SyncProcess",
    "SyncSandbox",
    "SyncSessions",
    "SyncWatcher",
    "on_process_engine",
    "use_process_engine",
]


class SyncProcess:
    """A :class:`Process` driven by blocking calls."""

    def __init__(self, process: Process, portal: BlockingPortal) -> None:
        self._process = process
        self._portal = portal
        self.pid = process.pid
        self.command = process.command

    @property
    def exit(self) -> Exit | None:
        return self._process.exit

    def output(self) -> Iterator[Output]:
        """Its output from now on, as it comes (the first call also lets it flow)."""
        with self._process.subscribe() as stream:
            self._portal.call(self._process.start)
            while True:
                try:
                    yield self._portal.call(stream.receive)
                except anyio.EndOfStream:
                    return

    def start(self) -> None:
        """Let the output flow, with nobody listening (and its time limit run)."""
        self._portal.call(self._process.start)

    def wait(self) -> Exit:
        self.start()
        return self._portal.call(self._process.wait)

    def send_stdin(self, data: bytes) -> None:
        self._portal.call(self._process.send_stdin, data)

    def close_stdin(self) -> None:
        self._portal.call(self._process.close_stdin)

    def signal(self, number: int = signal.SIGKILL) -> bool:
        return self._portal.call(self._process.signal, number)

    def resize(self, size: TerminalSize) -> None:
        self._portal.call(self._process.resize, size)


class SyncWatcher:
    """A :class:`Watcher` driven by blocking calls."""

    def __init__(self, watcher: Watcher, portal: BlockingPortal) -> None:
        self._watcher = watcher
        self._portal = portal
        self.id = watcher.id
        self.path = watcher.path

    @property
    def ended(self) -> bool:
        return self._watcher.ended

    @property
    def dropped(self) -> int:
        """Events dropped, the oldest first, because nobody drained them in time."""
        return self._watcher.dropped

    @property
    def buffered_bytes(self) -> int:
        """The memory the events waiting to be taken hold (see :attr:`Watcher.buffered_bytes`)."""
        return self._watcher.buffered_bytes

    def drain(self) -> list[FileEvent]:
        return self._portal.call(self._watcher.drain)

    def next_event(self) -> FileEvent | None:
        return self._portal.call(self._watcher.next_event)

    def events(self) -> Iterator[FileEvent]:
        """Events as they come, until the watcher ends."""
        while (event := self.next_event()) is not None:
            yield event

    def stop(self) -> None:
        self._portal.call(self._watcher.stop)


class SyncPortStream:
    """Blocking :class:`PortStream`."""

    def __init__(self, stream: PortStream, portal: BlockingPortal) -> None:
        self._stream = stream
        self._portal = portal

    def send(self, data: bytes) -> None:
        self._portal.call(self._stream.send, data)

    def receive(self) -> bytes:
        return self._portal.call(self._stream.receive)


class SyncSandbox:
    """The same operations as :class:`Sandbox`, as blocking calls."""

    def __init__(self, sandbox: Sandbox, portal: BlockingPortal) -> None:
        self._sandbox = sandbox
        self._portal = portal

    @property
    def id(self) -> str:
        return self._sandbox.id

    @property
    def limits(self) -> Limits:
        return self._sandbox.limits

    @property
    def contexts(self) -> dict[str, CodeContext]:
        return self._sandbox.contexts

    @property
    def end_at(self) -> datetime.datetime:
        return self._sandbox.end_at

    @property
    def seconds_left(self) -> float:
        return self._sandbox.seconds_left

    @property
    def users(self) -> tuple[str, ...]:
        return self._sandbox.users

    @property
    def metadata(self) -> dict[str, str]:
        return self._sandbox.metadata

    @property
    def container(self) -> ContainerRef | None:
        return self._sandbox.container

    @property
    def paused(self) -> bool:
        return self._sandbox.paused

    @property
    def on_disk(self) -> bool:
        return self._sandbox.on_disk

    def set_timeout(self, seconds: float) -> None:
        self._sandbox.set_timeout(seconds)

    def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bool = False,
        time_s: float | None = None,
        tag: str | None = None,
        listed: bool = True,
        terminal: TerminalSize | None = None,
        user: str = SANDBOX_USER,
    ) -> SyncProcess:
        """Blocking :meth:`Sandbox.start`."""
        start = functools.partial(
            self._sandbox.start,
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            time_s=time_s,
            tag=tag,
            listed=listed,
            terminal=terminal,
            user=user,
        )
        return SyncProcess(self._portal.call(start), self._portal)

    @contextlib.contextmanager
    def connect_port(self, port: int, *, time_s: float | None = None) -> Iterator[SyncPortStream]:
        """Blocking :meth:`Sandbox.connect_port`."""
        with self._portal.wrap_async_context_manager(self._sandbox.connect_port(port, time_s=time_s)) as stream:
            yield SyncPortStream(stream, self._portal)

    def running(self) -> list[SyncProcess]:
        return [SyncProcess(process, self._portal) for process in self._sandbox.running()]

    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        time_s: float | None = None,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = SANDBOX_USER,
    ) -> RunResult:
        """Blocking :meth:`Sandbox.exec`."""
        run = functools.partial(
            self._sandbox.exec, argv, stdin=stdin, time_s=time_s, workdir=workdir, env=env, user=user
        )
        return self._portal.call(run)

    def write_file(self, path: str, data: bytes | Iterable[bytes], *, user: str = SANDBOX_USER) -> Entry:
        """Blocking :meth:`Sandbox.write_file`, from bytes or an iterable of them."""
        write = functools.partial(self._sandbox.write_file, user=user)
        if isinstance(data, bytes):
            return self._portal.call(write, path, data)
        chunks = iter(data)

        async def stream() -> AsyncIterator[bytes]:
            while (chunk := await anyio.to_thread.run_sync(next, chunks, None)) is not None:
                yield chunk

        return self._portal.call(write, path, stream())

    @contextlib.contextmanager
    def open_file(self, path: str, *, user: str = SANDBOX_USER) -> Iterator[Iterator[bytes]]:
        """Blocking :meth:`Sandbox.open_file`."""
        with self._portal.wrap_async_context_manager(self._sandbox.open_file(path, user=user)) as chunks:

            def blocking() -> Iterator[bytes]:
                while True:
                    try:
                        yield self._portal.call(chunks.__anext__)
                    except StopAsyncIteration:
                        return

            yield blocking()

    def create_context(self, language: str = "python", cwd: str | None = None) -> CodeContext:
        return self._sandbox.create_context(language, cwd)

    def context(self, context_id: str | None = None, language: str = "python") -> CodeContext:
        return self._sandbox.context(context_id, language)

    def remove_context(self, context_id: str) -> None:
        self._portal.call(self._sandbox.remove_context, context_id)

    def restart_context(self, context_id: str) -> None:
        self._portal.call(self._sandbox.restart_context, context_id)

    def run_code(
        self,
        code: str,
        *,
        context_id: str | None = None,
        language: str = "python",
        env: Mapping[str, str] | None = None,
        time_s: float = 300.0,
        quiet_s: float | None = None,
    ) -> Iterator[CellEvent]:
        """Blocking :meth:`Sandbox.run_code`: its events as they come. Leaving the loop early
        interrupts the cell."""
        cell = self._sandbox.run_code(
            code, context_id=context_id, language=language, env=env, time_s=time_s, quiet_s=quiet_s
        )
        send, receive = anyio.create_memory_object_stream[CellEvent](16)

        async def pump() -> None:
            # The whole cell in one task of the loop, as its lock and scopes need.
            async with send, contextlib.aclosing(cell):
                async for event in cell:
                    await send.send(event)

        running = self._portal.start_task_soon(pump)
        try:
            while True:
                try:
                    yield self._portal.call(receive.receive)
                except anyio.EndOfStream:
                    break
        finally:
            self._portal.call(receive.aclose)
            with contextlib.suppress(anyio.BrokenResourceError):
                running.result()

    def read_file(self, path: str, *, user: str = SANDBOX_USER) -> bytes:
        """Blocking :meth:`Sandbox.read_file`."""
        return self._portal.call(functools.partial(self._sandbox.read_file, path, user=user))

    def stat(self, path: str, *, user: str = SANDBOX_USER) -> Entry:
        return self._portal.call(functools.partial(self._sandbox.stat, path, user=user))

    def metrics(self) -> Metrics:
        """Blocking :meth:`Sandbox.metrics`."""
        return self._portal.call(self._sandbox.metrics)

    def usage(self) -> ContainerUsage:
        """Blocking :meth:`Sandbox.usage`."""
        return self._portal.call(self._sandbox.usage)

    def pause(self) -> bool:
        """Blocking :meth:`Sandbox.pause`."""
        return self._portal.call(self._sandbox.pause)

    def resume(self) -> bool:
        """Blocking :meth:`Sandbox.resume`."""
        return self._portal.call(self._sandbox.resume)

    def watch(self, path: str, *, recursive: bool = False, user: str = SANDBOX_USER) -> SyncWatcher:
        """Blocking :meth:`Sandbox.watch`."""
        watch = functools.partial(self._sandbox.watch, path, recursive=recursive, user=user)
        return SyncWatcher(self._portal.call(watch), self._portal)

    def list_dir(self, path: str, depth: int = 1, *, user: str = SANDBOX_USER) -> list[Entry]:
        return self._portal.call(functools.partial(self._sandbox.list_dir, path, depth, user=user))

    def make_dir(self, path: str, *, user: str = SANDBOX_USER) -> Entry:
        return self._portal.call(functools.partial(self._sandbox.make_dir, path, user=user))

    def move(self, source: str, destination: str, *, user: str = SANDBOX_USER) -> Entry:
        return self._portal.call(functools.partial(self._sandbox.move, source, destination, user=user))

    def remove(self, path: str, *, user: str = SANDBOX_USER) -> None:
        self._portal.call(functools.partial(self._sandbox.remove, path, user=user))


# Code with no place for an engine in its signatures (the drop-ins) registers how it takes one;
# whoever owns this process's engine (a Ray node's actor) hands it to all of them, without
# naming them.
_ENGINE_TAKERS: list[Callable[[SyncEngine | None], None]] = []


def on_process_engine(take: Callable[[SyncEngine | None], None]) -> None:
    """Have ``take`` called with the engine :func:`use_process_engine` is given."""
    _ENGINE_TAKERS.append(take)


def use_process_engine(engine: SyncEngine | None) -> None:
    """Every registered taker in this process uses ``engine`` (None: one of its own)."""
    for take in list(_ENGINE_TAKERS):
        take(engine)


class SyncVolumes:
    """The engine's volumes, by blocking calls (a file's bytes whole, where :class:`Volumes` streams)."""

    def __init__(self, volumes: Volumes, portal: BlockingPortal) -> None:
        self._volumes = volumes
        self._portal = portal

    def create(self, name: str, metadata: Mapping[str, str] | None = None) -> VolumeRecord:
        return self._portal.call(self._volumes.create, name, dict(metadata or {}))

    def list(self) -> list[VolumeRecord]:
        return self._volumes.list()

    def get(self, volume_id: str) -> VolumeRecord:
        return self._volumes.get(volume_id)

    def delete(self, volume_id: str) -> bool:
        return self._portal.call(self._volumes.delete, volume_id)

    def stat(self, volume_id: str, path: str) -> EntryStat:
        return self._portal.call(self._volumes.stat, volume_id, path)

    def list_dir(self, volume_id: str, path: str, depth: int = 1) -> builtins.list[EntryStat]:
        return self._portal.call(self._volumes.list_dir, volume_id, path, depth)

    def read(self, volume_id: str, path: str) -> bytes:
        async def read() -> bytes:
            return b"".join([chunk async for chunk in await self._volumes.read(volume_id, path)])

        return self._portal.call(read)

    def write(self, volume_id: str, path: str, data: bytes, *, mode: int = 0o644) -> EntryStat:
        async def chunks() -> AsyncIterator[bytes]:
            yield data

        return self._portal.call(functools.partial(self._volumes.write, volume_id, path, chunks(), mode=mode))

    def make_dir(self, volume_id: str, path: str, *, parents: bool = False) -> EntryStat:
        return self._portal.call(functools.partial(self._volumes.make_dir, volume_id, path, parents=parents))

    def remove(self, volume_id: str, path: str) -> None:
        self._portal.call(self._volumes.remove, volume_id, path)


class SyncSessions:
    """The engine's live sandboxes, by blocking calls."""

    def __init__(self, sessions: Sessions, portal: BlockingPortal) -> None:
        self._sessions = sessions
        self._portal = portal

    def get(self, sandbox_id: str) -> SyncSandbox:
        return SyncSandbox(self._sessions.get(sandbox_id), self._portal)

    def snapshot(
        self, sandbox_id: str, *, name: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> SnapshotRecord:
        """Blocking :meth:`Sessions.snapshot`."""
        return self._portal.call(functools.partial(self._sessions.snapshot, sandbox_id, name=name, metadata=metadata))

    def snapshots(self) -> list[SnapshotRecord]:
        return self._sessions.snapshots()

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Blocking :meth:`Sessions.delete_snapshot`."""
        return self._portal.call(self._sessions.delete_snapshot, snapshot_id)

    def list(self) -> list[SyncSandbox]:
        return [SyncSandbox(sandbox, self._portal) for sandbox in self._sessions.list()]

    def using_volume(self, volume_id: str) -> builtins.list[str]:
        return self._sessions.using_volume(volume_id)

    def kill(self, sandbox_id: str) -> bool:
        return self._portal.call(self._sessions.kill, sandbox_id)

    def pause(self, sandbox_id: str, *, keep_memory: bool = True) -> bool:
        """Blocking :meth:`Sessions.pause`."""
        return self._portal.call(functools.partial(self._sessions.pause, sandbox_id, keep_memory=keep_memory))

    def resume(self, sandbox_id: str) -> bool:
        """Blocking :meth:`Sessions.resume`."""
        return self._portal.call(self._sessions.resume, sandbox_id)

    def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """Blocking :meth:`Sessions.set_timeout`."""
        self._portal.call(self._sessions.set_timeout, sandbox_id, seconds)


def _close_engine(
    engine: contextlib.AbstractContextManager[object], portal: contextlib.AbstractContextManager[object]
) -> None:
    try:
        engine.__exit__(None, None, None)
    finally:
        portal.__exit__(None, None, None)


class SyncEngine:
    """The same operations as :class:`Engine`, as blocking calls::

    with SyncEngine() as engine:
        print(engine.run("print(6 * 7)").stdout)
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        runtime: Runtime | None = None,
        observer: JobObserver | None = None,
    ) -> None:
        self._portal_cm = start_blocking_portal()
        self._portal: BlockingPortal = self._portal_cm.__enter__()
        try:
            self._engine = Engine(settings, limits=limits, runtime=runtime, observer=observer)
            # Entered and left in one task of the portal's loop, as the engine's task group needs.
            self._engine_cm = self._portal.wrap_async_context_manager(self._engine)
            self._engine_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        # Closed by close(), or at the interpreter's exit for one left open: its loop's thread is
        # stopped at exit, and the portal's own clean-up would then wait for it for ever.
        self._closing = weakref.finalize(self, _close_engine, self._engine_cm, self._portal_cm)

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    @property
    def limits(self) -> Limits:
        return self._engine.limits

    @property
    def runtime(self) -> Runtime:
        return self._engine.runtime

    @property
    def info(self) -> RuntimeInfo:
        return self._engine.info

    @property
    def pool(self) -> WarmPool:
        return self._engine.pool

    @property
    def sandboxes(self) -> SyncSessions:
        return SyncSessions(self._engine.sandboxes, self._portal)

    @property
    def volumes(self) -> SyncVolumes:
        return SyncVolumes(self._engine.volumes, self._portal)

    def statistics(self) -> EngineStatistics:
        # Plain reads of counters: safe from any thread, no need to enter the loop.
        return self._engine.statistics()

    def __enter__(self) -> SyncEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the engine, as leaving its ``with`` block does; one never closed closes at the interpreter's exit."""
        self._closing()

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        language: Language = "python",
        limits: Limits | None = None,
        args: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Blocking :meth:`Engine.run`."""
        run = functools.partial(
            self._engine.run, code, stdin=stdin, language=language, limits=limits, args=args, files=files
        )
        return self._portal.call(run)

    def judge(self, submission: Submission) -> SubmissionResult:
        """Blocking :meth:`Engine.judge`."""
        return self._portal.call(self._engine.judge, submission)

    def judge_many(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> list[SubmissionResult]:
        """Blocking :meth:`Engine.judge_many`."""
        return self._portal.call(functools.partial(self._engine.judge_many, deadline_s=deadline_s), submissions)

    @contextlib.contextmanager
    def judging(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> Iterator[Iterator[tuple[int, SubmissionResult]]]:
        """Blocking :meth:`Engine.judging`: ``(index, result)`` pairs as they finish."""
        judging = self._engine.judging(submissions, deadline_s=deadline_s)
        with self._portal.wrap_async_context_manager(judging) as stream:

            def pairs() -> Iterator[tuple[int, SubmissionResult]]:
                while True:
                    try:
                        yield self._portal.call(stream.receive)
                    except anyio.EndOfStream:
                        return

            yield pairs()

    def create_sandbox(
        self,
        *,
        language: Language = "python",
        template: str | None = None,
        snapshot: str | None = None,
        limits: Limits | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        volumes: Mapping[str, str] | None = None,
    ) -> SyncSandbox:
        """Blocking :meth:`Engine.create_sandbox`."""
        create = functools.partial(
            self._engine.create_sandbox,
            language=language,
            template=template,
            snapshot=snapshot,
            limits=limits,
            timeout_s=timeout_s,
            env=env,
            metadata=metadata,
            volumes=volumes,
        )
        return SyncSandbox(self._portal.call(create), self._portal)

    @contextlib.contextmanager
    def sandbox(self, *, language: Language = "python", limits: Limits | None = None) -> Iterator[SyncSandbox]:
        """Blocking :meth:`Engine.sandbox`."""
        with self._portal.wrap_async_context_manager(self._engine.sandbox(language=language, limits=limits)) as box:
            yield SyncSandbox(box, self._portal)

    def prepare(self, language: Language, announce: Callable[[str], None] = lambda message: None) -> None:
        """Blocking :meth:`Engine.prepare`."""
        self._portal.call(self._engine.prepare, language, announce)

    def image_for(self, language: Language) -> str:
        """Blocking :meth:`Engine.image_for`."""
        return self._portal.call(self._engine.image_for, language)

    def templates(self) -> list[str]:
        """Blocking :meth:`Engine.templates`."""
        return self._portal.call(self._engine.templates)

    def run_harness(
        self, language: Language, request: HarnessRequest, limits: Limits, *, deadline_s: float | None = None
    ) -> HarnessRun:
        """Blocking :meth:`Engine.run_harness` (``engine.lowlevel``: the building block of the compat layers)."""
        return self._portal.call(
            functools.partial(self._engine.run_harness, deadline_s=deadline_s), language, request, limits
        )
