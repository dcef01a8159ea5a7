"""The seam between the engine and a container technology.

A runtime creates containers from a :class:`ContainerSpec` (an image and the isolation
:class:`~engine.runtime._policy.Policy`, which the runtime translates and nothing else decides), feeds
one of them a request on stdin and collects its output under a deadline and byte caps, starts
commands in a long-lived one with their streams attached, and removes what it created. The
engine never sees Docker's JSON.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from .._errors import SandboxError
from .._settings import Isolation
from ._policy import Policy

__all__ = [
    "ContainerRef",
    "ContainerSpec",
    "ContainerUsage",
    "Exchange",
    "LineSink",
    "MoreInput",
    "OutputStream",
    "Runtime",
    "RuntimeInfo",
    "Spawned",
]

OutputStream = Literal["stdout", "stderr"]
# Receives each complete stdout line while it streams; returning True stops the container.
LineSink = Callable[[bytes], bool]


class MoreInput(Protocol):
    """Input for a container's main process that arrives while it runs, after its request."""

    def fileno(self) -> int:
        """Readable when there is input to take, or once it has ended."""

    def take(self) -> bytes | None:
        """The input there is now (perhaps none); None once it has ended and all was taken."""


async def send_all(request: bytes, more_input: MoreInput | None, send: Callable[[bytes], Awaitable[None]]) -> None:
    """Send ``request``, then ``more_input`` as it comes, until it ends."""
    await send(request)
    while more_input is not None:
        await anyio.wait_readable(more_input.fileno())
        more = more_input.take()
        if more is None:
            return
        await send(more)


class ContainerSpec(BaseModel):
    """What to run (the image), how isolated and bounded (the policy), and whose it is."""

    model_config = ConfigDict(frozen=True)

    image: str
    policy: Policy
    labels: Mapping[str, str] = Field(default_factory=dict)


class RuntimeInfo(BaseModel):
    """What a runtime is and can do here."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    isolations: frozenset[Isolation] = Field(description="the isolation tiers it can run here")
    supports_exec: bool = Field(description="long-lived sandboxes: commands started in a running container")
    cgroup_version: int | None = None


class ContainerRef(BaseModel):
    """A container this runtime created."""

    model_config = ConfigDict(frozen=True)

    id: str
    spec: ContainerSpec
    # The host uid its processes run as, leased to this container alone while it exists.
    uid: int
    # Where it has a user namespace of its own: the host uid its root is there, leased likewise.
    root_uid: int | None = None


class Exchange(BaseModel):
    """What came back from a container (or an exec) that was fed one request."""

    model_config = ConfigDict(frozen=True)

    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    stopped: bool = False
    exit_code: int | None = None
    oom_killed: bool = False
    wall_time_s: float = 0.0


class ContainerUsage(BaseModel):
    """What a long-lived container's cgroup has used, read at one moment."""

    model_config = ConfigDict(frozen=True)

    cpu_s: float = Field(description="CPU time of all its processes since it started")
    memory_bytes: int = Field(description="memory in use, without the page cache it could drop")
    cache_bytes: int = Field(description="its page cache (files it read or wrote, its in-memory files)")


class Spawned(abc.ABC):
    """A command started in a running container, its streams attached. One task reads, any may write."""

    @abc.abstractmethod
    async def receive(self) -> tuple[OutputStream, bytes] | None:
        """The next chunk of output, as it comes; None once the command's output has ended."""

    @abc.abstractmethod
    async def send(self, data: bytes) -> None:
        """Write to the command's stdin; a command that stopped reading is not an error."""

    @abc.abstractmethod
    async def close_input(self) -> None:
        """End the command's stdin."""

    @abc.abstractmethod
    async def exit_code(self) -> int | None:
        """Once the output has ended: how the command exited (128 + n after signal n), None if unknown."""

    async def resize(self, rows: int, columns: int) -> None:
        """Give its pseudo-terminal a new size (the program gets SIGWINCH)."""
        raise SandboxError("the command was not started on a terminal")

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Let go of the streams; the command is not stopped by it."""


def _jobs_only(runtime: str) -> SandboxError:
    return SandboxError(
        f"the {runtime} runtime runs jobs only; long-lived sandboxes need the docker or the oci runtime"
    )


class Runtime(abc.ABC):
    """A way to run hardened containers. Implementations must be safe to share between tasks."""

    name: str

    @abc.abstractmethod
    async def open(self) -> None:
        """Get ready to run containers; raise ``RuntimeUnavailable`` with a remedy when that is impossible."""

    @abc.abstractmethod
    async def create(self, spec: ContainerSpec) -> ContainerRef:
        """Create and start a container whose main process waits for its request on stdin."""

    @abc.abstractmethod
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
        """Send ``request`` to the main process, collect its output, and wait for it to end.
        Its stdin ends after the request, or with ``more_input``, which it gets as it comes.

        Past ``deadline_s`` seconds or past a byte limit the container is killed; the exchange
        says which. When ``on_stdout_line`` returns True, reading stops and the exchange comes
        back at once (``stopped``, no exit status); :meth:`remove` kills what still runs.
        """

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
        """Start ``argv`` in a long-lived container (a sandbox) as the container's uid, its stdin,
        stdout and stderr attached; with ``terminal`` (rows, columns) on a pseudo-terminal of that
        size instead, whose output comes as stdout. ``as_root``: as the root of the container's
        user namespace (``ContainerRef.root_uid``); a container without one refuses. Runtimes that
        run jobs only refuse."""
        raise _jobs_only(self.name)

    async def usage(self, container: ContainerRef) -> ContainerUsage:
        """The cgroup's CPU time and memory of a long-lived container (a sandbox). Runtimes that
        run jobs only refuse."""
        raise _jobs_only(self.name)

    async def freeze(self, container: ContainerRef) -> None:
        """Stop every process of a long-lived container where it is (the cgroup freezer): it
        keeps its memory and uses no CPU until :meth:`thaw`. Runtimes that run jobs only refuse."""
        raise _jobs_only(self.name)

    async def thaw(self, container: ContainerRef) -> None:
        """Let a frozen container's processes run on from where they stopped."""
        raise _jobs_only(self.name)

    @abc.abstractmethod
    async def remove(self, container: ContainerRef) -> None:
        """Kill and delete the container. One that is already gone is not an error; a failure to
        reach the container engine is."""

    @abc.abstractmethod
    async def remove_leftovers(self, *, everything: bool = False, session: str | None = None) -> list[str]:
        """Delete containers left by engine processes that died; return their ids.

        ``session`` removes that engine session's containers instead, ``everything`` all of ours.
        """

    @abc.abstractmethod
    async def list_ours(self) -> list[str]:
        """Ids of every container that carries our labels."""

    @abc.abstractmethod
    async def describe(self) -> RuntimeInfo:
        """What this runtime is and can do on this machine."""

    @abc.abstractmethod
    async def prepare(self, image: str, announce: Callable[[str], None] = lambda message: None) -> None:
        """Make ``image`` ready to start containers from. Work that takes long (the OCI runtime
        unpacks an image once) is announced first, so that a user knows what the wait is for."""

    @abc.abstractmethod
    async def image_id(self, tag: str) -> str | None:
        """The content id of a local image, or None when it does not exist."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections. Containers are the engine's to remove, not the runtime's."""
