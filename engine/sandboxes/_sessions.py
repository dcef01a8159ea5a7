"""Long-lived sandboxes addressed by id: created from the warm pool, each with a time to live,
at most so many alive, and reaped when their time is up or the engine closes. A sandbox paused to
disk holds no container: it outlives the engine, and the next engine on the same directory takes
it up again. A snapshot is a sandbox's files taken as it runs, that new sandboxes start with."""

from __future__ import annotations

import contextlib
import datetime
import os
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath

import anyio
from anyio import AsyncFile

from .._errors import SandboxError, SandboxLimitReached, SandboxNotFound
from .._limits import Limits
from .._models import Language
from ..runtime import BackgroundTasks, ContainerRef, ContainerSpec, Runtime
from ..runtime._policy import SANDBOX_SCRATCH_PLACES
from ..runtime._volumes import VolumeBind
from ._paused import ArchiveStore, PausedRecord, SnapshotRecord, hold_directory, let_go_of_directory
from ._sandbox import Sandbox

__all__ = ["DEFAULT_TIMEOUT_S", "Sessions"]

# E2B's default time to live.
DEFAULT_TIMEOUT_S = 300.0
# How often expiry is checked: a sandbox outlives its time by at most this much.
REAP_INTERVAL_S = 0.5
# Where, in the directory of sandboxes paused to disk, snapshots are kept.
SNAPSHOTS = "snapshots"

Take = Callable[[ContainerSpec], Awaitable[ContainerRef]]
Remove = Callable[[ContainerRef], Awaitable[None]]
# What a sandbox of this language, or of this operator's template, runs: its language and its spec.
SpecFor = Callable[[Language, str | None, Limits], Awaitable[tuple[Language, ContainerSpec]]]
# Where the host has a volume mounted, for a container (mounting it if it is not).
VolumeSource = Callable[[str], Awaitable[str]]
# The most volumes one sandbox mounts.
MAX_MOUNTS = 8
# Where no volume mounts: the image's system and the sandbox's own writable places.
SYSTEM_PLACES = (
    *("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run"),
    *("/sbin", "/sys", "/usr", "/var"),
    *SANDBOX_SCRATCH_PLACES,
)


def checked_mounts(volumes: Mapping[str, str]) -> dict[str, str]:
    """``volumes`` (path -> volume id), each path absolute and plain, none in the image's system
    or the sandbox's own places (see ``SYSTEM_PLACES``), none inside another."""
    if len(volumes) > MAX_MOUNTS:
        raise ValueError(f"a sandbox mounts at most {MAX_MOUNTS} volumes, not {len(volumes)}")
    paths = []
    for path in volumes:
        where = PurePosixPath(path)
        if not path.startswith("/") or str(where) != path or ".." in where.parts or where == PurePosixPath("/"):
            raise ValueError(f"a volume mounts at an absolute, plain path that is not the root, not {path!r}")
        if any(where == PurePosixPath(place) or where.is_relative_to(place) for place in SYSTEM_PLACES):
            raise ValueError(f"no volume mounts at {path!r}, in the sandbox's system or its own places {SYSTEM_PLACES}")
        paths.append(where)
    for one in paths:
        if any(one != other and one.is_relative_to(other) for other in paths):
            raise ValueError(f"{str(one)!r} is inside another volume's path")
    return dict(volumes)


