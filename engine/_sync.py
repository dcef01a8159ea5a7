"""A blocking facade over :class:`Engine` for code that is not async.

One event loop runs in a background thread; every method hands its call to that loop, so
many threads can share one ``SyncEngine`` (and its limits on containers in flight). The facade
has every operation of the async API, under the same names and parameters.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._engine import Engine
from ._limits import DEFAULT_LIMITS, Limits
from ._models import Language, RunResult
from ._pool import WarmPool
from ._protocol import HarnessRequest, HarnessRun
from ._sandbox import SCRATCH_DIR, Sandbox
from ._settings import Settings
from ._submission import Submission, SubmissionResult
from .runtime import Runtime, RuntimeInfo

__all__ = ["SyncEngine", "SyncSandbox"]


class SyncSandbox:
    """The same operations as :class:`Sandbox`, as blocking calls."""

    def __init__(self, sandbox: Sandbox, portal: BlockingPortal) -> None:
        self._sandbox = sandbox
        self._portal = portal

    @property
    def id(self) -> str:
        return self._sandbox.id

    @property
    def limits(self) -> Limits:
        return self._sandbox.limits

    def exec(
        self,
        argv: list[str],
        *,
        stdin: bytes = b"",
        time_s: float | None = None,
        workdir: str = SCRATCH_DIR,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Blocking :meth:`Sandbox.exec`."""
        run = functools.partial(self._sandbox.exec, argv, stdin=stdin, time_s=time_s, workdir=workdir, env=env)
        return self._portal.call(run)

    def write_file(self, path: str, data: bytes) -> None:
        """Blocking :meth:`Sandbox.write_file`."""
        self._portal.call(self._sandbox.write_file, path, data)

    def read_file(self, path: str) -> bytes:
        """Blocking :meth:`Sandbox.read_file`."""
        return self._portal.call(self._sandbox.read_file, path)


class SyncEngine:
    """The same operations as :class:`Engine`, as blocking calls::

    with SyncEngine() as engine:
        print(engine.run("print(6 * 7)").stdout)
    """

    def __init__(
        self, settings: Settings | None = None, *, limits: Limits = DEFAULT_LIMITS, runtime: Runtime | None = None
    ) -> None:
        self._portal_cm = start_blocking_portal()
        self._portal: BlockingPortal = self._portal_cm.__enter__()
        try:
            self._engine = Engine(settings, limits=limits, runtime=runtime)
            # Entered and left in one task of the portal's loop, as the engine's task group needs.
            self._engine_cm = self._portal.wrap_async_context_manager(self._engine)
            self._engine_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        self._closed = False

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    @property
    def limits(self) -> Limits:
        return self._engine.limits

    @property
    def runtime(self) -> Runtime:
        return self._engine.runtime

    @property
    def info(self) -> RuntimeInfo:
        return self._engine.info

    @property
    def pool(self) -> WarmPool:
        return self._engine.pool

    def __enter__(self) -> SyncEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._engine_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)

    def run(
        self, code: str, *, stdin: str = "", language: Language = "python", limits: Limits | None = None
    ) -> RunResult:
        """Blocking :meth:`Engine.run`."""
        return self._portal.call(
            functools.partial(self._engine.run, code, stdin=stdin, language=language, limits=limits)
        )

    def judge(self, submission: Submission) -> SubmissionResult:
        """Blocking :meth:`Engine.judge`."""
        return self._portal.call(self._engine.judge, submission)

    def judge_many(self, submissions: Iterable[Submission]) -> list[SubmissionResult]:
        """Blocking :meth:`Engine.judge_many`."""
        return self._portal.call(self._engine.judge_many, submissions)

    @contextlib.contextmanager
    def judging(self, submissions: Iterable[Submission]) -> Iterator[Iterator[tuple[int, SubmissionResult]]]:
        """Blocking :meth:`Engine.judging`: ``(index, result)`` pairs as they finish."""
        with self._portal.wrap_async_context_manager(self._engine.judging(submissions)) as stream:

            def pairs() -> Iterator[tuple[int, SubmissionResult]]:
                while True:
                    try:
                        yield self._portal.call(stream.receive)
                    except anyio.EndOfStream:
                        return

            yield pairs()

    @contextlib.contextmanager
    def sandbox(self, *, language: Language = "python", limits: Limits | None = None) -> Iterator[SyncSandbox]:
        """Blocking :meth:`Engine.sandbox`."""
        with self._portal.wrap_async_context_manager(self._engine.sandbox(language=language, limits=limits)) as box:
            yield SyncSandbox(box, self._portal)

    def prepare(self, language: Language, announce: Callable[[str], None] = lambda message: None) -> None:
        """Blocking :meth:`Engine.prepare`."""
        self._portal.call(self._engine.prepare, language, announce)

    def image_for(self, language: Language) -> str:
        """Blocking :meth:`Engine.image_for`."""
        return self._portal.call(self._engine.image_for, language)

    def run_harness(self, language: Language, request: HarnessRequest, limits: Limits) -> HarnessRun:
        """Blocking :meth:`Engine.run_harness` (``engine.lowlevel``: the building block of the compat layers)."""
        return self._portal.call(self._engine.run_harness, language, request, limits)
