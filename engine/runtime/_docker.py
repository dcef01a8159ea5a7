"""The Docker runtime: hardened containers through the Docker Engine API (docker-py).

docker-py is blocking, so every call runs in a worker thread under this runtime's own
capacity limiter. A blocking call cannot be cancelled usefully, so deadlines are enforced by
killing the container, never by abandoning a call.
"""

from __future__ import annotations

import contextlib
import functools
import selectors
import socket
import struct
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import docker
import docker.errors
from docker.types import LogConfig, Ulimit

from .._errors import EngineError, RuntimeUnavailable, SandboxError
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
)
from ._capture import Capture
from ._dockerapi import connect, image_id, map_docker_errors
from ._labels import MANAGED, SESSION, Owner, forget_leases, is_leftover, run_dir
from ._policy import READONLY_PATHS
from ._seccomp import profile_json
from ._uids import UidLease, UidPool
from ._volumes import GVISOR_HAS_NO_VOLUMES, VIEWS, detach_views, make_views, sweep_views

__all__ = ["DockerRuntime", "choose_docker_runtime", "container_config"]

T = TypeVar("T")

STDOUT, STDERR = 1, 2
_FRAME_HEADER = struct.Struct(">BxxxL")
# How long to wait for a container to report its exit once its output has ended.
EXIT_GRACE_S = 10.0
# How long a cancelled start waits for its container's removal: past it, the call goes on in its
# thread and the engine's close sweeps what is left, so a deadline is not held up by a stuck daemon.
ABANDONED_REMOVAL_S = 1.0


def choose_docker_runtime(registered: Collection[str], wanted: str | None = None) -> str | None:
    """The dockerd runtime that runs the runc tier: ``wanted`` (a name registered with dockerd),
    or crun when dockerd has it (``scripts/setup`` registers it where crun can run), else None:
    the daemon's default.

    :raises RuntimeUnavailable: dockerd has no runtime named ``wanted``.
    """
    if wanted is None:
        return "crun" if "crun" in registered else None
    if wanted not in registered:
        raise RuntimeUnavailable(
            f"dockerd has no runtime named {wanted!r} (it has {', '.join(sorted(registered)) or 'none'}); "
            "register it in /etc/docker/daemon.json (scripts/setup registers crun)"
        )
    return wanted


def container_config(api: docker.APIClient, spec: ContainerSpec, uid: int, oci_runtime: str | None) -> dict[str, Any]:
    """The one place where a policy becomes Docker's container config (run as ``uid``, the runc
    tier by dockerd's runtime ``oci_runtime``, None for the daemon's default)."""
    policy = spec.policy
    if policy.volumes and policy.isolation == "gvisor":
        raise SandboxError(GVISOR_HAS_NO_VOLUMES)
    host_config = api.create_host_config(
        network_mode="none",
        dns=["127.0.0.1"],
        cap_drop=["ALL"],
        cap_add=list(policy.capabilities) or None,
        security_opt=["no-new-privileges", f"seccomp={profile_json(policy.isolation, policy.loopback_sockets)}"],
        read_only=policy.read_only_root,
        tmpfs={
            scratch.destination: f"rw,nosuid,nodev,{'exec' if scratch.executable else 'noexec'},"
            + f"size={scratch.size_mb}m,nr_inodes={scratch.inodes},"
            + (f"mode=0700,uid={uid},gid={uid}" if scratch.owned else "mode=1777")
            for scratch in policy.scratch
        },
        binds={bind.source: {"bind": bind.destination, "mode": "rw"} for bind in policy.volumes} or None,
        ipc_mode="private",
        pids_limit=policy.pids,
        mem_limit=policy.memory_bytes,
        memswap_limit=policy.memory_bytes,
        nano_cpus=int(policy.cpus * 1e9),
        ulimits=[
            Ulimit(name="nofile", soft=policy.open_files, hard=policy.open_files),
            Ulimit(name="fsize", soft=policy.file_size_bytes, hard=policy.file_size_bytes),
            Ulimit(name="core", soft=0, hard=0),
            *(
                [Ulimit(name="nproc", soft=policy.processes_per_user, hard=policy.processes_per_user)]
                if policy.processes_per_user is not None
                else []
            ),
        ],
        init=policy.init,
        log_config=LogConfig(type="none"),
        cgroupns="private",
        runtime="runsc" if policy.isolation == "gvisor" else oci_runtime,
    )
    config: dict[str, Any] = api.create_container_config(
        spec.image,
        None,  # type: ignore[arg-type]  # None keeps the image's command
        entrypoint=list(policy.command) or None,
        user="0:0" if policy.harness_as_root else f"{uid}:{uid}",
        working_dir=policy.workdir,
        environment={**dict(policy.environment), "AIRLOCK_SANDBOX_UID": str(uid)},
        hostname=policy.hostname,
        labels=dict(spec.labels),
        stdin_open=True,
        network_disabled=True,
        host_config=host_config,
    )
    # docker-py has no argument for either. Without StdinOnce a closed attach would not end stdin;
    # ReadonlyPaths replaces the daemon's list, which READONLY_PATHS extends.
    config["StdinOnce"] = True
    config["HostConfig"]["ReadonlyPaths"] = list(READONLY_PATHS)
    return config


