"""The OCI runtime: hardened containers run by ``crun`` or ``runc`` directly, without the Docker daemon.

Each image is unpacked once from the local Docker image into a cached root filesystem. Every
container gets a read-only overlay of it as its own root: the same files, but inodes of its
own, so that a lock or a file watch in one container never meets another's (a plain bind
mount would share them). A container is one ``run`` child process of the binary with its
stdio on pipes: no daemon, no shim, no stream multiplexing on the job's path. The policy is
the Docker runtime's, written as an OCI config: our seccomp profile (converted from the same
file), new namespaces with no network interface but ``lo``, a read-only root with tmpfs
scratch, cgroup limits, rlimits, a uid of its own, no capabilities, ``no_new_privs``.

Needs root (the OCI runtime creates namespaces and cgroups) and Docker only to unpack images.
It runs jobs and long-lived sandboxes: a sandbox's PID 1 is a reaper from the image's Python,
each command the binary's ``exec`` with the main process's user, rlimits and no capabilities
(on a terminal: crun's, handed over a socket; runc's, copied to one of ours), its usage read from
its cgroup, a pause the cgroup freezer. Both binaries read the same config; crun (C) starts a
container for about a third of runc's CPU (runc, in Go, starts itself twice per container), so
it is preferred where it can run.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
import docker
import docker.errors

from .._errors import ImageNotFound, RuntimeUnavailable, SandboxError
from ._base import (
    ContainerRef,
    ContainerSpec,
    ContainerUsage,
    Exchange,
    LineSink,
    MoreInput,
    OutputStream,
    Runtime,
    RuntimeInfo,
    Spawned,
    send_all,
)
from ._capture import Capture
from ._child import Child, write_all
from ._dockerapi import connect, export_image, image_config, image_id
from ._labels import MANAGED, SESSION, Owner, forget_leases, is_leftover
from ._policy import READONLY_PATHS, SANDBOX_SCRATCH_PLACES, Policy
from ._seccomp import oci_profile
from ._uids import UidLease, UidPool
from ._volumes import detach_views, make_views

__all__ = ["OciRuntime", "oci_config"]

T = TypeVar("T")

CGROUP_PARENT = "airlock"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Docker's defaults: what /proc and /sys would otherwise tell about the host.
MASKED_PATHS = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
]
ETC_FILES = {"hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n", "resolv.conf": "", "hostname": "sandbox\n"}
KILLED_BY_SIGKILL = 128 + 9
RUNTIME_COMMAND_TIMEOUT_S = 30.0
BINARY_FILE = "oci-runtime"
# How long a container's runtime process gets to exit after each way of stopping it.
EXIT_WAIT_S = 10.0
NATURAL_EXIT_S = 1.0
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
MNT_DETACH = 2
OCI_BINARIES = ("crun", "runc")
# crun applies a filter given as BPF here instead of compiling the config's profile with
# libseccomp, which it does for every container (Debian's crun has no cache for it): 1.7 ms of
# the 11 ms of CPU a container of ours costs it.
SECCOMP_BPF_ANNOTATION = "run.oci.seccomp_bpf_data"
# On a hybrid host (cgroup v1 controllers plus a v2 hierarchy) crun refuses to run while any
# controller is attached to v2; runc ignores v2 there.
UNIFIED_CONTROLLERS = Path("/sys/fs/cgroup/unified/cgroup.controllers")


# A long-lived sandbox's PID 1, from the image's own Python: it says when it runs (a command can
# be started in the container from then on), reaps every process whose parent died (as Docker's
# init does) and ends the sandbox when the engine lets go of its input. As PID 1 of the
# container's pid namespace it gets no signal from inside that it does not handle.
SANDBOX_INIT = (
    "python3",
    "-I",
    "-S",
    "-c",
    "import os, select, signal\n"
    "wake, woken = os.pipe()\n"
    "os.set_blocking(woken, False)\n"
    "signal.set_wakeup_fd(woken)\n"
    "signal.signal(signal.SIGCHLD, lambda *_: None)\n"
    "os.write(1, b'.')\n"
    "while True:\n"
    "    ready = select.select([0, wake], [], [])[0]\n"
    "    if 0 in ready and not os.read(0, 4096):\n"
    "        break\n"
    "    if wake in ready:\n"
    "        os.read(wake, 4096)\n"
    "    try:\n"
    "        while os.waitpid(-1, os.WNOHANG)[0]:\n"
    "            pass\n"
    "    except ChildProcessError:\n"
    "        pass\n",
)
# How long a command's runtime process may take to hand over its terminal.
CONSOLE_WAIT_S = 10.0
# What a sandbox's root may do, and only to what its user namespace holds (its user's files and
# processes, its own): Docker's default set without the raw sockets, device nodes and capability
# changes it has no use for. Nothing that mounts, traces, or reaches past the namespace.
ROOT_CAPABILITIES = [
    f"CAP_{name}"
    for name in ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETUID", "SETGID", "NET_BIND_SERVICE")
]


def _hybrid_blockers() -> list[str]:
    """The controllers that keep crun from running on this hybrid cgroup host (none elsewhere)."""
    try:
        return UNIFIED_CONTROLLERS.read_text().split()
    except OSError:
        return []


# The seals crun takes for a copy of itself that no container can write to (cloned_binary.c).
SEALED = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def sealed_copy(binary: str) -> int:
    """A sealed in-memory copy of ``binary`` (close-on-exec). crun copies itself so on every call,
    lest a container overwrite the host's binary through /proc/self/exe (CVE-2019-5736), and
    executes the copy: a second start, 1 to 3 ms of every call here. Started from one that is
    sealed already, it goes straight on; one copy made at open serves every call."""
    copy = os.memfd_create("crun_cloned:/proc/self/exe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(binary, "rb") as source:
            os.sendfile(copy, source.fileno(), 0, os.fstat(source.fileno()).st_size)
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, SEALED)
    except BaseException:
        os.close(copy)
        raise
    return copy


def choose_oci_binary(wanted: str | None = None) -> str:
    """The OCI runtime binary to run containers with: ``wanted`` (a name or a path), or crun
    when it is installed and can run on this host, else runc.

    :raises RuntimeUnavailable: the wanted binary, or either one, is missing or cannot run here.
    """
    if wanted is not None:
        found = shutil.which(wanted)
        if found is None:
            raise RuntimeUnavailable(f"the OCI runtime {wanted!r} is not installed (Debian: apt-get install {wanted})")
        blockers = _hybrid_blockers()
        if os.path.basename(found) == "crun" and blockers:
            raise RuntimeUnavailable(
                f"crun cannot run on this hybrid cgroup host while {', '.join(blockers)} is attached to the v2 "
                "hierarchy (scripts/setup moves it to v1), or choose runc"
            )
        return found
    for name in OCI_BINARIES:
        found = shutil.which(name)
        if found is not None and not (name == "crun" and _hybrid_blockers()):
            return found
    raise RuntimeUnavailable("neither crun nor runc is installed (Debian: apt-get install crun runc, or scripts/setup)")


def refuse_unsupported(policy: Policy) -> None:
    """Refuse what runc driven directly cannot offer: the gVisor tier (it needs the Docker
    runtime), and anything that only that tier needs."""
    if policy.isolation != "runc":
        raise SandboxError("the OCI runtime runs runc containers only; the gVisor tier needs the Docker runtime")
    if policy.harness_as_root or policy.capabilities or policy.processes_per_user is not None:
        raise SandboxError("the OCI runtime runs every process unprivileged, under the pids cgroup alone")


def oci_config(
    spec: ContainerSpec,
    container_id: str,
    rootfs: Path,
    image_args: list[str],
    uid: int,
    etc: Path,
    root_uid: int | None = None,
    seccomp_bpf: str | None = None,
) -> dict[str, Any]:
    """The one place where a policy becomes an OCI config (run as ``uid``): the twin of the Docker
    runtime's ``container_config``. ``image_args`` is the image's entrypoint and command.

    With ``root_uid`` the container has a user namespace of its own, in which ``uid`` is itself
    and root is ``root_uid``, a second unprivileged host uid: everything else, the image's files
    included, is unmapped there (``nobody``). ``seccomp_bpf``: the config's profile as crun
    compiled it (``OciRuntime._compiled_seccomp``), which crun then applies as it is (runc ignores it)."""
    policy = spec.policy
    refuse_unsupported(policy)
    tmpfs = ["nosuid", "nodev", "noexec"]
    args = list(SANDBOX_INIT) if policy.init else list(policy.command) or image_args
    namespaces = ["pid", "network", "ipc", "uts", "mount", "cgroup"]
    mapped: dict[str, Any] = {}
    if root_uid is not None:
        namespaces.append("user")
        ids = [{"containerID": 0, "hostID": root_uid, "size": 1}, {"containerID": uid, "hostID": uid, "size": 1}]
        mapped = {"uidMappings": ids, "gidMappings": ids}
    return {
        "ociVersion": "1.0.2",
        "process": oci_process(policy, uid, args, cwd=policy.workdir),
        "root": {"path": str(rootfs), "readonly": policy.read_only_root},
        "hostname": policy.hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts",
                "type": "devpts",
                "source": "devpts",
                # The tty group: a gid the kernel refuses where it is not mapped.
                "options": [
                    "nosuid",
                    "noexec",
                    "newinstance",
                    "ptmxmode=0666",
                    "mode=0620",
                    *(["gid=5"] if root_uid is None else []),
                ],
            },
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": tmpfs},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": [*tmpfs, "ro"]},
            {
                "destination": "/sys/fs/cgroup",
                "type": "cgroup",
                "source": "cgroup",
                "options": [*tmpfs, "relatime", "ro"],
            },
            *(
                {
                    "destination": scratch.destination,
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": [
                        "rw",
                        "nosuid",
                        "nodev",
                        "exec" if scratch.executable else "noexec",
                        f"size={scratch.size_mb}m",
                        f"nr_inodes={scratch.inodes}",
                        *(["mode=0700", f"uid={uid}", f"gid={uid}"] if scratch.owned else ["mode=1777"]),
                    ],
                }
                for scratch in policy.scratch
            ),
            *(
                {
                    "destination": bind.destination,
                    "type": "bind",
                    "source": bind.source,
                    "options": ["rbind", "rw", "nosuid", "nodev"],
                }
                for bind in policy.volumes
            ),
            *(
                {"destination": f"/etc/{name}", "type": "bind", "source": str(etc / name), "options": ["rbind", "ro"]}
                for name in ETC_FILES
            ),
        ],
        "linux": {
            "namespaces": [{"type": kind} for kind in namespaces],
            **mapped,
            "cgroupsPath": f"/{CGROUP_PARENT}/{container_id}",
            "resources": {
                "devices": [{"allow": False, "access": "rwm"}],
                "memory": {"limit": policy.memory_bytes, "swap": policy.memory_bytes},
                "cpu": {"quota": int(policy.cpus * 100_000), "period": 100_000},
                "pids": {"limit": policy.pids},
            },
            "seccomp": oci_profile(policy.loopback_sockets),
            "maskedPaths": MASKED_PATHS,
            # Under a user namespace the /dev the runtime made is its root's: read-only, before what
            # is below it (made read-only again after, as /dev's remount brings back what was under it).
            "readonlyPaths": [*(["/dev"] if root_uid is not None else []), *READONLY_PATHS],
        },
        "annotations": {**spec.labels, **({SECCOMP_BPF_ANNOTATION: seccomp_bpf} if seccomp_bpf else {})},
    }


def oci_process(
    policy: Policy,
    uid: int,
    args: list[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    terminal: tuple[int, int] | None = None,
    as_root: bool = False,
) -> dict[str, Any]:
    """A process of a container under ``policy``: its main one, or a command started in it, which
    gets the same user, rlimits, no capabilities and ``no_new_privs`` (and the container's seccomp
    filter, which the runtime applies to every process it starts there). ``as_root``: as root of
    the container's user namespace instead, with ``ROOT_CAPABILITIES`` there."""
    environment = {"PATH": PATH, **dict(policy.environment), "HOSTNAME": policy.hostname, **(env or {})}
    user = 0 if as_root else uid
    granted = ROOT_CAPABILITIES if as_root else []
    process: dict[str, Any] = {
        "terminal": terminal is not None,
        "user": {"uid": user, "gid": user, "additionalGids": [user]},
        "args": args,
        "env": [f"{key}={value}" for key, value in environment.items()],
        "cwd": cwd,
        "capabilities": {
            **{key: list(granted) for key in ("bounding", "effective", "permitted")},
            **{key: [] for key in ("inheritable", "ambient")},
        },
        "rlimits": [
            {"type": "RLIMIT_NOFILE", "hard": policy.open_files, "soft": policy.open_files},
            {"type": "RLIMIT_FSIZE", "hard": policy.file_size_bytes, "soft": policy.file_size_bytes},
            {"type": "RLIMIT_CORE", "hard": 0, "soft": 0},
        ],
        "noNewPrivileges": True,
    }
    if terminal is not None:
        process["consoleSize"] = {"height": terminal[0], "width": terminal[1]}
    return process


