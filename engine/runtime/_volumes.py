"""Volumes on the host: each one a file system of its own (ext4 in a sparse file, so its size is a
hard limit and it outlives every sandbox), mounted once on the host where no sandbox sees it, and
shown to each sandbox through an idmapped mount of its own.

A volume's files belong to two owners on disk: ``VOLUME_USER`` (E2B's uid for its sandboxes'
user) and root. The idmapped view shows them as the sandbox's own user and root (host uids leased
to that sandbox alone), and what the sandbox writes lands on disk as theirs: every sandbox
reads and writes the same files as its own, and no sandbox can make a file that is another host
uid's. The host's own mount is ``nosuid,nodev,noexec`` and sits in a root-only directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .._errors import SandboxError
from ._labels import lease_released, run_dir

__all__ = [
    "GVISOR_HAS_NO_VOLUMES",
    "VIEWS",
    "VOLUME_USER",
    "VolumeBind",
    "detach",
    "detach_views",
    "format_volume",
    "make_views",
    "mount_volume",
    "sweep_views",
]

GVISOR_HAS_NO_VOLUMES = (
    "volumes are not offered on the gVisor tier: Debian's runsc (release 20221219) answers every"
    " statx of a directory in a bind mount with EINVAL, so ls, find and stat fail in one; use the runc tier"
)
# Where, under the run directory, the Docker runtime makes the views it binds.
VIEWS = "volume-views"
# The owner on disk of what a sandbox's user writes, shown to each sandbox as its own user.
VOLUME_USER = 1000
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_NOEXEC, _MOUNT_ATTR_IDMAP = 0x2, 0x4, 0x8, 0x100000
_MNT_DETACH = 2
# How long a helper process may take to enter its user namespace.
_NAMESPACE_WAIT_S = 5.0


class VolumeBind(BaseModel):
    """A volume in a container: its file system as the host mounted it, and where it appears."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    destination: str


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _checked(result: int, what: str) -> int:
    if result < 0:
        error = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(error)}")
    return result


def format_volume(image: Path, size_mb: int) -> None:
    """A new, empty volume of ``size_mb`` in the sparse file ``image``: its root is the user's,
    and none of it is kept for root (``-m 0``), so the size is what every sandbox has."""
    with open(image, "xb") as file:
        file.truncate(size_mb * 1024 * 1024)
    result = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"root_owner={VOLUME_USER}:{VOLUME_USER}", str(image)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        image.unlink(missing_ok=True)
        raise SandboxError(f"making the volume's file system: {result.stderr.decode(errors='replace').strip()}")


def mount_volume(image: Path, target: Path) -> None:
    """Mount the volume in ``image`` at ``target`` for the host (a loop device freed at unmount)."""
    if os.path.ismount(target):
        return  # an engine before this one, on the same directory, mounted it
    target.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noexec", str(image), str(target)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise SandboxError(f"mounting the volume {image.stem}: {result.stderr.decode(errors='replace').strip()}")


def detach(target: Path) -> None:
    """Unmount ``target`` lazily (what still uses it keeps it until done) and remove the folder."""
    _libc().umount2(bytes(target), _MNT_DETACH)
    with contextlib.suppress(OSError):
        target.rmdir()


def make_views(binds: tuple[VolumeBind, ...], folder: Path, user: int, root: int | None) -> tuple[VolumeBind, ...]:
    """Each volume's view for a container whose user is host uid ``user`` and root ``root`` (None
    where it has no root of its own), in ``folder``: the binds to give the runtime. Detach them
    (:func:`detach_views`) once the container has them mounted, or it failed."""
    views = []
    try:
        for index, bind in enumerate(binds):
            view = folder / str(index)
            _idmapped_view(Path(bind.source), view, user, root)
            views.append(VolumeBind(source=str(view), destination=bind.destination))
    except BaseException:
        detach_views(folder)
        raise
    return tuple(views)


def detach_views(folder: Path) -> None:
    """Detach every view in ``folder`` and remove the folder; raise if one stays mounted, so that
    nothing deletes through it into a volume."""
    with contextlib.suppress(FileNotFoundError):
        for view in folder.iterdir():
            detach(view)
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SandboxError(f"a volume's view in {folder} stays mounted: {exc}") from exc


def sweep_views() -> None:
    """Detach the views that engines now gone made and never detached (they died between making a
    container's views and starting it). A folder's name starts with its engine's session."""
    with contextlib.suppress(FileNotFoundError):
        for folder in run_dir(VIEWS).iterdir():
            if lease_released(folder.name.rpartition("-")[0], run_dir("owners")):
                with contextlib.suppress(SandboxError):
                    detach_views(folder)


def _idmapped_view(source: Path, target: Path, user: int, root: int | None) -> None:
    """Mount ``source`` again at ``target`` (``nosuid,nodev``; programs run from it, as from the
    sandbox's own places, where the host's mount runs none) with its ``VOLUME_USER`` shown as
    host uid ``user`` and its root as ``root``, both ways; any other owner on disk (root's too,
    without a ``root``) is unmapped: shown as ``nobody``, never written as, never setuid to."""
    target.mkdir(parents=True, exist_ok=True)
    namespace = _user_namespace([(VOLUME_USER, user), *([(0, root)] if root is not None else [])])
    libc = _libc()
    try:
        tree = _checked(
            libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, bytes(source), _OPEN_TREE_CLONE | os.O_CLOEXEC),
            "cloning the volume's mount",
        )
        try:
            attributes = _MountAttr(
                _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, _MOUNT_ATTR_NOEXEC, 0, namespace
            )
            _checked(
                libc.syscall(
                    _SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attributes), ctypes.sizeof(attributes)
                ),
                "mapping the volume's owners",
            )
            _checked(
                libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, bytes(target), _MOVE_MOUNT_F_EMPTY_PATH),
                "mounting the volume's view",
            )
        finally:
            os.close(tree)
    finally:
        os.close(namespace)


def _user_namespace(ids: list[tuple[int, int]]) -> int:
    """A descriptor of a new user namespace mapping each (inside, host) pair of uids and gids."""
    helper = subprocess.Popen(["unshare", "--user", "sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        ours = os.stat("/proc/self/ns/user").st_ino
        waited = time.monotonic() + _NAMESPACE_WAIT_S
        while os.stat(f"/proc/{helper.pid}/ns/user").st_ino == ours:
            if time.monotonic() > waited or helper.poll() is not None:
                raise SandboxError("no user namespace could be made for a volume's view")
            time.sleep(0.0005)
        mapping = "".join(f"{inside} {host} 1\n" for inside, host in ids)
        for kind in ("uid_map", "gid_map"):
            Path(f"/proc/{helper.pid}/{kind}").write_text(mapping)
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.kill()
        helper.wait()
