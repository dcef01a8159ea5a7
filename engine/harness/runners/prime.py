"""The reference-compatible mode: execution as verl's ``prime_code`` ``run_test`` does it
(standard library only).

One worker session runs a whole ``run_test`` call: the program is built once, in the session,
and the tests run in order in that one process (``worker_prime.py`` does it the reference's
way, inside the program's process). Each step (the build, each test) gets ``time_limit_s`` of
CPU time (and its wall-clock backstop); the session gets ``session_limit_s`` of wall-clock
time; the session ends at the first step that is not ``ok`` (a runtime error too, unless
``continue_after_error``). With ``isolate`` each test gets a session of its own, as the
reference's per-test retries do. The host replays the reference's
comparison on what was observed.
"""

from __future__ import annotations

import time

from .._typing import TYPE_CHECKING
from ..processes import oom_kills
from ..protocol import ABORTED, COMPILE_ERROR, OK, RUNTIME_ERROR
from ..supervisor import Abort, ExitInfo, Outcome
from .python import PythonRunner

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from ..supervisor import CaseIO

# Time the worker gets to report how the session's process ended, once its last step is done.
EXIT_RECORD_S = 1.0


class PrimeRunner(PythonRunner):
    """Reference ``run_test`` sessions on the Python worker."""

    def frames(self) -> Iterator[dict[str, Any]]:
        options = self.request.get("prime") or {}
        tests = list(enumerate(self.request["tests"]))
        for group in [[test] for test in tests] if options.get("isolate") else [tests]:
            yield from self._guarded_session(group, options)

    def _guarded_session(
        self, group: list[tuple[int, dict[str, Any]]], options: dict[str, Any]
    ) -> Iterator[dict[str, Any]]:
        """A session whose breakage ends it with the next test as the program's runtime error."""
        last = group[0][0] - 1
        try:
            for frame in self._session(group, options):
                last = frame["index"]
                yield frame
        except Exception as exc:  # noqa: BLE001 - the program's doing ends its session, never the harness
            self.close()
            if last < group[-1][0]:
                yield self.supervisor.broken(last + 1, f"{type(exc).__name__}: {exc}")

    def _session(self, group: list[tuple[int, dict[str, Any]]], options: dict[str, Any]) -> Iterator[dict[str, Any]]:
        supervisor = self.supervisor
        index = group[0][0]
        failure = self.ready()
        if failure is not None:
            yield supervisor.finish(index, None, failure, time.monotonic(), None, ())
            return
        assert self.worker is not None
        session_end = time.monotonic() + float(options.get("session_limit_s") or 1e9)
        keep_going = bool(options.get("continue_after_error"))
        oom_before = oom_kills()
        io = supervisor.open_io("")
        supervisor.clock.supervised = self.supervised()
        started = supervisor.start(io, cap=session_end)
        message = {
            "op": "prime",
            "cwd": supervisor.workspace.workdir,
            # A session runs every test in one process: its fence is the sum of their limits.
            "cpu_fence_s": supervisor.clock.fence_s * len(group),
            "fn_name": self.entry,
            "tests": [test for _, test in group],
            "continue_after_error": keep_going,
            "flavour": options.get("flavour", "verl"),
        }
        try:
            self.worker.channel.send(message, fds=io.fds)
            built = self.expect("built", "exit")
            if built["op"] == "exit" or not built.get("ok"):
                status = ABORTED if built["op"] == "exit" or built.get("aborted") else COMPILE_ERROR
                yield self._last(index, io, Outcome(status, built.get("error")), started, oom_before)
                return
            for index, _ in group:
                started = supervisor.start(io, cap=session_end)
                outcome = self._observed(self.expect("observed", "exit"))
                ends = outcome.status == ABORTED or (outcome.status == RUNTIME_ERROR and not keep_going)
                if ends or index == group[-1][0]:
                    yield self._last(index, io, outcome, started, oom_before)
                    return
                yield supervisor.finish(index, None, outcome, started, oom_before, self.supervised())
        except Abort as abort:
            self.close()
            yield self._last(index, io, Outcome(abort.status, abort.error()), started, oom_before)

    def _observed(self, observed: dict[str, Any]) -> Outcome:
        """One test's observation, as the worker reported it (untrusted: checked here)."""
        if observed["op"] == "exit":
            message = ExitInfo.reported(observed).describe()
            return Outcome(ABORTED, {"type": "Aborted", "message": message, "traceback": ""})
        status = str(observed.get("status"))
        if status not in (OK, RUNTIME_ERROR, ABORTED):
            raise Abort(RUNTIME_ERROR, "the program broke the harness protocol: bad status")
        if status != OK:
            return Outcome(status, observed.get("error"))
        captured = observed.get("stdout")
        outcome = self.value_outcome(observed.get("value")) if self.entry is not None else Outcome(OK)
        if outcome.status != OK and outcome.error is not None and outcome.error["type"] == "UnjudgeableValue":
            # The reference's json.dumps would have raised inside its test: a runtime error.
            outcome = Outcome(RUNTIME_ERROR, {**outcome.error, "type": "TypeError"})
        elif outcome.status != OK:
            raise Abort(outcome.status, outcome.error["message"] if outcome.error else "")
        # The judged output is the text captured inside the process; the descriptors' is context only.
        outcome.stdout = captured if isinstance(captured, str) else None
        return outcome

    def _last(self, index: int, io: CaseIO, outcome: Outcome, started: float, oom_before: int | None) -> dict[str, Any]:
        """The frame of a session's last step: once its process has ended, with its output."""
        if self.worker is not None and self.worker.alive:
            try:
                self.supervisor.clock.extend(EXIT_RECORD_S)
                self.expect("exit")
            except Abort:
                # Its exit record would arrive in the next session's place: start afresh instead.
                self.close()
        return self.supervisor.finish(index, io, outcome, started, oom_before, self.supervised())