class DockerRuntime(Runtime):
    """Runs each container through the Docker daemon.

    :param base_url: the daemon's address; ``None`` reads ``DOCKER_HOST`` like the docker CLI.
    :param max_calls: Docker API calls in flight at once (each one holds a thread).
    :param max_streams: containers being fed or read at once (each one holds a thread).
    :param oci_binary: the dockerd runtime for the runc tier (see :func:`choose_docker_runtime`).
    """

    name = "docker"

    def __init__(
        self,
        owner: Owner,
        uids: UidPool,
        *,
        base_url: str | None = None,
        max_calls: int = 16,
        max_streams: int = 64,
        oci_binary: str | None = None,
    ) -> None:
        self._owner = owner
        self._wanted_oci_runtime = oci_binary
        self._oci_runtime: str | None = None
        self._uids = uids
        self._leases: dict[str, UidLease] = {}
        self._abandoned_leases: list[UidLease] = []
        self._base_url = base_url
        self._calls = anyio.CapacityLimiter(max_calls)
        self._streams = anyio.CapacityLimiter(max_streams)
        self._client: docker.DockerClient | None = None
        self._max_pool = max_calls + max_streams

    @property
    def api(self) -> docker.APIClient:
        if self._client is None:
            raise RuntimeUnavailable("the Docker runtime is not open (the engine was closed, or never entered)")
        return self._client.api

    async def open(self) -> None:
        self._client = await anyio.to_thread.run_sync(
            functools.partial(connect, self._base_url, max_pool_size=self._max_pool), limiter=self._calls
        )
        info = await self._call("reading the engine's facts", self.api.info)
        self._oci_runtime = choose_docker_runtime(set(info.get("Runtimes") or {}), self._wanted_oci_runtime)

    async def _call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # A cancelled caller does not wait for the daemon (a stuck one answers nothing for a
        # minute): the call goes on in its thread, and what it leaves (a container made after
        # all) carries this engine's labels, which its close sweeps.
        with map_docker_errors(action):
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args, **kwargs), limiter=self._calls, abandon_on_cancel=True
            )

    def statistics(self) -> dict[str, int]:
        """Blocking API calls and container streams in flight right now."""
        return {"calls": int(self._calls.borrowed_tokens), "streams": int(self._streams.borrowed_tokens)}

    # -- lifecycle ------------------------------------------------------------------------------

    async def create(self, spec: ContainerSpec) -> ContainerRef:
        lease = self._uids.acquire()
        try:
            container = await self._create(spec, lease.uid)
        except anyio.get_cancelled_exc_class():
            # The abandoned call may still make a container with this uid: the uid stays taken
            # until the engine closes, after its sweep.
            self._abandoned_leases.append(lease)
            raise
        except BaseException:
            lease.release()
            raise
        self._leases[container.id] = lease
        return container

    async def _create(self, spec: ContainerSpec, uid: int) -> ContainerRef:
        api = self.api
        views = run_dir(VIEWS) / f"{self._owner.session}-{uuid.uuid4().hex[:12]}"
        try:
            if spec.policy.volumes:
                # Docker has no idmapped binds: each volume's view is made here, bound by path.
                binds = await anyio.to_thread.run_sync(make_views, spec.policy.volumes, views, uid, None)
                spec = spec.model_copy(update={"policy": spec.policy.model_copy(update={"volumes": binds})})
            config = container_config(api, spec, uid, self._oci_runtime)
            created = await self._call("creating a container", api.create_container_from_config, config)
            container = ContainerRef(id=created["Id"], spec=spec, uid=uid)
            try:
                await self._call("starting a container", api.start, container.id)
            except BaseException:
                with anyio.CancelScope(shield=True), anyio.move_on_after(ABANDONED_REMOVAL_S):
                    await self.remove(container)
                raise
        finally:
            # A started container holds its binds itself; the host needs the views no longer.
            if spec.policy.volumes:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(detach_views, views)
        return container

    async def remove(self, container: ContainerRef) -> None:
        if container.spec.policy.isolation == "gvisor":
            with contextlib.suppress(SandboxError):  # one that is gone already is told below
                state = await self._call("reading a container's state", self.api.inspect_container, container.id)
                if (state.get("State") or {}).get("Paused"):
                    await self._thaw_to_remove(container.id)
        try:
            await self._call("removing a container", self.api.remove_container, container.id, force=True, v=True)
        except SandboxError as exc:
            if not isinstance(exc.__cause__, docker.errors.NotFound):
                raise
        self._release_uid(container.id)

    def _release_uid(self, container_id: str) -> None:
        # Only a container that is gone gives its uid back.
        lease = self._leases.pop(container_id, None)
        if lease is not None:
            lease.release()

    async def _kill(self, container_id: str) -> None:
        with contextlib.suppress(SandboxError):
            await self._call("killing a container", self.api.kill, container_id)

    async def list_ours(self) -> list[str]:
        found = await self._call(
            "listing containers", self.api.containers, all=True, filters={"label": f"{MANAGED}=true"}
        )
        return [c["Id"] for c in found]

    async def remove_leftovers(self, *, everything: bool = False, session: str | None = None) -> list[str]:
        found = await self._call(
            "listing containers", self.api.containers, all=True, filters={"label": f"{MANAGED}=true"}
        )

        def stale(labels: dict[str, str]) -> bool:
            if session is not None:
                return labels.get(SESSION) == session
            return everything or is_leftover(labels)

        stale_found = [c for c in found if stale(c.get("Labels") or {})]
        left = [c for c in found if c not in stale_found]
        for container in stale_found:
            if container.get("State") == "paused":
                await self._thaw_to_remove(container["Id"])
            try:
                await self._call(
                    "removing a leftover container", self.api.remove_container, container["Id"], force=True, v=True
                )
            except SandboxError:
                left.append(container)
                continue
            self._release_uid(container["Id"])
        if session is None:
            await anyio.to_thread.run_sync(sweep_views)
            # Only now that their containers are gone may the uids and leases of dead engines go.
            await anyio.to_thread.run_sync(self._uids.sweep)
            live = {(c.get("Labels") or {}).get(SESSION, "") for c in left}
            await anyio.to_thread.run_sync(forget_leases, self.name, live)
        return [c["Id"] for c in stale_found]

    async def describe(self) -> RuntimeInfo:
        info = await self._call("reading the engine's facts", self.api.info)
        present = set(info.get("Runtimes") or {})
        cgroup = str(info.get("CgroupVersion", ""))
        return RuntimeInfo(
            name=self.name,
            version=f"Docker {info.get('ServerVersion', '?')} (runc tier on {self._oci_runtime or 'its default'})",
            isolations=frozenset({"runc", *(["gvisor"] if "runsc" in present else [])}),
            supports_exec=True,
            cgroup_version=int(cgroup) if cgroup.isdigit() else None,
        )

    async def prepare(self, image: str, announce: Callable[[str], None] = lambda message: None) -> None:
        """Nothing to do: the daemon starts containers from its images as they are."""

    async def image_id(self, tag: str) -> str | None:
        client = self._client
        if client is None:
            raise RuntimeUnavailable("the Docker runtime is not open (the engine was closed, or never entered)")
        return await anyio.to_thread.run_sync(image_id, client, tag, limiter=self._calls)

    async def aclose(self) -> None:
        for lease in self._abandoned_leases:
            lease.release()
        self._abandoned_leases.clear()
        if self._client is not None:
            client, self._client = self._client, None
            await anyio.to_thread.run_sync(client.close)

    # -- streams ----------------------------------------------------------------------------------

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
        started = time.monotonic()
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        attached = await self._call("attaching to a container", self.api.attach_socket, container.id, params=params)
        capture = Capture(stdout_limit, stderr_limit, on_stdout_line)
        ended = await self._pump(attached, request, started + deadline_s, capture, more_input)
        if capture.stopped:
            # The reader has what it needs; remove() kills whatever is still running.
            return capture.exchange(started, timed_out=False, exit_code=None, oom_killed=False)
        if not ended:
            await self._kill(container.id)
        exit_code, oom_killed = await self._exit_status(container.id)
        return capture.exchange(
            started, timed_out=not ended and not capture.done, exit_code=exit_code, oom_killed=oom_killed
        )

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
        if as_root:
            # Docker has user namespaces only daemon-wide: one root would be every container's.
            raise SandboxError("a sandbox has a root of its own only on the oci runtime (user namespaces)")
        tty = terminal is not None
        created = await self._call(
            "starting a command",
            self.api.exec_create,
            container.id,
            argv,
            stdin=True,
            stdout=True,
            stderr=True,
            tty=tty,
            user=f"{container.uid}:{container.uid}",
            workdir=workdir,
            environment=dict(env),
        )
        attached = await self._call("starting a command", self.api.exec_start, created["Id"], socket=True, tty=tty)
        command = DockerCommand(self, created["Id"], attached, tty=tty)
        if terminal is not None:
            await command.resize(*terminal)
        return command

    async def usage(self, container: ContainerRef) -> ContainerUsage:
        stats = await self._call(
            "reading a container's usage", self.api.stats, container.id, stream=False, one_shot=True
        )
        memory = stats.get("memory_stats") or {}
        counters = memory.get("stats") or {}
        # As `docker stats` counts it: cgroup v1 names the totals of the hierarchy, v2 has no cache line.
        inactive = counters.get("total_inactive_file", counters.get("inactive_file", 0))
        cache = counters.get("total_cache", counters.get("cache", counters.get("file", 0)))
        cpu_ns = ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage", 0)
        return ContainerUsage(
            cpu_s=cpu_ns / 1e9,
            memory_bytes=max(0, int(memory.get("usage", 0)) - int(inactive)),
            cache_bytes=int(cache),
        )

    async def freeze(self, container: ContainerRef) -> None:
        await self._call("pausing a container", self.api.pause, container.id)

    async def thaw(self, container: ContainerRef) -> None:
        await self._call("resuming a container", self.api.unpause, container.id)

    async def _thaw_to_remove(self, container_id: str) -> None:
        """Resume a paused container that is about to be removed, for the moment the removal takes:
        gVisor cannot end a paused sandbox, and dockerd, after waiting 10 s, forgets the container
        and leaves containerd's record of it and its shim process behind."""
        with contextlib.suppress(SandboxError):
            await self._call("resuming a container to remove it", self.api.unpause, container_id)

    async def _pump(
        self, attached: Any, data: bytes, deadline: float, capture: Capture, more_input: MoreInput | None
    ) -> bool:
        # On cancellation the thread is abandoned, not stopped: it ends when the container's
        # removal closes the stream, and only then closes the socket. Closing it from here
        # would leave the thread waiting on a dead descriptor until the deadline.
        return await anyio.to_thread.run_sync(
            pump_and_close, attached, data, deadline, capture, more_input, limiter=self._streams, abandon_on_cancel=True
        )

    async def _exit_status(self, container_id: str) -> tuple[int | None, bool]:
        try:
            waited = await self._call("waiting for a container", self.api.wait, container_id, timeout=EXIT_GRACE_S)
        except EngineError:
            return None, False
        code = waited.get("StatusCode")
        if code == 0:
            return 0, False
        state = (await self._call("inspecting a container", self.api.inspect_container, container_id))["State"]
        return code, bool(state.get("OOMKilled"))