class _Running:
    """A container's ``run`` process and what we know about it."""

    def __init__(self, process: Child, bundle: Path) -> None:
        self.process = process
        self.bundle = bundle
        self.killed = False
        self.frozen = False


class OciRuntime(Runtime):
    """Runs each container with an OCI runtime binary (crun or runc) directly.

    :param state_dir: where bundles, the binary's state and the unpacked images live.
    :param binary: the OCI runtime binary, a name or a path; unset: see ``choose_oci_binary``.
    """

    name = "oci"

    def __init__(
        self,
        owner: Owner,
        uids: UidPool,
        *,
        state_dir: Path = Path("/var/lib/airlock/oci"),
        docker_host: str | None = None,
        binary: str | None = None,
    ) -> None:
        self._owner = owner
        self._uids = uids
        self._leases: dict[str, list[UidLease]] = {}
        self._state = state_dir
        self._docker_host = docker_host
        self._running: dict[str, _Running] = {}
        # Commands' runtime processes whose streams were let go of, collected as they exit.
        self._let_go: set[Child] = set()
        self._rootfs: dict[str, Path] = {}
        self._unpacking = anyio.Lock()
        self._wanted_binary = binary
        self._binary = ""
        self._sealed: int | None = None  # crun's sealed copy of itself (see sealed_copy)
        # Our profile as crun compiles it, for jobs and for sandboxes (see _compiled_seccomp).
        self._seccomp_bpf: dict[bool, str] = {}

    # -- setup ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeUnavailable(
                "the OCI runtime needs root (it creates namespaces and cgroups); use the Docker runtime"
            )
        self._binary = choose_oci_binary(self._wanted_binary)
        if os.path.basename(self._binary) == "crun" and self._sealed is None:
            self._sealed = sealed_copy(self._binary)
        for folder in ("bundles", *OCI_BINARIES, os.path.basename(self._binary), "images", "etc", "empty"):
            (self._state / folder).mkdir(parents=True, exist_ok=True)
        for name, text in ETC_FILES.items():
            (self._state / "etc" / name).write_text(text)
        if os.path.basename(self._binary) == "crun" and not self._seccomp_bpf:
            for loopback in (False, True):
                self._seccomp_bpf[loopback] = await anyio.to_thread.run_sync(self._compiled_seccomp, loopback)

    def _compiled_seccomp(self, loopback: bool) -> str:
        """Our seccomp profile (a sandbox's, with ``loopback``) as this crun compiles it, base64:
        the ``seccomp.bpf`` it writes beside the state of a container it created from the profile
        (one that never starts: an empty root, a process that is never run), byte for byte what it
        would apply to every container of ours of that kind."""
        container_id = f"airlock-{uuid.uuid4().hex[:24]}"
        bundle = self._state / "bundles" / container_id
        root = bundle / "rootfs"
        (root / "dev").mkdir(parents=True)
        (root / "never").touch(mode=0o755)  # crun looks for the process's binary at create
        # Named like every container but unlabelled (it belongs to no engine's owner): should we
        # die here, any engine's sweep takes it for a leftover once it is older than making one.
        (bundle / BINARY_FILE).write_text(self._binary)
        config = {
            "ociVersion": "1.0.2",
            "process": {"args": ["/never"], "cwd": "/", "user": {"uid": 65534, "gid": 65534}},
            "root": {"path": str(root), "readonly": True},
            "mounts": [{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]}],
            "linux": {
                "namespaces": [{"type": kind} for kind in ("pid", "network", "ipc", "uts", "mount")],
                "cgroupsPath": f"/{CGROUP_PARENT}/{container_id}",
                "seccomp": oci_profile(loopback),
            },
        }
        (bundle / "config.json").write_text(json.dumps(config))
        command = [*self._command(self._binary), "create", "--bundle", str(bundle), container_id]
        try:
            with open(bundle / "create.log", "w+b") as log:
                # The created container holds the streams it was given until it is deleted.
                try:
                    created = subprocess.run(
                        command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=RUNTIME_COMMAND_TIMEOUT_S
                    )
                except subprocess.TimeoutExpired:
                    raise RuntimeUnavailable("crun did not answer while compiling our seccomp profile") from None
                if created.returncode != 0:
                    log.seek(0)
                    why = log.read().decode(errors="replace").strip()[:300]
                    raise RuntimeUnavailable(f"crun could not compile our seccomp profile: {why}")
            filter_file = self._state / os.path.basename(self._binary) / container_id / "seccomp.bpf"
            return base64.b64encode(filter_file.read_bytes()).decode()
        finally:
            try:
                subprocess.run(
                    [*self._command(self._binary), "delete", "--force", container_id],
                    capture_output=True,
                    timeout=RUNTIME_COMMAND_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                pass  # its bundle stays, for the next sweep
            else:
                _discard_bundle(bundle)

    def _with_docker(self, work: Callable[[docker.DockerClient], T]) -> T:
        """``work`` with a client of the Docker daemon, which this runtime uses only to read images."""
        client = connect(self._docker_host)
        try:
            return work(client)
        finally:
            client.close()

    async def image_id(self, tag: str) -> str | None:
        return await anyio.to_thread.run_sync(self._with_docker, lambda client: image_id(client, tag))

    async def prepare(self, image: str, announce: Callable[[str], None] = lambda message: None) -> None:
        await self._image(image, announce)

    async def _image(self, tag: str, announce: Callable[[str], None] = lambda message: None) -> Path:
        """The unpacked image for ``tag``, unpacking it the first time."""
        if tag in self._rootfs:
            return self._rootfs[tag]
        async with self._unpacking:
            if tag not in self._rootfs:
                image_id = await self.image_id(tag)
                if image_id is None:
                    raise ImageNotFound(f"the image {tag} is not built; run `airlock images build`")
                folder = self._state / "images" / image_id.replace("sha256:", "")[:24]
                if not (folder / "ready").exists():
                    announce(f"unpacking {tag} for the OCI runtime into {folder} (once per image; about 15 s)")
                    await anyio.to_thread.run_sync(self._unpack, tag, folder)
                # Where a sandbox's scratch file systems go: the root is read-only once mounted
                # (Docker makes them in a layer of its own).
                for place in SANDBOX_SCRATCH_PLACES:
                    await anyio.Path(folder / "rootfs" / place.lstrip("/")).mkdir(parents=True, exist_ok=True)
                self._rootfs[tag] = folder
        return self._rootfs[tag]

    async def remove_stale_images(self) -> list[str]:
        """Remove the unpacked images whose Docker image is gone (a rebuilt image's builder
        deletes the old one) and that no container has mounted; the names of those removed."""
        current = await anyio.to_thread.run_sync(
            self._with_docker,
            lambda client: {i.id.replace("sha256:", "")[:24] for i in client.images.list(filters={"label": MANAGED})},
        )
        return await anyio.to_thread.run_sync(self._remove_unpacked_but, current)

    def _remove_unpacked_but(self, current: set[str]) -> list[str]:
        mounts = Path("/proc/mounts").read_text()
        removed = []
        for folder in sorted((self._state / "images").iterdir()):
            # A name with a suffix is an unpacking under way (another engine's); a mounted one is in use.
            if "." in folder.name or folder.name in current or str(folder) in mounts:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            self._rootfs = {tag: path for tag, path in self._rootfs.items() if path != folder}
            removed.append(folder.name)
        return removed

    def _unpack(self, tag: str, folder: Path) -> None:
        scratch = folder.with_name(folder.name + f".{uuid.uuid4().hex[:8]}")
        try:
            (scratch / "rootfs").mkdir(parents=True)
            tar = subprocess.Popen(
                ["tar", "-x", "--numeric-owner", "-C", str(scratch / "rootfs")], stdin=subprocess.PIPE
            )
            assert tar.stdin is not None
            stream = tar.stdin
            try:
                config = self._with_docker(lambda client: image_config(client, tag))
                self._with_docker(lambda client: export_image(client, tag, self._owner.labels("unpack"), stream.write))
            finally:
                stream.close()
                if tar.wait() != 0:
                    raise SandboxError(f"unpacking {tag}: tar failed with status {tar.returncode}")
            meta = {"entrypoint": config.get("Entrypoint") or [], "cmd": config.get("Cmd") or []}
            (scratch / "image.json").write_text(json.dumps(meta))
            (scratch / "ready").write_text(tag)
            if not folder.exists():  # another engine may have unpacked it meanwhile
                os.replace(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # -- containers ------------------------------------------------------------------------------------

    async def create(self, spec: ContainerSpec) -> ContainerRef:
        refuse_unsupported(spec.policy)
        image = await self._image(spec.image)
        container_id = f"airlock-{uuid.uuid4().hex[:24]}"
        bundle = self._state / "bundles" / container_id
        # A sandbox's root is a host uid of its own too: per-user kernel accounts hold for it as well.
        leases = [self._uids.acquire() for _ in range(2 if spec.policy.init else 1)]
        uid, root_uid = leases[0].uid, leases[1].uid if spec.policy.init else None
        try:
            await anyio.to_thread.run_sync(self._prepare_bundle, spec, container_id, bundle, image, uid, root_uid)
            command = [*self._command(self._binary), "run", "--bundle", str(bundle), container_id]
            try:
                process = Child(command)
            except OSError as exc:
                raise SandboxError(f"starting {self._binary}: {exc}") from exc
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_discard_bundle, bundle)
            for lease in leases:
                lease.release()
            raise
        self._leases[container_id] = leases
        self._running[container_id] = _Running(process, bundle)
        if spec.policy.init:
            await self._until_running(container_id, process)
        if spec.policy.volumes:
            # The container holds its binds itself now; the host needs the views no longer.
            await anyio.to_thread.run_sync(detach_views, bundle / VOLUME_VIEWS)
        return ContainerRef(id=container_id, spec=spec, uid=uid, root_uid=root_uid)

    async def _until_running(self, container_id: str, process: Child) -> None:
        """Wait for a sandbox's init to say it runs; a container that fails to start is removed."""
        started = b""
        with anyio.move_on_after(RUNTIME_COMMAND_TIMEOUT_S):
            started = await process.receive("stdout")
        if started != b".":
            failure = b""
            with anyio.move_on_after(1):
                failure = await process.receive("stderr")
            with anyio.CancelScope(shield=True):
                await self._remove(container_id)
            raise SandboxError(f"the sandbox did not start: {failure.decode(errors='replace').strip()[:500]}")

    def _prepare_bundle(
        self, spec: ContainerSpec, container_id: str, bundle: Path, image: Path, uid: int, root_uid: int | None
    ) -> None:
        """Write the bundle and mount the container's own root."""
        (bundle / "rootfs").mkdir(parents=True)
        # Its owner first, whole: another engine's sweep takes a bundle without one for a leftover.
        partial = bundle / "labels.json.partial"
        partial.write_text(json.dumps(dict(spec.labels)))
        partial.replace(bundle / "labels.json")
        meta = json.loads((image / "image.json").read_text())
        image_args = [*meta["entrypoint"], *meta["cmd"]]
        beneath = self._state / "empty"
        if spec.policy.volumes:
            binds = make_views(spec.policy.volumes, bundle / VOLUME_VIEWS, uid, root_uid)
            spec = spec.model_copy(update={"policy": spec.policy.model_copy(update={"volumes": binds})})
            # The read-only root has no folder to mount a volume on: a layer under the image's has.
            beneath = bundle / "mountpoints"
            for bind in binds:
                (beneath / bind.destination.lstrip("/")).mkdir(parents=True, exist_ok=True)
        config = oci_config(
            spec,
            container_id,
            bundle / "rootfs",
            image_args,
            uid,
            self._state / "etc",
            root_uid,
            self._seccomp_bpf.get(spec.policy.loopback_sockets),
        )
        (bundle / "config.json").write_text(json.dumps(config))
        (bundle / BINARY_FILE).write_text(self._binary)
        _mount_overlay(image / "rootfs", beneath, bundle / "rootfs")

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
        running = self._running.get(container.id)
        if running is None:
            raise SandboxError(f"container {container.id} is not running")
        process = running.process
        started = time.monotonic()
        capture = Capture(stdout_limit, stderr_limit, on_stdout_line)

        async def feed() -> None:
            await send_all(request, more_input, process.send)
            process.close_input()

        async def drain(stream: Literal["stdout", "stderr"], into: Callable[[bytes], None]) -> None:
            while not capture.done and (chunk := await process.receive(stream)):
                into(chunk)

        ended = False
        with anyio.move_on_after(deadline_s):
            async with anyio.create_task_group() as group:
                group.start_soon(feed)
                group.start_soon(drain, "stderr", capture.feed_stderr)
                await drain("stdout", capture.feed_stdout)
                group.cancel_scope.cancel()
            ended = not capture.done
        if capture.stopped:
            # The reader has what it needs; remove() kills whatever is still running.
            return capture.exchange(started, timed_out=False, exit_code=None)
        if not ended:
            await self._kill(container.id)
        with anyio.move_on_after(EXIT_WAIT_S):
            await process.wait()
        code = process.returncode
        timed_out = not ended and not capture.done
        oom = code == KILLED_BY_SIGKILL and not running.killed
        return capture.exchange(started, timed_out=timed_out, exit_code=code, oom_killed=oom)

    async def spawn(
        self,
        container: ContainerRef,
        argv: list[str],
        *,
        workdir: str,
        env: Mapping[str, str],
        terminal: tuple[int, int] | None = None,
        as_root: bool = False,
    ) -> Spawned:
        for done in [child for child in self._let_go if child.reaped()]:
            done.close()
            self._let_go.discard(done)
        running = self._running.get(container.id)
        if running is None:
            raise SandboxError(f"container {container.id} is not running")
        if as_root and container.root_uid is None:
            raise SandboxError(f"container {container.id} has no user namespace, so no root of its own")
        process = oci_process(
            container.spec.policy, container.uid, argv, cwd=workdir, env=env, terminal=terminal, as_root=as_root
        )
        scratch = running.bundle / f"exec-{uuid.uuid4().hex[:12]}"
        scratch.mkdir()
        try:
            (scratch / "process.json").write_text(json.dumps(process))
            command = [*self._command(self._binary), "exec", "--process", str(scratch / "process.json")]
            if terminal is None:
                return OciCommand(self._exec(command, container.id), scratch, self._let_go)
            command.append("--tty")
            if os.path.basename(self._binary) == "runc":
                return self._exec_on_host_terminal(command, container.id, scratch, terminal)
            # crun hands the terminal's controlling side over a socket of ours, and waits for the command.
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(str(scratch / "console"))
                listener.listen(1)
                listener.setblocking(False)
                child = self._exec([*command, "--console-socket", str(scratch / "console")], container.id)
                try:
                    controlling = await _received_terminal(listener)
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await OciCommand(child, scratch, self._let_go).aclose()
                    raise
            return OciCommand(child, scratch, self._let_go, controlling)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise

    def _exec_on_host_terminal(
        self, command: list[str], container_id: str, scratch: Path, size: tuple[int, int]
    ) -> OciCommand:
        """runc hands a terminal over only when it detaches, and then the command's exit status
        is lost: in the foreground it copies between the container's terminal and its own, which
        is one of ours here, and follows its size on SIGWINCH."""
        controlling, device = os.openpty()
        try:
            _set_size(controlling, *size)
            child = self._exec(command, container_id, terminal=device)
        except BaseException:
            os.close(controlling)
            raise
        finally:
            os.close(device)
        os.set_blocking(controlling, False)
        return OciCommand(child, scratch, self._let_go, controlling, follows_size=child.pid)

    def _exec(self, command: list[str], container_id: str, *, terminal: int | None = None) -> Child:
        try:
            return Child([*command, container_id], terminal=terminal)
        except OSError as exc:
            raise SandboxError(f"starting a command with {self._binary}: {exc}") from exc

    async def usage(self, container: ContainerRef) -> ContainerUsage:
        return await anyio.to_thread.run_sync(_cgroup_usage, f"{CGROUP_PARENT}/{container.id}")

    async def freeze(self, container: ContainerRef) -> None:
        await self._checked_command("pausing a container", "pause", container.id)
        self._running[container.id].frozen = True

    async def thaw(self, container: ContainerRef) -> None:
        await self._checked_command("resuming a container", "resume", container.id)
        self._running[container.id].frozen = False

    async def _checked_command(self, doing: str, *args: str) -> None:
        with anyio.move_on_after(RUNTIME_COMMAND_TIMEOUT_S):
            done = await anyio.run_process([*self._command(self._binary), *args], check=False)
            if done.returncode != 0:
                raise SandboxError(f"{doing}: {done.stderr.decode(errors='replace').strip()[:300]}")
            return
        raise SandboxError(f"{doing}: {os.path.basename(self._binary)} did not answer")

    async def _kill(self, container_id: str) -> None:
        running = self._running.get(container_id)
        if running is not None:
            running.killed = True
        await self._runtime_command(self._binary_of(container_id), "kill", container_id, "KILL")

    def _command(self, binary: str) -> list[str]:
        """The binary with its own state folder (crun and runc each keep their own format); this
        runtime's crun from its sealed copy, reached through this process's descriptor."""
        executable = binary
        if binary == self._binary and self._sealed is not None:
            executable = f"/proc/{os.getpid()}/fd/{self._sealed}"
        return [executable, "--root", str(self._state / os.path.basename(binary))]

    def _binary_of(self, container_id: str) -> str:
        """The binary that runs a container, as its bundle names it (a leftover's may be another
        engine's); a bundle that names none was written when runc was the only one."""
        try:
            return (self._state / "bundles" / container_id / BINARY_FILE).read_text()
        except OSError:
            return shutil.which("runc") or self._binary

    async def _runtime_command(self, binary: str, *args: str) -> None:
        """One command of a container's OCI runtime, bounded: one that hangs must not hang the
        engine with it."""
        with anyio.move_on_after(RUNTIME_COMMAND_TIMEOUT_S):
            await anyio.run_process([*self._command(binary), *args], check=False)

    async def remove(self, container: ContainerRef) -> None:
        await self._remove(container.id)

    async def _remove(self, container_id: str) -> None:
        running = self._running.get(container_id)
        if running is not None:
            if not await self._stop(container_id, running):
                binary = os.path.basename(self._binary_of(container_id))
                raise SandboxError(f"{binary} did not stop container {container_id}; it is left for the next sweep")
            del self._running[container_id]
        await self._delete(container_id)

    async def _stop(self, container_id: str, running: _Running) -> bool:
        """Make the container's ``run`` process exit, by the gentlest way that works; whether it did."""
        process = running.process
        if running.frozen:  # a frozen process cannot even die
            with contextlib.suppress(SandboxError):
                await self._checked_command("resuming a container", "resume", container_id)
        # A harness still waiting for its request, or a sandbox's init, ends by itself at end of input.
        process.close_input()
        # A harness that has reported is already on its way out; waiting for it costs less than a kill command.
        with anyio.move_on_after(NATURAL_EXIT_S):
            await process.wait()
        for stop in (self._kill, self._kill_session):
            if process.returncode is None:
                await stop(container_id)
                with anyio.move_on_after(EXIT_WAIT_S):
                    await process.wait()
        if process.returncode is None:
            return False
        process.close()
        return True

    async def _kill_session(self, container_id: str) -> None:
        """SIGKILL to the ``run`` process and everything in its session, for a container the runtime cannot
        signal (one whose state it has not written yet)."""
        running = self._running.get(container_id)
        if running is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.process.pid, signal.SIGKILL)

    async def _delete(self, container_id: str) -> None:
        # A `run` that ended by itself has deleted its container; only a killed one leaves state.
        binary = self._binary_of(container_id)
        if (self._state / os.path.basename(binary) / container_id).exists():
            await self._runtime_command(binary, "delete", "--force", container_id)
        await anyio.to_thread.run_sync(_discard_bundle, self._state / "bundles" / container_id)
        # Only a container that is gone gives its uids back.
        for lease in self._leases.pop(container_id, []):
            lease.release()

    def _bundles(self) -> list[tuple[str, dict[str, str]]]:
        """Every bundle with its labels. One without labels is a leftover of an engine that died
        while making it, or one that another engine is making right now (its labels come a moment
        after its folder): it is listed once it has not changed for as long as making one may take."""
        found = []
        for bundle in (self._state / "bundles").glob("airlock-*"):
            try:
                labels = json.loads((bundle / "labels.json").read_text())
            except (OSError, ValueError):
                labels = {}
                with contextlib.suppress(OSError):
                    if time.time() - bundle.stat().st_mtime < RUNTIME_COMMAND_TIMEOUT_S:
                        continue
            found.append((bundle.name, labels))
        return found

    async def list_ours(self) -> list[str]:
        return [name for name, _ in await anyio.to_thread.run_sync(self._bundles)]

    async def remove_leftovers(self, *, everything: bool = False, session: str | None = None) -> list[str]:
        stale = []
        for name, labels in await anyio.to_thread.run_sync(self._bundles):
            if name in self._running and session is None:
                continue
            if session is not None:
                wanted = labels.get(SESSION) == session
            else:
                wanted = everything or not labels or is_leftover(labels)
            if wanted:
                stale.append(name)
                if name in self._running:
                    with contextlib.suppress(SandboxError):
                        await self._remove(name)
                else:
                    await self._kill(name)
                    await self._delete(name)
        if session is None:
            # Only now that their containers are gone may the uids and leases of dead engines go.
            await anyio.to_thread.run_sync(self._uids.sweep)
            live = {labels.get(SESSION, "") for name, labels in await anyio.to_thread.run_sync(self._bundles)}
            await anyio.to_thread.run_sync(forget_leases, self.name, live)
        return stale

    async def describe(self) -> RuntimeInfo:
        binary = self._binary or choose_oci_binary(self._wanted_binary)
        result = await anyio.run_process([binary, "--version"], check=False)
        version = result.stdout.decode(errors="replace").splitlines()[:1]
        return RuntimeInfo(
            name=self.name,
            version=f"{version[0] if version else binary} on {platform.machine()}",
            isolations=frozenset({"runc"}),
            supports_exec=True,
            cgroup_version=2 if await anyio.Path("/sys/fs/cgroup/cgroup.controllers").exists() else 1,
        )

    async def aclose(self) -> None:
        for container_id in list(self._running):
            with contextlib.suppress(SandboxError):  # left on disk for the next engine's sweep
                await self._remove(container_id)
        # Their containers are gone, and with them the commands these processes waited for.
        for child in self._let_go:
            with anyio.move_on_after(EXIT_WAIT_S):
                await child.wait()
            child.close()
        if self._sealed is not None:
            os.close(self._sealed)
            self._sealed = None


