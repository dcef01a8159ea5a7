"""Judging many submissions, for any judge (this machine's engine, a Ray cluster's): as they
finish, or all of them in input order, by a deadline when one is given.

A trainer waits for a whole batch: by the deadline every submission has a result. One the
judge could not finish by then (the container engine stuck, a container lost, a queue too long)
is marked not judged (``sandbox_error``, ``retryable``): never a verdict on the program.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._submission import Submission, SubmissionResult
from ._judge import not_judged

__all__ = ["Judge", "Judging", "Results", "judge_all", "judging_by"]

Results = MemoryObjectReceiveStream[tuple[int, SubmissionResult]]
Judging = Callable[[Iterable[Submission]], AbstractAsyncContextManager[Results]]


@contextlib.asynccontextmanager
async def judging_by(
    judging: Judging, submissions: Iterable[Submission], deadline_s: float | None, buffer: int = 16
) -> AsyncIterator[Results]:
    """``judging(submissions)``, but by ``deadline_s`` seconds from now every submission has its
    ``(index, result)``: the unfinished ones, and the ones never started, not judged."""
    if deadline_s is None:
        async with judging(submissions) as results:
            yield results
        return
    send, receive = anyio.create_memory_object_stream[tuple[int, SubmissionResult]](buffer)
    async with anyio.create_task_group() as group:
        group.start_soon(_judge_by, judging, submissions, deadline_s, send)
        try:
            async with receive:
                yield receive
        finally:
            group.cancel_scope.cancel()


async def _judge_by(
    judging: Judging,
    submissions: Iterable[Submission],
    deadline_s: float,
    send: MemoryObjectSendStream[tuple[int, SubmissionResult]],
) -> None:
    taken: dict[int, Submission] = {}

    def taking() -> Iterator[Submission]:
        for index, submission in enumerate(submissions):
            taken[index] = submission
            yield submission

    source = taking()
    arrived: tuple[int, SubmissionResult] | None = None
    async with send:
        with anyio.move_on_after(deadline_s):
            async with judging(source) as results:
                async for arrived in results:
                    await send.send(arrived)
                    del taken[arrived[0]]
                    arrived = None
        if arrived is not None:  # judged, but the deadline came while it was being handed on
            await send.send(arrived)
            del taken[arrived[0]]
        why = f"the batch's deadline of {deadline_s:g} s passed before it was judged"
        for index in sorted(taken):
            await send.send((index, not_judged(taken[index], why)))
        taken.clear()
        for _ in source:  # the rest of the input, which no one started
            index, submission = taken.popitem()
            await send.send((index, not_judged(submission, why)))


async def judge_all(
    judging: Callable[[Iterable[Submission]], AbstractAsyncContextManager[Results]],
    submissions: Iterable[Submission],
) -> list[SubmissionResult]:
    """Every result of ``judging(submissions)``, in input order."""
    results: dict[int, SubmissionResult] = {}
    async with judging(submissions) as stream:
        async for index, result in stream:
            results[index] = result
    return [results[index] for index in range(len(results))]


class Judge(Protocol):
    """What judges submissions: this machine's :class:`Engine`, or a cluster's
    (``engine.distributed.RayEngine``). Scoring and the drop-ins take either."""

    async def judge(self, submission: Submission) -> SubmissionResult:
        """Judge one submission."""

    async def judge_many(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> list[SubmissionResult]:
        """Judge many; the results in input order (by ``deadline_s``, see ``judging``)."""

    def judging(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        """Judge in the background; ``(index, result)`` pairs as they finish, each index once;
        with ``deadline_s``, all of them within that many seconds, those the infrastructure could
        not finish marked not judged."""
