"""Volumes: file systems of a fixed size that outlive every sandbox, mounted into sandboxes
(``create_sandbox(volumes={path: volume_id})``) and read and written from outside one.

Each is kept in the engine's paused directory (``volumes/ID.json``, ``ID.img``), so that it
outlives the engine, and mounted on the host while this engine uses it (``runtime/_volumes.py``).
What comes from outside a sandbox reaches its files from the host, so every path is resolved
inside the volume by the kernel (``openat2`` with ``RESOLVE_IN_ROOT``): a link a sandbox left
there leads nowhere outside it, and nothing but a regular file is read.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import datetime
import errno
import functools
import os
import secrets
import shutil
import stat
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from .._errors import EngineError, SandboxError, SandboxLimitReached, SandboxNotFound
from ..runtime._labels import run_dir
from ..runtime._volumes import VOLUME_USER, detach, format_volume, mount_volume

__all__ = ["EntryStat", "VolumeFull", "VolumeLimitReached", "VolumeNotFound", "VolumeRecord", "Volumes"]

_SYS_OPENAT2 = 437
_RESOLVE_NO_XDEV, _RESOLVE_NO_MAGICLINKS, _RESOLVE_IN_ROOT = 0x01, 0x02, 0x10
# Each path from outside stays in the volume, on its file system, away from /proc's magic links.
_RESOLVE = _RESOLVE_IN_ROOT | _RESOLVE_NO_XDEV | _RESOLVE_NO_MAGICLINKS
ID_CHARS = frozenset("0123456789abcdef")
CHUNK = 1 << 20
# A name from outside: what E2B's volume names look like.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


class VolumeNotFound(SandboxNotFound):
    """No volume of that id, or no such path in it."""


class VolumeLimitReached(SandboxLimitReached):
    """As many volumes are kept as this engine allows."""


class VolumeFull(SandboxError):
    """A write found the volume's file system full."""


class VolumeRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=20, max_length=20)
    name: str = Field(pattern=NAME_PATTERN)
    token: str = Field(description="the secret its content is reached with from outside a sandbox")
    size_mb: int
    metadata: dict[str, str]
    created_at: datetime.datetime


