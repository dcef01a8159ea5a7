"""Long-lived sandboxes addressed by id: created from the warm pool, each with a time to live,
at most so many alive, and reaped when their time is up or the engine closes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import anyio

from .._errors import SandboxLimitReached, SandboxNotFound
from .._limits import Limits
from ..runtime import BackgroundTasks, ContainerRef, ContainerSpec, Runtime
from ._sandbox import Sandbox

__all__ = ["DEFAULT_TIMEOUT_S", "Sessions"]

# E2B's default time to live.
DEFAULT_TIMEOUT_S = 300.0
# How often expiry is checked: a sandbox outlives its time by at most this much.
REAP_INTERVAL_S = 0.5

Take = Callable[[ContainerSpec], Awaitable[ContainerRef]]
Remove = Callable[[ContainerRef], Awaitable[None]]


class Sessions:
    """The engine's live sandboxes. Reached as :attr:`Engine.sandboxes`."""

    def __init__(self, runtime: Runtime, take: Take, remove: Remove, tasks: BackgroundTasks, max_alive: int) -> None:
        self.max_alive = max_alive
        self._runtime = runtime
        self._take = take
        self._remove = remove
        self._tasks = tasks
        self._alive: dict[str, Sandbox] = {}
        self._reserved = 0
        self._reaper = anyio.CancelScope()
        tasks.start_soon(self._reap)

    async def create(
        self,
        spec: ContainerSpec,
        limits: Limits,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        template: str = "python",
    ) -> Sandbox:
        """A sandbox, ready; its time to live starts now."""
        if timeout_s <= 0:
            raise ValueError(f"a sandbox's timeout must be positive, not {timeout_s}")
        if len(self._alive) + self._reserved >= self.max_alive:
            raise SandboxLimitReached(
                f"{self.max_alive} sandboxes are alive, the most this engine allows; kill one or raise the limit"
            )
        self._reserved += 1
        try:
            container = await self._take(spec)
        finally:
            self._reserved -= 1
        sandbox = Sandbox(
            self._runtime,
            container,
            limits,
            self._tasks,
            timeout_s=timeout_s,
            env=env,
            metadata=metadata,
            template=template,
        )
        self._alive[sandbox.id] = sandbox
        return sandbox

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
        """Remove the sandbox and everything running in it; False when there was none."""
        sandbox = self._alive.pop(sandbox_id, None)
        if sandbox is None:
            return False
        for context in sandbox.contexts.values():
            context.abandon()
        with anyio.CancelScope(shield=True):
            await self._remove(sandbox.container)
            await sandbox._abandon_processes()
        return True

    async def close(self) -> None:
        """Kill every sandbox and stop reaping (the processes' readers end with their containers)."""
        self._reaper.cancel()
        for sandbox_id in list(self._alive):
            await self.kill(sandbox_id)

    async def _reap(self) -> None:
        with self._reaper:
            while True:
                await self._reap_expired()

    async def _reap_expired(self) -> None:
        await anyio.sleep(REAP_INTERVAL_S)
        for sandbox in list(self._alive.values()):
            if sandbox.seconds_left <= 0:
                self._tasks.start_soon(self.kill, sandbox.id)