class Sessions:
    """The engine's live sandboxes. Reached as :attr:`Engine.sandboxes`."""

    def __init__(
        self,
        runtime: Runtime,
        take: Take,
        remove: Remove,
        tasks: BackgroundTasks,
        max_alive: int,
        *,
        spec_for: SpecFor,
        volume_source: VolumeSource,
        paused_dir: Path | None,
        max_paused: int,
        max_snapshots: int,
    ) -> None:
        self.max_alive = max_alive
        self.max_paused = max_paused
        self.max_snapshots = max_snapshots
        self._runtime = runtime
        self._take = take
        self._remove = remove
        self._spec_for = spec_for
        self._volume_source = volume_source
        self._paused = ArchiveStore(paused_dir, PausedRecord) if paused_dir is not None else None
        self._snapshot_store = ArchiveStore(paused_dir / SNAPSHOTS, SnapshotRecord) if paused_dir is not None else None
        self._snapshots: dict[str, SnapshotRecord] = {}
        self._snapshots_taken_now = 0
        self._tasks = tasks
        self._alive: dict[str, Sandbox] = {}
        self._reserved = 0
        self._changing: set[str] = set()
        self._snapshotting: dict[str, anyio.Lock] = {}  # sandbox id -> one snapshot of it at a time
        self._held = False  # the paused directory, taken by load_paused
        self._reaper = anyio.CancelScope()
        tasks.start_soon(self._reap)

    async def create(
        self,
        language: Language,
        limits: Limits,
        *,
        template: str | None = None,
        snapshot: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        volumes: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """A sandbox running ``language``'s image, or the operator's ``template``, or what the
        sandbox ``snapshot`` was taken of ran, with its files and environment (``env`` on top),
        ready; its time to live starts now. ``volumes`` maps a path to the volume mounted there."""
        if timeout_s <= 0:
            raise ValueError(f"a sandbox's timeout must be positive, not {timeout_s}")
        volumes = checked_mounts(volumes or {})
        taken = self.snapshot_of(snapshot) if snapshot is not None else None
        if taken is not None:
            language, template, env = taken.language, taken.template, {**taken.env, **(env or {})}
        language, spec = await self._spec_for(language, template, limits)
        spec = await self._with_volumes(spec, volumes)
        async with contextlib.AsyncExitStack() as stack:
            if taken is not None:
                # Opened first: a snapshot deleted while this sandbox starts is still read whole.
                files = await stack.enter_async_context(await self._open_snapshot(taken))
            sandbox = Sandbox(
                self._runtime,
                await self._container(spec),
                limits,
                self._tasks,
                timeout_s=timeout_s,
                env=env,
                metadata=metadata,
                template=language,
                operator_template=template,
                volumes=volumes,
            )
            self._alive[sandbox.id] = sandbox
            if taken is not None:
                try:
                    await sandbox._restore_files(files)
                except BaseException:
                    await self.kill(sandbox.id)
                    raise
        return sandbox

    async def _with_volumes(self, spec: ContainerSpec, volumes: Mapping[str, str]) -> ContainerSpec:
        if not volumes:
            return spec
        binds = tuple(
            [
                VolumeBind(source=await self._volume_source(volume_id), destination=path)
                for path, volume_id in volumes.items()
            ]
        )
        return spec.model_copy(update={"policy": spec.policy.model_copy(update={"volumes": binds})})

    def using_volume(self, volume_id: str) -> list[str]:
        """The sandboxes, alive or paused, that have ``volume_id`` mounted."""
        return [sandbox.id for sandbox in self._alive.values() if volume_id in sandbox.volumes.values()]

    async def _container(self, spec: ContainerSpec) -> ContainerRef:
        running = sum(not sandbox.on_disk for sandbox in self._alive.values())
        if running + self._reserved >= self.max_alive:
            raise SandboxLimitReached(
                f"{self.max_alive} sandboxes are alive, the most this engine allows; kill one or raise the limit"
            )
        self._reserved += 1
        try:
            return await self._take(spec)
        finally:
            self._reserved -= 1

    def _store(self) -> ArchiveStore[PausedRecord]:
        if self._paused is None:
            raise SandboxError(
                "this engine pauses no sandbox to disk: it has no Settings.paused_dir (AIRLOCK_PAUSED_DIR)"
            )
        return self._paused

    def _snapshots_kept(self) -> ArchiveStore[SnapshotRecord]:
        if self._snapshot_store is None:
            raise SandboxError("this engine keeps no snapshot: it has no Settings.paused_dir (AIRLOCK_PAUSED_DIR)")
        return self._snapshot_store

    async def snapshot(
        self, sandbox_id: str, *, name: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> SnapshotRecord:
        """Take a snapshot of a running sandbox: its files, with every process stopped while they are
        written, then going on; kept (with ``metadata``) until deleted, also across engines, for
        :meth:`create` to start sandboxes with. Processes and memory are not kept: a sandbox made
        from it starts afresh with its files (E2B's filesystem snapshot). Snapshots of one sandbox
        are taken one after another."""
        sandbox = self.get(sandbox_id)
        store = self._snapshots_kept()
        # Those being taken count, so that concurrent snapshots cannot pass the limit together.
        if len(self._snapshots) + self._snapshots_taken_now >= self.max_snapshots:
            raise SandboxLimitReached(
                f"{self.max_snapshots} snapshots are kept, the most this engine allows; delete one"
            )
        self._snapshots_taken_now += 1
        try:
            async with self._snapshotting.setdefault(sandbox.id, anyio.Lock()):
                with self._changing_one(sandbox):
                    record = SnapshotRecord(
                        id=secrets.token_hex(10),
                        name=name,
                        source=sandbox.id,
                        language=sandbox.template,
                        template=sandbox.operator_template,
                        env=sandbox.env,
                        metadata=dict(metadata or {}),
                        created_at=datetime.datetime.now(datetime.UTC),
                    )
                    await self._write_snapshot(sandbox, store, record)
        finally:
            self._snapshots_taken_now -= 1
        self._snapshots[record.id] = record
        return record

    async def _write_snapshot(
        self, sandbox: Sandbox, store: ArchiveStore[SnapshotRecord], record: SnapshotRecord
    ) -> None:
        try:
            descriptor = await anyio.to_thread.run_sync(store.open_archive, record.id)
            try:
                await sandbox._copy_files(descriptor)
            finally:
                os.close(descriptor)
            await anyio.to_thread.run_sync(store.save, record)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.remove, record.id)
            raise

    async def _open_snapshot(self, taken: SnapshotRecord) -> AsyncFile[bytes]:
        archive = self._snapshots_kept().archive(taken.id)
        try:
            return await anyio.open_file(archive, "rb")
        except FileNotFoundError:
            # Deleted by hand, or by another engine on the same directory (one engine per directory).
            raise SandboxNotFound(f"snapshot {taken.id!r} is gone: {archive} was deleted") from None

    def snapshot_of(self, snapshot_id: str) -> SnapshotRecord:
        try:
            return self._snapshots[snapshot_id]
        except KeyError:
            raise SandboxNotFound(f"no snapshot {snapshot_id!r} is kept (it was deleted, or never taken)") from None

    def snapshots(self) -> list[SnapshotRecord]:
        """Every snapshot kept, oldest first."""
        return sorted(self._snapshots.values(), key=lambda record: (record.created_at, record.id))

    async def delete_snapshot(self, snapshot_id: str) -> bool:
        """Delete a snapshot (sandboxes made from it keep their files); False when there was none."""
        if self._snapshots.pop(snapshot_id, None) is None:
            return False
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._snapshots_kept().remove, snapshot_id)
        return True

    @contextlib.contextmanager
    def _changing_one(self, sandbox: Sandbox) -> Iterator[None]:
        if sandbox.id in self._changing:
            raise SandboxError(f"sandbox {sandbox.id} is being paused or resumed; try again when that is done")
        self._changing.add(sandbox.id)
        try:
            yield
        finally:
            self._changing.discard(sandbox.id)

    async def pause(self, sandbox_id: str, *, keep_memory: bool = True) -> bool:
        """Pause a sandbox; False when it was paused already. ``keep_memory`` freezes it in place
        (:meth:`Sandbox.pause`); otherwise its processes end, its files go to disk and its
        container is removed: it costs no memory or CPU, outlives the engine, and its time to
        live runs on (a paused sandbox forgotten still ends)."""
        sandbox = self.get(sandbox_id)
        if keep_memory or sandbox.paused:
            return await sandbox.pause()
        store = self._store()
        if sum(s.on_disk for s in self._alive.values()) >= self.max_paused:
            raise SandboxLimitReached(f"{self.max_paused} sandboxes are paused to disk, the most this engine allows")
        with self._changing_one(sandbox):
            descriptor = await anyio.to_thread.run_sync(store.open_archive, sandbox.id)
            try:
                await sandbox._save_files(descriptor)
                record = self._record_of(sandbox)
                await anyio.to_thread.run_sync(store.save, record)
                self._still_alive(sandbox)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(store.remove, sandbox.id)
                raise
            finally:
                os.close(descriptor)
            with anyio.CancelScope(shield=True):
                await self._remove(sandbox._went_to_disk())
        return True

    async def resume(self, sandbox_id: str) -> bool:
        """Let a paused sandbox run again; False when it was not paused. One paused to disk starts
        afresh (a new container, no processes) with its files as they were."""
        sandbox = self.get(sandbox_id)
        if not sandbox.on_disk:
            return await sandbox.resume()
        with self._changing_one(sandbox):
            _, spec = await self._spec_for(sandbox.template, sandbox.operator_template, sandbox.limits)
            container = await self._container(await self._with_volumes(spec, sandbox.volumes))
            sandbox._came_back(container)
            try:
                async with await anyio.open_file(self._store().archive(sandbox.id), "rb") as files:
                    await sandbox._restore_files(files)
                self._still_alive(sandbox)
            except BaseException:
                sandbox._came_back(None)
                with anyio.CancelScope(shield=True):
                    await self._remove(container)
                raise
            await anyio.to_thread.run_sync(self._store().remove, sandbox.id)
        return True

    async def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """:meth:`Sandbox.set_timeout`, kept on disk too for a sandbox paused there."""
        sandbox = self.get(sandbox_id)
        sandbox.set_timeout(seconds)
        if sandbox.on_disk and sandbox.id not in self._changing:
            record = self._record_of(sandbox)
            await anyio.to_thread.run_sync(self._store().save, record)

    def _record_of(self, sandbox: Sandbox) -> PausedRecord:
        return PausedRecord(
            id=sandbox.id,
            language=sandbox.template,
            template=sandbox.operator_template,
            limits=sandbox.limits,
            env=sandbox.env,
            metadata=sandbox.metadata,
            started_at=sandbox.started_at,
            end_at=sandbox.end_at,
            volumes=sandbox.volumes,
        )

    def _still_alive(self, sandbox: Sandbox) -> None:
        """Raise when ``sandbox`` was killed (or expired) while it was paused or resumed: what
        that made is the caller's to undo."""
        if self._alive.get(sandbox.id) is not sandbox:
            raise SandboxNotFound(f"sandbox {sandbox.id} was killed while it was paused or resumed")

    async def load_paused(self) -> None:
        """Take up the sandboxes an engine before this one paused to disk (those whose time is up
        are removed), and the snapshots it kept."""
        if self._paused is None or self._snapshot_store is None:
            return
        await anyio.to_thread.run_sync(hold_directory, self._paused.directory)
        try:
            await self._take_up_paused(self._paused, self._snapshot_store)
        except BaseException:
            let_go_of_directory(self._paused.directory)
            raise
        self._held = True

    async def _take_up_paused(
        self, paused: ArchiveStore[PausedRecord], snapshots: ArchiveStore[SnapshotRecord]
    ) -> None:
        for kept in await anyio.to_thread.run_sync(snapshots.records):
            self._snapshots[kept.id] = kept
        now = datetime.datetime.now(datetime.UTC)
        for record in await anyio.to_thread.run_sync(paused.records):
            left_s = (record.end_at - now).total_seconds()
            if left_s <= 0:
                await anyio.to_thread.run_sync(paused.remove, record.id)
                continue
            self._alive[record.id] = Sandbox(
                self._runtime,
                None,
                record.limits,
                self._tasks,
                timeout_s=left_s,
                env=record.env,
                metadata=record.metadata,
                template=record.language,
                operator_template=record.template,
                sandbox_id=record.id,
                started_at=record.started_at,
                volumes=record.volumes,
            )

    def get(self, sandbox_id: str) -> Sandbox:
        try:
            return self._alive[sandbox_id]
        except KeyError:
            raise SandboxNotFound(
                f"no sandbox {sandbox_id!r} is alive (it was killed, expired, or never made)"
            ) from None

    def list(self) -> list[Sandbox]:
        return sorted(self._alive.values(), key=lambda sandbox: sandbox.started_at)

    async def kill(self, sandbox_id: str) -> bool:
        """Remove the sandbox and everything running in it (or its files, paused to disk); False
        when there was none."""
        sandbox = self._alive.pop(sandbox_id, None)
        if sandbox is None:
            return False
        self._snapshotting.pop(sandbox_id, None)
        for context in sandbox.contexts.values():
            context.abandon()
        with anyio.CancelScope(shield=True):
            if sandbox.container is None:
                await anyio.to_thread.run_sync(self._store().remove, sandbox.id)
            else:
                await self._remove(sandbox.container)
            await sandbox._abandon_processes()
        return True

    async def close(self) -> None:
        """Kill every sandbox but those paused to disk, which the next engine takes up, and stop
        reaping (the processes' readers end with their containers)."""
        self._reaper.cancel()
        for sandbox_id, sandbox in list(self._alive.items()):
            if sandbox.on_disk:
                del self._alive[sandbox_id]
            else:
                await self.kill(sandbox_id)
        if self._paused is not None and self._held:
            self._held = False
            let_go_of_directory(self._paused.directory)

    async def _reap(self) -> None:
        with self._reaper:
            while True:
                await self._reap_expired()

    async def _reap_expired(self) -> None:
        await anyio.sleep(REAP_INTERVAL_S)
        for sandbox in list(self._alive.values()):
            if sandbox.seconds_left <= 0:
                self._tasks.start_soon(self.kill, sandbox.id)