# Where, in a bundle, the views of a container's volumes are made.
VOLUME_VIEWS = "volumes"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_overlay(lower: Path, empty: Path, target: Path) -> None:
    """A read-only overlay of ``lower`` at ``target`` (two lower layers and no upper one make an
    overlay read-only; ``empty`` is the second)."""
    options = f"lowerdir={lower}:{empty}".encode()
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV
    if _libc().mount(b"overlay", bytes(target), b"overlay", flags, options) != 0:
        error = ctypes.get_errno()
        raise SandboxError(f"mounting the container's root at {target}: {os.strerror(error)}")


def _unmount(target: Path) -> None:
    _libc().umount2(bytes(target), MNT_DETACH)


def _discard_bundle(bundle: Path) -> None:
    """Unmount a bundle's root, then delete the bundle; never delete through a mounted root or
    into a volume."""
    detach_views(bundle / VOLUME_VIEWS)
    rootfs = bundle / "rootfs"
    if os.path.ismount(rootfs):
        _unmount(rootfs)
    if os.path.ismount(rootfs):
        raise SandboxError(f"cannot unmount {rootfs}; the bundle is left for the next sweep")
    shutil.rmtree(bundle, ignore_errors=True)


async def _received_terminal(listener: socket.socket) -> int:
    """The terminal's controlling side, as the runtime's ``exec`` sends it to ``listener``."""
    with anyio.move_on_after(CONSOLE_WAIT_S):
        while True:
            await anyio.wait_readable(listener)
            try:
                connection, _ = listener.accept()
            except BlockingIOError:
                continue
            with connection:
                connection.setblocking(True)
                _, fds, _, _ = socket.recv_fds(connection, 4096, 1)
            if fds:
                os.set_blocking(fds[0], False)
                return fds[0]
            break
    raise SandboxError("the OCI runtime did not hand over the command's terminal")


