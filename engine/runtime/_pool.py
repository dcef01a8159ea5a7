"""A warm pool: containers created and started ahead of need, each for exactly one job.

One container per submission stays the rule: a pooled container has only started its
harness, which waits for its one request; after the job it is removed like any other. The
pool only saves the job from waiting for the container engine. It warms the kinds of container
(image and policy) that jobs have asked for, keeps at most ``size`` of them ready in total,
refills in the background, and hands out a fresh container at once when it has none ready.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from .._errors import EngineError
from . import ContainerRef, ContainerSpec
from ._background import BackgroundTasks

Create = Callable[[ContainerSpec], Awaitable[ContainerRef]]
Remove = Callable[[ContainerRef], Awaitable[None]]

__all__ = ["PoolStatistics", "WarmPool"]


@dataclass(frozen=True)
class PoolStatistics:
    """A snapshot of the pool: containers ready and being started, and how takes were served."""

    ready: int
    starting: int
    hits: int
    misses: int
    failures: int


class WarmPool:
    """Keeps up to ``size`` started containers ready, of the kinds recent jobs asked for."""

    def __init__(self, create: Create, remove: Remove, size: int, tasks: BackgroundTasks) -> None:
        self.size = size
        self._create = create
        self._remove = remove
        self._tasks = tasks
        self._ready: dict[str, collections.deque[ContainerRef]] = collections.defaultdict(collections.deque)
        self._starting: collections.Counter[str] = collections.Counter()
        # Kinds in demand, most recently used last: the pool refills these, oldest evicted first.
        self._wanted: dict[str, ContainerSpec] = {}
        self._hits = self._misses = self._failures = 0
        self._closed = False

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<WarmPool [ready: {stats.ready} | starting: {stats.starting} | "
            f"hits: {stats.hits}, misses: {stats.misses}, failures: {stats.failures}]>"
        )

    def statistics(self) -> PoolStatistics:
        return PoolStatistics(
            ready=sum(len(queue) for queue in self._ready.values()),
            starting=sum(self._starting.values()),
            hits=self._hits,
            misses=self._misses,
            failures=self._failures,
        )

    async def take(self, spec: ContainerSpec) -> ContainerRef:
        """A started container for ``spec``: a ready one if there is one, else a new one now."""
        key = spec.model_dump_json()
        self._wanted.pop(key, None)
        self._wanted[key] = spec
        ready = self._ready[key]
        container = ready.popleft() if ready else None
        if self.size:
            self._refill(key)
        if container is not None:
            self._hits += 1
            return container
        self._misses += 1
        return await self._create(spec)

    def _refill(self, key: str) -> None:
        """Decide how many containers of ``key`` to start, evicting other kinds to stay in bounds."""
        while True:
            stats = self.statistics()
            missing = self.size - len(self._ready[key]) - self._starting[key]
            if missing <= 0 or self._closed:
                return
            if stats.ready + stats.starting < self.size:
                self._starting[key] += 1
                self._tasks.start_soon(self._start_one, key, self._wanted[key])
                continue
            victim = next((k for k in self._wanted if k != key and self._ready[k]), None)
            if victim is None:
                return
            self._tasks.start_soon(self._discard, self._ready[victim].popleft())

    async def _start_one(self, key: str, spec: ContainerSpec) -> None:
        try:
            container = await self._create(spec)
        except EngineError:
            self._failures += 1
            return
        finally:
            self._starting[key] -= 1
        if self._closed:
            await self._discard(container)
        else:
            self._ready[key].append(container)

    async def _discard(self, container: ContainerRef) -> None:
        with anyio.CancelScope(shield=True), contextlib.suppress(EngineError):
            await self._remove(container)

    async def close(self) -> None:
        """Remove every ready container; containers still starting are removed when they are up."""
        self._closed = True
        for queue in self._ready.values():
            while queue:
                await self._discard(queue.popleft())
