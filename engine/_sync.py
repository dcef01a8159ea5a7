"""A blocking facade over :class:`Engine` for code that is not async.

One event loop runs in a background thread; every method hands its call to that loop, so
many threads can share one ``SyncEngine`` (and its limits on containers in flight).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._engine import Engine
from ._limits import DEFAULT_LIMITS, Limits
from ._models import Language, RunResult
from ._protocol import HarnessRequest, HarnessRun
from ._settings import Settings
from ._submission import Submission, SubmissionResult
from .runtime import Runtime

__all__ = ["SyncEngine"]


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

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    @property
    def limits(self) -> Limits:
        return self._engine.limits

    def __enter__(self) -> SyncEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._portal_cm is None:
            return
        try:
            self._engine_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._portal_cm = None  # type: ignore[assignment]

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(functools.partial(method, *args, **kwargs))

    def run(
        self, code: str, *, stdin: str = "", language: Language = "python", limits: Limits | None = None
    ) -> RunResult:
        """Blocking :meth:`Engine.run`."""
        return self._call(self._engine.run, code, stdin=stdin, language=language, limits=limits)  # type: ignore[no-any-return]

    def prepare(self, language: Language, announce: Callable[[str], None] = lambda message: None) -> None:
        """Blocking :meth:`Engine.prepare`."""
        self._call(self._engine.prepare, language, announce)

    def image_for(self, language: Language) -> str:
        """Blocking :meth:`Engine.image_for`."""
        return self._call(self._engine.image_for, language)  # type: ignore[no-any-return]

    def judge(self, submission: Submission) -> SubmissionResult:
        """Blocking :meth:`Engine.judge`."""
        return self._call(self._engine.judge, submission)  # type: ignore[no-any-return]

    def judge_many(self, submissions: Iterable[Submission]) -> list[SubmissionResult]:
        """Blocking :meth:`Engine.judge_many`."""
        return self._call(self._engine.judge_many, submissions)  # type: ignore[no-any-return]

    def run_harness(self, language: Language, request: HarnessRequest, limits: Limits) -> HarnessRun:
        """Blocking :meth:`Engine.run_harness` (the building block of the compatibility layers)."""
        return self._call(self._engine.run_harness, language, request, limits)  # type: ignore[no-any-return]