class EntryStat(BaseModel):
    """A file, folder or link in a volume, as E2B's volume API describes it."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: Literal["file", "directory", "symlink", "unknown"]
    path: str
    size: int
    mode: int
    uid: int
    gid: int
    atime: datetime.datetime
    mtime: datetime.datetime
    ctime: datetime.datetime
    target: str | None = None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def _open_in(root: int, path: str, flags: int) -> int:
    """``path`` opened beneath the folder ``root``, whatever links on the way say."""
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE)
    fd = _libc.syscall(_SYS_OPENAT2, root, path.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), path)
    return int(fd)


def _relative(path: str) -> PurePosixPath:
    """A path from outside, as a path inside the volume; ``..`` and NUL are refused."""
    if "\0" in path:
        raise ValueError("a path may not hold a NUL byte")
    parts = [part for part in PurePosixPath("/", path).parts[1:] if part != "."]
    if ".." in parts:
        raise ValueError(f"{path!r}: a volume's path may not go up ('..')")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _moment(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def _described(where: PurePosixPath, info: os.stat_result, target: str | None) -> EntryStat:
    kind: Literal["file", "directory", "symlink", "unknown"] = (
        "directory"
        if stat.S_ISDIR(info.st_mode)
        else "file"
        if stat.S_ISREG(info.st_mode)
        else "symlink"
        if stat.S_ISLNK(info.st_mode)
        else "unknown"
    )
    shown = PurePosixPath("/", where) if str(where) != "." else PurePosixPath("/")
    return EntryStat(
        name=shown.name,
        type=kind,
        path=str(shown),
        size=info.st_size,
        mode=stat.S_IMODE(info.st_mode),
        uid=info.st_uid,
        gid=info.st_gid,
        atime=_moment(info.st_atime),
        mtime=_moment(info.st_mtime),
        ctime=_moment(info.st_ctime),
        target=target,
    )


def _not_found(exc: OSError, path: str) -> EngineError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
        return VolumeNotFound(f"{path!r} is not in the volume")
    if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
        return VolumeFull(f"the volume is full: {path!r} was not written")
    return SandboxError(f"{path!r}: {exc.strerror}")


class _Mounted:
    """One volume's file system as the host mounted it, and its root folder held open."""

    def __init__(self, volume_id: str, image: Path) -> None:
        self.where = run_dir("volumes") / volume_id
        mount_volume(image, self.where)
        self.root = os.open(self.where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        os.close(self.root)
        detach(self.where)

    # Each of these runs in a worker thread, on paths from outside.

    def stat(self, path: str) -> EntryStat:
        where = _relative(path)
        with self._parent(where, path) as parent:
            try:
                info = os.stat(where.name or ".", dir_fd=parent, follow_symlinks=False)
                target = os.readlink(where.name, dir_fd=parent) if stat.S_ISLNK(info.st_mode) else None
            except OSError as exc:
                raise _not_found(exc, path) from exc
        return _described(where, info, target)

    def listing(self, path: str, depth: int) -> list[EntryStat]:
        where = _relative(path)
        found: list[EntryStat] = []
        with self._opened(where, path, os.O_RDONLY | os.O_DIRECTORY) as folder:
            self._walk(folder, where, depth, found)
        return found

    def _walk(self, folder: int, where: PurePosixPath, depth: int, found: list[EntryStat]) -> None:
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda entry: entry.name)
        for entry in listed:
            with contextlib.suppress(OSError):  # gone meanwhile
                info = entry.stat(follow_symlinks=False)
                target = os.readlink(entry.name, dir_fd=folder) if stat.S_ISLNK(info.st_mode) else None
                found.append(_described(where / entry.name, info, target))
                if depth > 1 and stat.S_ISDIR(info.st_mode):
                    inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
                    try:
                        self._walk(inner, where / entry.name, depth - 1, found)
                    finally:
                        os.close(inner)

    def open_file(self, path: str) -> int:
        """A regular file's descriptor for reading; a FIFO or a device is refused, never waited on."""
        where = _relative(path)
        try:
            fd = _open_in(self.root, str(where), os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise _not_found(exc, path) from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ValueError(f"{path!r} is not a file")
        os.set_blocking(fd, True)
        return fd

    def start_file(self, path: str, uid: int, gid: int, mode: int) -> tuple[int, int, str, str]:
        """A new file beside where ``path`` goes (its folders made), to write and then move there
        (:meth:`finish_file`): a write cut short never leaves half a file."""
        where = _relative(path)
        if str(where) == ".":
            raise ValueError("a file needs a name")
        parent = self._made_folders(where.parent, path, uid, gid)
        partial = f".{where.name}.{secrets.token_hex(4)}.partial"
        try:
            fd = os.open(
                partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
            )
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        except OSError as exc:
            os.close(parent)
            raise _not_found(exc, path) from exc
        return fd, parent, partial, where.name

    def finish_file(self, parent: int, partial: str, name: str, path: str) -> EntryStat:
        try:
            os.rename(partial, name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=parent)
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise ValueError(f"{path!r} is a folder") from exc
            raise _not_found(exc, path) from exc
        finally:
            os.close(parent)
        return self.stat(path)

    @staticmethod
    def drop_file(parent: int, partial: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(partial, dir_fd=parent)
        os.close(parent)

    def make_dir(self, path: str, uid: int, gid: int, mode: int, parents: bool) -> EntryStat:
        where = _relative(path)
        if str(where) == ".":
            raise FileExistsError(path)
        parent = (
            self._made_folders(where.parent, path, uid, gid)
            if parents
            else self._opened_fd(where.parent, path, os.O_RDONLY | os.O_DIRECTORY)
        )
        try:
            try:
                os.mkdir(where.name, mode, dir_fd=parent)
            except FileExistsError:
                if parents and stat.S_ISDIR(os.stat(where.name, dir_fd=parent, follow_symlinks=False).st_mode):
                    return self.stat(path)
                raise
            os.chown(where.name, uid, gid, dir_fd=parent, follow_symlinks=False)
            os.chmod(where.name, mode, dir_fd=parent, follow_symlinks=False)
        except FileExistsError:
            raise
        except OSError as exc:
            raise _not_found(exc, path) from exc
        finally:
            os.close(parent)
        return self.stat(path)

    def remove(self, path: str) -> None:
        where = _relative(path)
        if str(where) == ".":
            raise ValueError("the volume's root is not removed; remove the volume")
        with self._parent(where, path) as parent:
            try:
                if stat.S_ISDIR(os.stat(where.name, dir_fd=parent, follow_symlinks=False).st_mode):
                    shutil.rmtree(where.name, dir_fd=parent)
                else:
                    os.unlink(where.name, dir_fd=parent)
            except OSError as exc:
                raise _not_found(exc, path) from exc

    def change(self, path: str, uid: int | None, gid: int | None, mode: int | None) -> EntryStat:
        where = _relative(path)
        with self._parent(where, path) as parent:
            name = where.name or "."
            try:
                if uid is not None or gid is not None:
                    os.chown(
                        name,
                        -1 if uid is None else uid,
                        -1 if gid is None else gid,
                        dir_fd=parent,
                        follow_symlinks=False,
                    )
                if mode is not None:
                    if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                        raise ValueError(f"{path!r} is a link, whose mode does not change")
                    os.chmod(name, mode, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise _not_found(exc, path) from exc
        return self.stat(path)

    def _opened_fd(self, where: PurePosixPath, path: str, flags: int) -> int:
        try:
            return _open_in(self.root, str(where), flags)
        except OSError as exc:
            raise _not_found(exc, path) from exc

    @contextlib.contextmanager
    def _opened(self, where: PurePosixPath, path: str, flags: int) -> Iterator[int]:
        fd = self._opened_fd(where, path, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    def _parent(self, where: PurePosixPath, path: str) -> contextlib.AbstractContextManager[int]:
        """The folder ``where`` is in (the root for the root itself, named ``.``)."""
        return self._opened(where.parent if str(where) != "." else where, path, os.O_RDONLY | os.O_DIRECTORY)

    def _made_folders(self, folder: PurePosixPath, path: str, uid: int, gid: int) -> int:
        """``folder``, each missing part of it made (the user's, mode 0755), opened."""
        current = os.dup(self.root)
        try:
            for part in folder.parts:
                if part == ".":
                    continue
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
                    os.chown(part, uid, gid, dir_fd=current, follow_symlinks=False)
                inner = _open_in(current, part, os.O_RDONLY | os.O_DIRECTORY)
                os.close(current)
                current = inner
        except OSError as exc:
            os.close(current)
            raise _not_found(exc, path) from exc
        return current


# The volumes this process has mounted, by image: each one's mount and how many engines use it.
# Engines of one process may share a directory: one closing must not unmount what another uses.
_shared: dict[Path, tuple[_Mounted, int]] = {}
_shared_guard = threading.Lock()


def _acquire(record: VolumeRecord, image: Path) -> _Mounted:
    with _shared_guard:
        mounted, users = _shared.get(image, (None, 0))
        if mounted is None:
            mounted = _Mounted(record.id, image)
        _shared[image] = (mounted, users + 1)
        return mounted


def _release(image: Path) -> None:
    with _shared_guard:
        mounted, users = _shared.pop(image)
        if users > 1:
            _shared[image] = (mounted, users - 1)
        else:
            mounted.close()


class Volumes:
    """The engine's volumes, kept in ``directory``. Reached as :attr:`Engine.volumes`."""

    def __init__(
        self, directory: Path | None, *, size_mb: int, max_kept: int, users: Callable[[str], list[str]]
    ) -> None:
        self.size_mb = size_mb
        self.max_kept = max_kept
        self._directory = directory
        self._users = users
        self._records: dict[str, VolumeRecord] = {}
        self._creating: set[str] = set()
        self._mounted: dict[str, _Mounted] = {}
        self._guard = threading.Lock()

    def _folder(self) -> Path:
        if self._directory is None:
            raise SandboxError("this engine keeps no volumes: it has no Settings.paused_dir (AIRLOCK_PAUSED_DIR)")
        return self._directory

    def _load(self) -> None:
        """Read the records on disk again: another engine of this process may have made or deleted
        one. Those being made here are kept."""
        on_disk: dict[str, VolumeRecord] = {}
        if self._directory is not None and self._directory.is_dir():
            for path in self._directory.glob("*.json"):
                with contextlib.suppress(OSError, ValueError, EngineError):
                    record = VolumeRecord.model_validate_json(path.read_bytes())
                    if path.name == f"{record.id}.json" and self._image(record.id).is_file():
                        on_disk[record.id] = record
        self._records = {**on_disk, **{kept: self._records[kept] for kept in self._creating}}

    def _image(self, volume_id: str) -> Path:
        if len(volume_id) != 20 or not set(volume_id) <= ID_CHARS:
            raise VolumeNotFound(f"{volume_id!r} is not a volume id")
        return self._folder() / f"{volume_id}.img"

    async def create(self, name: str, metadata: dict[str, str] | None = None) -> VolumeRecord:
        """A new, empty volume of ``size_mb``, its root the sandboxes' user's."""
        record = VolumeRecord(
            id=secrets.token_hex(10),
            name=name,
            token=secrets.token_urlsafe(32),
            size_mb=self.size_mb,
            metadata=dict(metadata or {}),
            created_at=datetime.datetime.now(datetime.UTC),
        )
        folder = self._folder()
        with self._guard:
            self._load()
            if len(self._records) >= self.max_kept:
                raise VolumeLimitReached(f"{self.max_kept} volumes are kept, the most this engine allows; delete one")
            self._records[record.id] = record
            self._creating.add(record.id)
        try:
            await anyio.to_thread.run_sync(self._write_new, folder, record)
            # ext4's lost+found is the file system's, not the volume's.
            mounted = await self._mount(record.id)
            await anyio.to_thread.run_sync(functools.partial(os.rmdir, "lost+found", dir_fd=mounted.root))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.delete(record.id)
            raise
        finally:
            self._creating.discard(record.id)
        return record

    def _write_new(self, folder: Path, record: VolumeRecord) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        format_volume(self._image(record.id), record.size_mb)
        partial = folder / f".{record.id}.json"
        partial.write_text(record.model_dump_json())
        partial.chmod(0o600)
        partial.replace(folder / f"{record.id}.json")

    def list(self) -> list[VolumeRecord]:
        with self._guard:
            self._load()
            return sorted(self._records.values(), key=lambda record: record.created_at)

    def get(self, volume_id: str) -> VolumeRecord:
        with self._guard:
            found = self._records.get(volume_id)
            if found is None:
                self._load()
                found = self._records.get(volume_id)
        if found is None:
            raise VolumeNotFound(f"no volume {volume_id!r}")
        return found

    async def delete(self, volume_id: str) -> bool:
        """Delete a volume and its files; False when there is none. A volume a sandbox has mounted
        (alive or paused to disk) is not deleted: ``SandboxError`` names the sandboxes."""
        with self._guard:
            self._load()
            record = self._records.get(volume_id)
            if record is None:
                return False
            if users := self._users(volume_id):
                raise SandboxError(
                    f"the volume {volume_id} is mounted in the sandboxes {sorted(users)}; kill them first"
                )
            del self._records[volume_id]
            self._creating.discard(volume_id)
            mounted = self._mounted.pop(volume_id, None)
        if mounted is not None:
            await anyio.to_thread.run_sync(_release, self._image(volume_id))
        folder = self._folder()
        (folder / f"{volume_id}.json").unlink(missing_ok=True)
        self._image(volume_id).unlink(missing_ok=True)
        return True

    async def source(self, volume_id: str) -> str:
        """Where the host has the volume mounted (mounting it now if it is not), for a container."""
        return str((await self._mount(volume_id)).where)

    async def _mount(self, volume_id: str) -> _Mounted:
        record = self.get(volume_id)
        with self._guard:
            mounted = self._mounted.get(volume_id)
        if mounted is not None:
            return mounted
        image = self._image(volume_id)
        made = await anyio.to_thread.run_sync(_acquire, record, image)
        with self._guard:
            held = volume_id in self._mounted
            self._mounted.setdefault(volume_id, made)
        if held:  # a task of this engine's mounted it meanwhile: one hold per engine
            await anyio.to_thread.run_sync(_release, image)
        return made

    async def close(self) -> None:
        """Unmount every volume from the host that no other engine of this process uses (a
        container still using one keeps it until it ends)."""
        with self._guard:
            held, self._mounted = list(self._mounted), {}
        for volume_id in held:
            await anyio.to_thread.run_sync(_release, self._image(volume_id))

    # -- the files in a volume, from outside any sandbox ------------------------------------------

    async def stat(self, volume_id: str, path: str) -> EntryStat:
        mounted = await self._mount(volume_id)
        return await anyio.to_thread.run_sync(mounted.stat, path)

    async def list_dir(self, volume_id: str, path: str, depth: int = 1) -> builtins.list[EntryStat]:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        mounted = await self._mount(volume_id)
        return await anyio.to_thread.run_sync(mounted.listing, path, depth)

    async def read(self, volume_id: str, path: str) -> AsyncIterator[bytes]:
        """The file's bytes in chunks; the file is opened (or refused) before this returns."""
        mounted = await self._mount(volume_id)
        fd = await anyio.to_thread.run_sync(mounted.open_file, path)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await anyio.to_thread.run_sync(os.read, fd, CHUNK):
                    yield chunk
            finally:
                os.close(fd)

        return chunks()

    async def write(
        self,
        volume_id: str,
        path: str,
        data: AsyncIterable[bytes],
        *,
        uid: int = VOLUME_USER,
        gid: int = VOLUME_USER,
        mode: int = 0o644,
    ) -> EntryStat:
        """Write ``path`` whole from ``data`` (its folders made as needed), replacing what was there."""
        _check_owner(uid, gid, mode)
        mounted = await self._mount(volume_id)
        fd, parent, partial, name = await anyio.to_thread.run_sync(mounted.start_file, path, uid, gid, mode)
        try:
            try:
                async for chunk in data:
                    await anyio.to_thread.run_sync(_write_all, fd, chunk)
            finally:
                os.close(fd)
        except OSError as exc:
            await anyio.to_thread.run_sync(mounted.drop_file, parent, partial)
            raise _not_found(exc, path) from exc
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(mounted.drop_file, parent, partial)
            raise
        return await anyio.to_thread.run_sync(mounted.finish_file, parent, partial, name, path)

    async def make_dir(
        self,
        volume_id: str,
        path: str,
        *,
        uid: int = VOLUME_USER,
        gid: int = VOLUME_USER,
        mode: int = 0o755,
        parents: bool = False,
    ) -> EntryStat:
        """A new folder; ``parents`` makes the folders above it too, and takes one already there."""
        _check_owner(uid, gid, mode)
        mounted = await self._mount(volume_id)
        return await anyio.to_thread.run_sync(mounted.make_dir, path, uid, gid, mode, parents)

    async def remove(self, volume_id: str, path: str) -> None:
        mounted = await self._mount(volume_id)
        await anyio.to_thread.run_sync(mounted.remove, path)

    async def change(
        self, volume_id: str, path: str, *, uid: int | None = None, gid: int | None = None, mode: int | None = None
    ) -> EntryStat:
        _check_owner(uid, gid, mode)
        mounted = await self._mount(volume_id)
        return await anyio.to_thread.run_sync(mounted.change, path, uid, gid, mode)


def _check_owner(uid: int | None, gid: int | None, mode: int | None) -> None:
    """Owners are the volume's (any id a file system takes); modes are permissions and the sticky
    bit: setuid and setgid bits are refused (every mount of a volume ignores them anyway)."""
    for what, value in (("uid", uid), ("gid", gid)):
        if value is not None and not 0 <= value < 2**31:
            raise ValueError(f"{what} must be from 0 to {2**31 - 1}, not {value}")
    if mode is not None and not 0 <= mode <= 0o1777:
        raise ValueError(f"mode must be permissions (0 to 0o1777, no setuid or setgid bit), not {oct(mode)}")


def _write_all(fd: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view) :]
