"""Runners: how a program is loaded once and started for each test (standard library only).

The supervisor owns everything language-neutral; a runner owns only what depends on how the
program runs:

- ``python``: one fresh interpreter loads the program once and forks a child per test (imports
  paid once); script, call and assert tests.
- ``process``: compile once (if the language compiles), then one process per test; script
  tests, for any language.
- ``node``: a fresh Node process per test; call and assert tests of JavaScript.
- ``prime``: the reference ``run_test``'s way of executing, on the Python worker.
"""

from __future__ import annotations

import time

from .. import codec
from .._lean import dumps
from .._typing import TYPE_CHECKING
from ..processes import oom_kills
from ..protocol import COMPILE_ERROR, OK, OUTPUT_LIMIT, RUNTIME_ERROR
from ..supervisor import Abort, Outcome

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from typing import Any

    from ..supervisor import CaseIO, Supervisor
    from .python import Worker


class Runner:
    """Runs one request's program. Subclasses load it and run one test; this runs them all."""

    def __init__(self, request: dict[str, Any], supervisor: Supervisor) -> None:
        self.request = request
        self.supervisor = supervisor
        # Why the program could not be loaded (an Outcome every test then reports), if it could not.
        self.load_failure: Outcome | None = None

    def load(self) -> Outcome | None:
        """Compile the program once; the failure every test then reports, if any."""
        return None

    def ready(self) -> Outcome | None:
        """Get ready for the next test (load the program, again if a test took it down); the
        failure every later test reports, if that fails."""
        return None

    def run_test(self, test: dict[str, Any], io: CaseIO) -> Outcome:
        """Run one test to its end (or raise ``Abort``); the supervisor's clock is running."""
        raise NotImplementedError

    def supervised(self) -> Collection[int]:
        """Processes of this runner's that outlive a test and whose wait status it takes itself."""
        return ()

    def stops_at(self, frame: dict[str, Any]) -> bool:
        """With ``stop_on_first_failure``: whether no test should run after ``frame``.

        Only at a failure the program caused and knows of (it crashed, ran out of time, memory
        or output): whether an answer is right is known on the host alone, and stopping there
        would tell the program.
        """
        # In assert mode a failed test may be the test code's own comparison: never stop there.
        return bool(self.request["mode"] != "assert" and frame["status"] != OK)

    def close(self) -> None:
        """Stop everything this runner started."""

    def value_outcome(self, value: Any) -> Outcome:
        """A returned value, once it is known to be one the host can read back and judge."""
        try:
            codec.decode(value)
        except (codec.CodecError, RecursionError) as exc:
            message = f"the returned value cannot be judged: {exc}"
            return Outcome(RUNTIME_ERROR, {"type": "UnjudgeableValue", "message": message, "traceback": ""})
        if len(dumps(value, allow_nan=True)) > self.supervisor.output_limit:
            error = {"type": "OutputLimit", "message": "the return value is too large", "traceback": ""}
            return Outcome(OUTPUT_LIMIT, error)
        return Outcome(OK, value=value)

    def frames(self) -> Iterator[dict[str, Any]]:
        """Load the program, then run every test in order; one frame per test that ran."""
        self.load_failure = self._guarded_load()
        stop = bool(self.request.get("stop_on_first_failure"))
        for index, test in enumerate(self.request["tests"]):
            frame = self._guarded_test(index, test)
            yield frame
            if stop and self.stops_at(frame):
                return

    def _program_changed(self) -> Outcome | None:
        """Once the program is loaded for the first test, its folder is sealed; a test that then
        changed it (to leave state for the next) fails every test after it."""
        workspace = self.supervisor.workspace
        if not workspace.sealed:
            workspace.seal()
        elif workspace.changed():
            message = "the program changed its own files (its source or what the compiler made) during a test"
            return Outcome(RUNTIME_ERROR, {"type": "ProgramChanged", "message": message, "traceback": ""})
        return None

    def _guarded_load(self) -> Outcome | None:
        try:
            return self.load()
        except Exception as exc:  # noqa: BLE001 - the program's doing fails its tests, never the harness
            error = {"type": "HarnessError", "message": f"loading the program broke: {exc}", "traceback": ""}
            return Outcome(COMPILE_ERROR, error)

    def _guarded_test(self, index: int, test: dict[str, Any]) -> dict[str, Any]:
        """One test's frame, even when something the program left or sent breaks its handling:
        then that test is the program's runtime error, and the next starts afresh."""
        try:
            return self._test(index, test)
        except Exception as exc:  # noqa: BLE001 - the program's doing ends its test, never the harness
            self.close()
            return self.supervisor.broken(index, f"{type(exc).__name__}: {exc}")

    def _test(self, index: int, test: dict[str, Any]) -> dict[str, Any]:
        supervisor = self.supervisor
        if self.load_failure is None:
            self.load_failure = self.ready() or self._program_changed()
        if self.load_failure is not None:
            return supervisor.finish(index, None, self.load_failure, time.monotonic(), None, ())
        io = supervisor.open_io(str(test.get("stdin", "")), test.get("files"), index)
        oom_before = oom_kills()
        supervisor.clock.supervised = self.supervised()
        started = supervisor.start(io)
        try:
            outcome = self.run_test(test, io)
        except Abort as abort:
            # Whatever state the runner was in is the test's; nothing of it may serve the next.
            self.close()
            outcome = Outcome(abort.status, abort.error())
        except BaseException:
            io.close()
            raise
        return supervisor.finish(index, io, outcome, started, oom_before, self.supervised())


def runner_for(request: dict[str, Any], supervisor: Supervisor, spare: Worker | None = None) -> Runner:
    """The runner the request names (its mode ``prime`` has one of its own). ``spare`` is a Python
    worker started ahead of the request, for the runners that use one (else it is stopped)."""
    from .python import PythonRunner

    if request["mode"] == "prime":
        from .prime import PrimeRunner

        return PrimeRunner(request, supervisor, spare)
    if request.get("runner") in ("process", "node"):
        from .node import NodeRunner
        from .process import ProcessRunner

        if spare is not None:
            spare.kill()
        return NodeRunner(request, supervisor) if request["runner"] == "node" else ProcessRunner(request, supervisor)
    return PythonRunner(request, supervisor, spare)