def _set_size(terminal: int, rows: int, columns: int) -> None:
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def _cgroup_usage(path: str) -> ContainerUsage:
    """CPU time and memory of the cgroup at ``path`` (under each v1 controller, or v2's one tree)."""
    root = Path("/sys/fs/cgroup")
    try:
        if (root / "cgroup.controllers").exists():
            group = root / path
            cpu_s = _stat_lines(group / "cpu.stat")["usage_usec"] / 1e6
            stats = _stat_lines(group / "memory.stat")
            used, inactive, cache = int((group / "memory.current").read_text()), stats["inactive_file"], stats["file"]
        else:
            cpu_s = int((root / "cpuacct" / path / "cpuacct.usage").read_text()) / 1e9
            memory = root / "memory" / path
            stats = _stat_lines(memory / "memory.stat")
            used = int((memory / "memory.usage_in_bytes").read_text())
            inactive, cache = stats["total_inactive_file"], stats["total_cache"]
    except (OSError, KeyError, ValueError) as exc:
        raise SandboxError(f"reading the sandbox's cgroup: {exc}") from exc
    # As `docker stats` counts it: what the kernel could drop at once is not in use.
    return ContainerUsage(cpu_s=cpu_s, memory_bytes=max(0, used - inactive), cache_bytes=cache)