def _read_past_the_answer(attached: Any) -> bytes:
    """What the HTTP client read past the exec's ``101`` answer before it handed the socket over
    (its socket set non-blocking first). A command's first frames are there when they came before
    this process read the answer, as on a loaded machine: read from the socket alone, a command's
    pid, or all it wrote, was lost."""
    try:
        reader = attached._response.raw._fp.fp
    except AttributeError:
        return b""  # a transport that reads the answer through no buffer of its own
    try:
        return bytes(reader.read1(1 << 20) or b"")
    except (OSError, ValueError):  # nothing more buffered (BlockingIOError), or closed
        return b""


class DockerCommand(Spawned):
    """A command started through Docker's exec API: one socket carries stdin one way and the
    multiplexed stdout and stderr frames the other, read without a thread."""

    def __init__(self, runtime: DockerRuntime, exec_id: str, attached: Any, *, tty: bool = False) -> None:
        self._runtime = runtime
        self._exec_id = exec_id
        # On a terminal the stream is the terminal's raw output, not frames.
        self._tty = tty
        self._attached = attached
        self._sock: socket.socket = getattr(attached, "_sock", attached)
        self._sock.setblocking(False)
        self._buffer = bytearray(_read_past_the_answer(attached))
        self._ended = False

    async def receive(self) -> tuple[OutputStream, bytes] | None:
        while True:
            frame = _next_frame(self._buffer) if not self._tty else self._raw_output()
            if frame is not None:
                return frame
            if self._ended:
                return None
            try:
                await anyio.wait_readable(self._sock)
                chunk = self._sock.recv(1 << 16)
            except BlockingIOError:
                continue
            except (OSError, anyio.ClosedResourceError):
                # Let go of (aclose), or ended by the daemon.
                chunk = b""
            if not chunk:
                self._ended = True
            self._buffer += chunk

    def _raw_output(self) -> tuple[OutputStream, bytes] | None:
        if not self._buffer:
            return None
        data = bytes(self._buffer)
        self._buffer.clear()
        return "stdout", data

    async def resize(self, rows: int, columns: int) -> None:
        await self._runtime._call(
            "resizing a terminal", self._runtime.api.exec_resize, self._exec_id, height=rows, width=columns
        )

    async def send(self, data: bytes) -> None:
        pending = memoryview(data)
        while pending:
            try:
                await anyio.wait_writable(self._sock)
                pending = pending[self._sock.send(pending[: 1 << 16]) :]
            except BlockingIOError:
                continue
            # ValueError: the socket was closed once the command ended (it has no descriptor).
            except (OSError, ValueError, anyio.ClosedResourceError):
                return

    async def close_input(self) -> None:
        _shutdown_write(self._sock)

    async def exit_code(self) -> int | None:
        # The output ends a moment before the daemon records the exit.
        with anyio.move_on_after(EXIT_GRACE_S):
            while True:
                info = await self._runtime._call("inspecting a command", self._runtime.api.exec_inspect, self._exec_id)
                if not info.get("Running"):
                    code = info.get("ExitCode")
                    return int(code) if code is not None else None
                await anyio.sleep(0.005)
        return None

    async def aclose(self) -> None:
        if self._sock.fileno() >= 0:
            # Wakes a reader waiting on it: a removed container's daemon may never end the stream.
            anyio.notify_closing(self._sock)
        for resource in (self._attached, self._sock):
            with contextlib.suppress(OSError):
                resource.close()


