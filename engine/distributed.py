"""Judging across a Ray cluster: the optional extra ``airlock[ray]``.

A :class:`RayEngine` judges as :class:`engine.Engine` does (``judge``, ``judge_many``, the
streaming ``judging``) and spreads the submissions over the cluster's nodes: one actor per node,
pinned there by node affinity, owning that node's engine (its runtime, warm pool and images,
its settings read from the node's own environment, with the driver's explicit choices on top).
Each submission goes to the node with the most free slots; at most the nodes' slots together
are in flight, and the input is read only as fast as slots free up.

Losing a node loses no result: when its actor dies (the node left, or its process was killed),
the submissions it was judging go to the others. A result is reported only when it arrives, so
each input gets exactly one; a dead node's containers are removed by a live engine on the same
machine when the batch ends, or by that machine's next engine. A node whose Docker cannot be
reached is left out with its reason (:meth:`RayEngine.nodes`); a node missing an image builds it.

Every node needs Airlock installed (the same version) and, for the Docker runtime, a daemon.
``call_many`` runs a drop-in's function (say verl's ``compute_score``) on the nodes the same
way, its programs judged by the node's engine.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel

from ._errors import EngineError, ImageNotFound, NotJudged
from ._languages import toolchain
from ._settings import Settings
from ._submission import Submission, SubmissionResult
from ._sync import SyncEngine, use_process_engine
from .judge._batches import judge_all, judging_by
from .runtime._images import build_images

__all__ = ["NodeStatus", "RayEngine"]

# How long a node's engine may take to start (a first image unpack included).
OPEN_TIMEOUT_S = 300.0


class NodeStatus(BaseModel):
    """One node of the cluster as the engine sees it."""

    node_id: str
    host: str = ""
    slots: int = 0
    judged: int = 0
    busy_s: float = 0.0
    alive: bool = True
    reason: str | None = None


class NodeJudge:
    """One node's engine, inside an actor pinned to that node (a threaded actor: each call
    blocks one of its threads while the engine's own loop runs the container)."""

    def __init__(self, overrides: dict[str, Any]) -> None:
        self._overrides = overrides
        # A node judges; sandboxes live on the engine that made them, which alone holds their
        # directory (one process per directory).
        self._settings = Settings(**{**overrides, "paused_dir": None})
        self._engine: SyncEngine | None = None
        self._building = threading.Lock()

    def open(self) -> dict[str, Any]:
        """Start the engine (refused when the node has no working runtime): its host and slots."""
        self._engine = SyncEngine(self._settings)
        return {"host": socket.gethostname(), "slots": self._settings.max_concurrency, "pid": os.getpid()}

    def judge(self, submission: Submission) -> SubmissionResult:
        assert self._engine is not None
        try:
            result = self._engine.judge(submission)
        except ImageNotFound:
            with self._building:
                build_images(self._settings, [toolchain(submission.language).image], log=lambda line: None)
            result = self._engine.judge(submission)
        return result

    def call(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a drop-in's function here, its programs judged by this node's engine."""
        assert self._engine is not None
        use_process_engine(self._engine)
        return function(*args, **kwargs)

    def reap(self) -> None:
        """Remove what dead engines on this machine left (a fresh engine does it as it starts)."""
        with SyncEngine(self._settings.model_copy(update={"pool_size": 0})):
            pass

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


@dataclass
class _Node:
    status: NodeStatus
    actor: Any
    in_flight: int = 0

    @property
    def free(self) -> int:
        return self.status.slots - self.in_flight if self.status.alive else 0


@dataclass
class _Work:
    """One item for a node: its actor method and the arguments."""

    method: str
    args: tuple[Any, ...]


@dataclass
class _Raised:
    """A called function's own exception, carried to its place in the results."""

    error: BaseException


@dataclass
class _Batch:
    """One batch's shared state: what waits to go again (its node was lost), what is out."""

    retry: deque[tuple[int, _Work]] = field(default_factory=deque)
    outstanding: int = 0
    wake: anyio.Event = field(default_factory=anyio.Event)

    def changed(self) -> None:
        self.wake.set()

    async def wait(self) -> None:
        await self.wake.wait()
        self.wake = anyio.Event()


class RayEngine:
    """Judges submissions on a Ray cluster's nodes (see the module's text).

    ``address``: the cluster (``"auto"``: the one this machine runs, or ``RAY_ADDRESS``); when
    Ray is already initialized in this process (inside a Ray job, say) that connection is used.
    ``settings``: choices made here for every node (say ``max_concurrency`` or ``runtime``);
    whatever it does not set, each node reads from its own environment.
    """

    def __init__(self, address: str | None = "auto", settings: Settings | None = None) -> None:
        self._address = address
        self._overrides = settings.model_dump(exclude_unset=True, mode="json") if settings is not None else {}
        self._nodes: list[_Node] = []
        self._connected_here = False

    async def __aenter__(self) -> RayEngine:
        await anyio.to_thread.run_sync(self.open)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)

    def nodes(self) -> list[NodeStatus]:
        """Every node: its slots, what it judged and for how long, and why it is out, if it is."""
        return [node.status.model_copy() for node in self._nodes]

    @property
    def slots(self) -> int:
        return sum(node.status.slots for node in self._nodes if node.status.alive)

    # -- the cluster --------------------------------------------------------------------------------

    def open(self) -> None:
        """Connect and start every node's engine (blocking; ``async with`` does it for you).
        Between ``open`` and ``close`` the engine serves any number of batches, from any event
        loop."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():
            ray.init(address=self._address, logging_level=logging.WARNING, log_to_driver=False)
            self._connected_here = True
        remote: Any = ray.remote(num_cpus=0)(NodeJudge)
        slots = Settings(**self._overrides).max_concurrency
        pending = []
        for found in ray.nodes():  # type: ignore[no-untyped-call]
            if not found.get("Alive"):
                continue
            node_id = found["NodeID"]
            pinned = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            actor = remote.options(scheduling_strategy=pinned, max_concurrency=max(slots, 1) * 2 + 2).remote(
                self._overrides
            )
            pending.append((_Node(NodeStatus(node_id=node_id), actor), actor.open.remote()))
        for node, opened in pending:
            try:
                info = ray.get(opened, timeout=OPEN_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a node that cannot judge is left out, with its reason
                node.status.alive = False
                node.status.reason = _reason(exc)
                with contextlib.suppress(Exception):
                    ray.kill(node.actor)
            else:
                node.status.host, node.status.slots = str(info["host"]), int(info["slots"])
            self._nodes.append(node)
        if not any(node.status.alive for node in self._nodes):
            reasons = "; ".join(f"{n.status.node_id[:12]}: {n.status.reason}" for n in self._nodes) or "no live node"
            self.close()
            raise EngineError(f"no node of the Ray cluster can judge: {reasons}")

    def close(self) -> None:
        """Stop every node's engine, removing what lost nodes left where a live one can."""
        import ray

        live = [node for node in self._nodes if node.status.alive]
        if not live and not self._connected_here:
            return  # closed already (a Ray call now would start a local Ray instance)
        with contextlib.suppress(Exception):
            # A lost node's engine could not remove its containers; a live one on its machine can.
            if any(not node.status.alive for node in self._nodes):
                ray.get([node.actor.reap.remote() for node in live], timeout=120)
        with contextlib.suppress(Exception):
            ray.get([node.actor.close.remote() for node in live], timeout=120)
        for node in live:
            with contextlib.suppress(Exception):
                ray.kill(node.actor)
        self._nodes = []
        if self._connected_here:
            ray.shutdown()
            self._connected_here = False

    # -- judging ------------------------------------------------------------------------------------

    async def judge(self, submission: Submission) -> SubmissionResult:
        return (await self.judge_many([submission]))[0]

    async def judge_many(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> list[SubmissionResult]:
        """Judge many submissions across the cluster; the results come back in input order."""
        return await judge_all(functools.partial(self.judging, deadline_s=deadline_s), submissions)

    @contextlib.asynccontextmanager
    async def judging(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        """Judge ``submissions`` in the background; read ``(index, result)`` pairs as they finish,
        each index exactly once, by ``deadline_s`` if given (as :meth:`Engine.judging`). Leaving
        the block early cancels the rest."""
        async with judging_by(self._judging, submissions, deadline_s, max(self.slots, 1)) as results:
            yield results

    @contextlib.asynccontextmanager
    async def _judging(
        self, submissions: Iterable[Submission]
    ) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        async with self._running(_Work("judge", (submission,)) for submission in submissions) as results:
            yield results

    async def call_many(
        self,
        function: Callable[..., Any],
        calls: Iterable[tuple[tuple[Any, ...], dict[str, Any]]],
        *,
        deadline_s: float | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Run ``function(*args, **kwargs)`` for each of ``calls`` on the nodes, each in a node's
        actor whose drop-ins (``engine.compat``) judge with that node's engine; the values in
        input order. A call's own exception is raised here (the first, in input order) once all
        have ended, or, with ``return_exceptions``, is that call's value; a lost node's calls
        run again elsewhere, so a function must bear that. With ``deadline_s``, the calls not
        done by then are cancelled and end as :class:`NotJudged`."""
        values: dict[int, Any] = {}
        taken = 0

        def work() -> Iterator[_Work]:
            nonlocal taken
            for args, kwargs in calls:
                taken += 1
                yield _Work("call", (function, tuple(args), dict(kwargs)))

        source = work()
        with anyio.move_on_after(deadline_s if deadline_s is not None else math.inf):
            async with self._running(source) as results:
                async for index, value in results:
                    values[index] = value
        late = _Raised(NotJudged(f"the batch's deadline of {deadline_s} s passed before the call ended"))
        for _ in source:  # what no node started
            pass
        ordered = [values.get(index, late) for index in range(taken)]
        if return_exceptions:
            return [value.error if isinstance(value, _Raised) else value for value in ordered]
        raised = next((value.error for value in ordered if isinstance(value, _Raised)), None)
        if raised is not None:
            raise raised
        return ordered

    @contextlib.asynccontextmanager
    async def _running(self, work: Iterable[_Work]) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, Any]]]:
        send, receive = anyio.create_memory_object_stream[tuple[int, Any]](max(self.slots, 1))
        async with anyio.create_task_group() as group:
            group.start_soon(self._dispatch, iter(work), send)
            try:
                async with receive:
                    yield receive
            finally:
                group.cancel_scope.cancel()

    def _freest(self) -> _Node | None:
        best = max(self._nodes, key=lambda node: node.free, default=None)
        return best if best is not None and best.free > 0 else None

    async def _dispatch(self, work: Iterator[_Work], send: MemoryObjectSendStream[tuple[int, Any]]) -> None:
        batch = _Batch()
        next_index = 0
        exhausted = False
        async with send, anyio.create_task_group() as group:
            while True:
                if not any(node.status.alive for node in self._nodes):
                    reasons = "; ".join(f"{n.status.node_id[:12]}: {n.status.reason}" for n in self._nodes)
                    raise EngineError(f"every node of the Ray cluster was lost: {reasons}")
                node = self._freest()
                if node is None or (not batch.retry and exhausted):
                    if exhausted and not batch.retry and batch.outstanding == 0:
                        return
                    await batch.wait()
                    continue
                if batch.retry:
                    index, item = batch.retry.popleft()
                else:
                    upcoming = next(work, None)
                    if upcoming is None:
                        exhausted = True
                        continue
                    index, item = next_index, upcoming
                    next_index += 1
                node.in_flight += 1
                batch.outstanding += 1
                group.start_soon(self._run_on, node, index, item, send, batch)

    async def _run_on(
        self, node: _Node, index: int, item: _Work, send: MemoryObjectSendStream[tuple[int, Any]], batch: _Batch
    ) -> None:
        import ray

        started = time.monotonic()
        reference = getattr(node.actor, item.method).remote(*item.args)
        try:
            value = await reference
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if item.method == "call" and isinstance(cause, BaseException) and not isinstance(cause, EngineError):
                value = _Raised(cause)  # the function's own failure: its result, not the node's
            else:
                self._lost(node, exc, batch, index, item)
                return
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as exc:
            self._lost(node, exc, batch, index, item)
            return
        except BaseException:
            with contextlib.suppress(Exception):
                ray.cancel(reference)
            raise
        finally:
            node.in_flight -= 1
            batch.outstanding -= 1
            batch.changed()
        node.status.judged += 1
        node.status.busy_s += time.monotonic() - started
        await send.send((index, value))

    @staticmethod
    def _lost(node: _Node, exc: BaseException, batch: _Batch, index: int, item: _Work) -> None:
        """The node (or its engine) is gone: what it held goes to the others."""
        if node.status.alive:
            node.status.alive, node.status.reason = False, _reason(exc)
        batch.retry.append((index, item))


def _reason(exc: BaseException) -> str:
    """What went wrong on a node: the node's own exception when Ray carried one back."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]