def _stat_lines(path: Path) -> dict[str, int]:
    return {name: int(value) for name, value in (line.split() for line in path.read_text().splitlines())}


class OciCommand(Spawned):
    """A command started with the OCI runtime's ``exec``: the runtime's child, whose pipes the
    runtime hands to the command as its stdio, or, on a terminal, a terminal's controlling side
    (the container's own under crun, one runc copies to under runc)."""

    def __init__(
        self,
        child: Child,
        scratch: Path,
        let_go: set[Child],
        terminal: int | None = None,
        *,
        follows_size: int | None = None,
    ) -> None:
        self._child = child
        self._let_go = let_go
        self._scratch = scratch
        self._terminal = terminal
        # The runtime process that copies to the container's terminal and resizes it on SIGWINCH.
        self._follows_size = follows_size

    async def receive(self) -> tuple[OutputStream, bytes] | None:
        if self._terminal is None:
            return await self._child.receive_either()
        while True:
            await anyio.wait_readable(self._terminal)
            try:
                data = os.read(self._terminal, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # EIO: the terminal's last holder is gone
                data = b""
            return ("stdout", data) if data else None

    async def send(self, data: bytes) -> None:
        if self._terminal is None:
            await self._child.send(data)
            return
        await write_all(self._terminal, data)

    async def close_input(self) -> None:
        self._child.close_input()

    async def exit_code(self) -> int | None:
        with anyio.move_on_after(EXIT_WAIT_S):
            code = await self._child.wait()
            return 128 - code if code < 0 else code
        return None

    async def resize(self, rows: int, columns: int) -> None:
        if self._terminal is None:
            await super().resize(rows, columns)
            return
        _set_size(self._terminal, rows, columns)
        if self._follows_size is not None and self._child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._follows_size, signal.SIGWINCH)

    async def aclose(self) -> None:
        if self._terminal is not None:
            terminal, self._terminal = self._terminal, None
            anyio.notify_closing(terminal)
            os.close(terminal)
        self._child.close_pipes()
        if self._child.reaped():
            self._child.close()
        else:
            # Let go of, not stopped: the runtime's process waits for the command, and is
            # collected once it has exited.
            self._let_go.add(self._child)
        shutil.rmtree(self._scratch, ignore_errors=True)