def _next_frame(buffer: bytearray) -> tuple[OutputStream, bytes] | None:
    """Take the first complete Docker stream frame (8-byte header, then payload) off ``buffer``."""
    while len(buffer) >= _FRAME_HEADER.size:
        stream, size = _FRAME_HEADER.unpack_from(buffer)
        if len(buffer) < _FRAME_HEADER.size + size:
            return None
        payload = bytes(buffer[_FRAME_HEADER.size : _FRAME_HEADER.size + size])
        del buffer[: _FRAME_HEADER.size + size]
        if stream in (STDOUT, STDERR) and payload:
            return ("stdout" if stream == STDOUT else "stderr"), payload
    return None


def pump_and_close(
    attached: Any, data: bytes, deadline: float, capture: Capture, more_input: MoreInput | None = None
) -> bool:
    sock = getattr(attached, "_sock", attached)
    try:
        return pump(sock, data, deadline, capture, more_input)
    finally:
        # The socket is only really closed once the file object docker-py wrapped it in is.
        for resource in (attached, sock):
            with contextlib.suppress(OSError):
                resource.close()


def pump(
    sock: socket.socket, data: bytes, deadline: float, capture: Capture, more_input: MoreInput | None = None
) -> bool:
    """Write ``data`` (then ``more_input`` as it comes) to an attached stream and demultiplex
    what comes back into ``capture``.

    Runs in a worker thread. Writing and reading are interleaved, so a container that writes
    before it has read all its input cannot deadlock us. Returns True when the stream ended by
    itself, False when the deadline passed or ``capture`` is done.
    """
    sock.setblocking(False)
    pending = bytearray(data)
    buffer = bytearray()
    writing = True
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0))
        if more_input is not None:
            selector.register(more_input.fileno(), selectors.EVENT_READ)
        while not capture.done:
            if writing and not pending and more_input is None:
                _shutdown_write(sock)
                writing = False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, mask in selector.select(remaining):
                if key.fileobj is not sock and more_input is not None:
                    more = more_input.take()
                    if more is None:
                        selector.unregister(more_input.fileno())
                        more_input = None
                    elif writing:
                        pending += more
                elif mask & selectors.EVENT_WRITE and pending:
                    try:
                        del pending[: sock.send(pending[: 1 << 16])]
                    except BlockingIOError:
                        pass
                    except OSError:
                        # The container closed its stdin: what it did not take is dropped.
                        pending.clear()
                        writing = False
                if mask & selectors.EVENT_READ and key.fileobj is sock:
                    try:
                        chunk = sock.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return True
                    buffer += chunk
                    _demultiplex(buffer, capture)
            wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if writing and pending else 0)
            if selector.get_key(sock).events != wanted:
                selector.modify(sock, wanted)
    return False


def _demultiplex(buffer: bytearray, capture: Capture) -> None:
    """Move complete Docker stream frames from ``buffer`` into ``capture``."""
    while not capture.done and (frame := _next_frame(buffer)) is not None:
        stream, payload = frame
        if stream == "stderr":
            capture.feed_stderr(payload)
        else:
            capture.feed_stdout(payload)


def _shutdown_write(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
