"""Drop-in ``run_test``, ``check_correctness`` and ``compute_score`` for verl's ``prime_code``.

Change one import and keep the rewards::

    # from verl.utils.reward_score.prime_code import compute_score
    from engine.compat.prime_code import compute_score

The signatures, return values and quirks are those of verl 0.9.1 (and ``run_test`` takes
ColossalAI's ``run_all_tests`` keyword). The difference is where the code runs: in a fresh
hardened container per call instead of a forked process of the trainer. The container only
observes (what the program printed, what the function returned); the reference's comparison
and its control flow (early stop, ``-1``/``-2`` codes, ``error_info`` keys, timeouts that turn
every result into ``-1``) are replayed here, on the host. The deviations, each with its reason,
are listed in ``docs/prime-compat.md``.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from typing import Any

from .. import Limits, SandboxError, SyncEngine
from ..lowlevel import (
    HarnessRequest,
    Observation,
    PrimeOptions,
    RunEnd,
    Status,
    backstop_s,
    decode_value,
    encode_value,
    limit_fields,
    normalise_prime_expected,
    prime_call,
    prime_json_text,
    prime_stdout,
)
from ._shared import SharedEngine, seconds_left

__all__ = ["check_correctness", "close", "compute_score", "configure", "run_test"]

# signal.alarm(0) means "no alarm": a step then has no limit of its own.
_NO_STEP_LIMIT_S = 24 * 3600.0

_shared = SharedEngine(Limits(memory_mb=1024, tmpfs_mb=128))


def configure(engine: SyncEngine | None) -> None:
    """Use ``engine`` for every call from this process (``None``: create one on first use)."""
    _shared.configure(engine)


def close() -> None:
    """Close the engine in use, created here or given to :func:`configure`; the next call starts a new one.

    Without it, the engine this module created closes when the interpreter exits.
    """
    _shared.close()


def _engine() -> SyncEngine:
    """The process's shared engine. A forked child (reward workers often are) gets its own."""
    return _shared.get()


def truncatefn(text: Any, length: int = 300) -> str:
    """The reference's truncation, which also insists on a string."""
    assert isinstance(text, str)
    if len(text) <= length:
        return text
    return text[: length // 2] + "...(truncated) ..." + text[-length // 2 :]


# -- one reference run_test call ------------------------------------------------------------------


@dataclass
class _Prepared:
    """A test as the reference sees it once its data has been parsed."""

    harness_test: dict[str, Any]
    expected: Any
    shown_inputs: str
    shown_outputs: str


@dataclass
class _Run:
    """One reference ``run_test`` call: its parsed tests, and its outcome once replayed."""

    call: bool
    fn_name: Any
    run_all_tests: bool
    prepared: list[_Prepared] = field(default_factory=list)
    data_error: BaseException | None = None
    results: list[Any] = field(default_factory=list)
    info: dict[str, Any] | None = None
    raised: BaseException | None = None
    fatal: bool = False
    done: bool = False

    @property
    def harness_tests(self) -> list[dict[str, Any]]:
        if self.prepared:
            return [p.harness_test for p in self.prepared]
        # The build still happens before the first test's data is read: probe it without running anything.
        return [{"args": [], "dry": True} if self.call else {"stdin": "", "dry": True}]

    def feed(self, observation: Observation) -> bool:
        """Replay one observed step; True once the reference would have stopped."""
        if self.done:
            return True
        index = observation.index
        if observation.status is Status.COMPILE_ERROR:
            self._returns([-2], _error_info(observation))
        elif observation.status in (Status.ABORTED, Status.TIMEOUT, Status.MEMORY_LIMIT):
            # The reference's process died (or was killed): no result at all.
            self.fatal = self.done = True
        elif not self.prepared:
            pass  # the dry probe: the build worked
        elif observation.status is Status.RUNTIME_ERROR:
            self.results.append(-1)
            if not (self.run_all_tests and not self.call):
                self._returns(self.results, _error_info(observation))
        else:
            self._judge(self.prepared[index], observation)
        if not self.done and index + 1 >= len(self.prepared) and self.data_error is not None:
            self.raised, self.done = self.data_error, True
        return self.done

    def _judge(self, test: _Prepared, observation: Observation) -> None:
        wrong = {"expected": test.shown_outputs, "inputs": test.shown_inputs, "error_message": "Wrong Answer"}
        if not self.call:
            if observation.status is Status.OK and prime_stdout(observation.stdout, test.expected):
                self.results.append(True)
                return
            self.results.append(False)
            if not self.run_all_tests:
                self._returns(self.results, {"output": truncatefn(observation.stdout, 200), **wrong})
            return
        returned = decode_value(observation.value, keep_types=True)
        comparison = prime_call(returned, test.expected)
        if comparison.error is not None:
            self.results.append(-1)
            self._returns(
                self.results, {"error": comparison.error, "traceback": "Traceback (most recent call last):\n  "}
            )
        elif comparison.passed:
            self.results.append(True)
        else:
            self.results.append(False)
            self._returns(self.results, {"output": truncatefn(prime_json_text(returned), 200), **wrong})

    def _returns(self, results: list[Any], info: dict[str, Any]) -> None:
        self.results, self.info, self.done = results, info, True

    def finish(self, end: RunEnd, error: str | None) -> None:
        if self.done:
            return
        if end in (RunEnd.TIMEOUT, RunEnd.MEMORY_LIMIT):
            self.fatal = self.done = True
        elif end is RunEnd.SANDBOX_ERROR:
            raise SandboxError(f"the sandbox failed while running the program: {error}")
        elif self.data_error is not None:
            self.raised = self.data_error
        else:
            self.info = {}
        self.done = True


def _error_info(observation: Observation) -> dict[str, Any]:
    error = observation.error
    return {"error": error.message if error else "", "traceback": error.traceback if error else ""}


def _prepare(in_outs: Any, code: Any, timeout: Any, run_all_tests: bool) -> _Run | BaseException:
    """Everything the reference checks or parses on the host side, in its order."""
    if code is None:
        return AssertionError("should not happen: test code is none")
    if not in_outs:
        return UnboundLocalError("cannot access local variable 'which_type' where it is not associated with a value")
    try:
        fn_name = in_outs.get("fn_name")
    except AttributeError as exc:
        return exc
    if not isinstance(timeout, int):
        return TypeError(f"'{type(timeout).__name__}' object cannot be interpreted as an integer")
    run = _Run(call=fn_name is not None, fn_name=fn_name, run_all_tests=run_all_tests)
    try:
        for index, inputs in enumerate(in_outs["inputs"]):
            run.prepared.append(_prepare_test(run.call, inputs, in_outs["outputs"][index]))
    except Exception as exc:  # noqa: BLE001 - the reference raises it when it reaches this test
        run.data_error = exc
    return run


def _prepare_test(call: bool, inputs: Any, outputs: Any) -> _Prepared:
    if call:
        args = [json.loads(line) for line in inputs.split("\n")]
        expected = json.loads(outputs)
        width = 300 // (inputs.count("\n") + 1)
        shown_inputs = "\n".join(truncatefn(line, width) for line in inputs.strip().split("\n"))
        shown_outputs = truncatefn(outputs, 200)
        try:
            if isinstance(args[0], dict):
                args = [{int(k): v for k, v in args[0].items()}]
        except Exception:  # noqa: BLE001, S110 - the reference keeps the arguments as they are
            pass
        return _Prepared({"args": encode_value(args)}, normalise_prime_expected(expected), shown_inputs, shown_outputs)
    shown_inputs, shown_outputs = truncatefn(inputs), truncatefn(outputs, 200)
    return _Prepared({"stdin": inputs}, outputs, shown_inputs, shown_outputs)


def _execute(runs: list[_Run], code: str, timeout: int, session_limit: float | None) -> None:
    """Run one reference call, or several one-test calls side by side, in one container."""
    call = runs[0].call
    entry = runs[0].fn_name if isinstance(runs[0].fn_name, str) else ""
    tests, owners = [], []
    for run in runs:
        for offset, test in enumerate(run.harness_tests):
            tests.append(test)
            owners.append((run, offset))
    step_limit_s = float(timeout) if timeout > 0 else _NO_STEP_LIMIT_S
    # The reference's per-test timeout is wall-clock time; here it is CPU time with the usual
    # wall-clock backstop, so that a verdict does not depend on how busy the machine is. (The
    # worker only imports what the program can reach of the reference's prelude: the program is
    # built in the session.)
    request = HarnessRequest(
        mode="prime",
        code=code,
        entry=entry if call else None,
        tests=tests,
        **{**limit_fields(Limits()), "time_limit_s": step_limit_s, "wall_limit_s": backstop_s(step_limit_s)},
        prime=PrimeOptions(
            session_limit_s=session_limit,
            isolate=len(runs) > 1,
            continue_after_error=runs[0].run_all_tests and not call,
        ),
    )

    engine = _engine()
    step_s = float(timeout) if timeout > 0 else float(session_limit or 1)
    limits = engine.limits.with_time(min(max(step_s, session_limit or 0), 3600.0))
    # The container runs every test before anything is judged: were it stopped at the first
    # wrong answer, as the reference stops, the program would learn that its answer was wrong.
    harness_run = engine.run_harness("python", request, limits, deadline_s=seconds_left())
    for observation in harness_run.observations:
        run, offset = owners[observation.index]
        run.feed(observation.model_copy(update={"index": offset}))
    error = harness_run.error.message if harness_run.error else None
    for run in runs:
        run.finish(harness_run.end, error)


def _call(
    in_outs: Any, code: Any, timeout: Any, session_limit: float | None, run_all_tests: bool = False
) -> _Run | BaseException:
    prepared = _prepare(in_outs, code, timeout, run_all_tests)
    if isinstance(prepared, _Run):
        if session_limit is not None and session_limit <= 0:
            prepared.fatal = prepared.done = True
        else:
            _execute([prepared], code, timeout, session_limit)
    return prepared


# -- the reference's functions ------------------------------------------------------------------------


def run_test(
    in_outs: Any, test: Any = None, debug: bool = False, timeout: int = 15, run_all_tests: bool = False
) -> tuple[list[Any], dict[str, Any]]:
    """verl 0.9.1 ``run_test`` (``run_all_tests`` as in ColossalAI).

    Where the reference's process would die (a timeout, ``SystemExit`` in a called function,
    a crash) it never returns; this returns ``[-1] * len(inputs)`` and ``{}`` instead, which is
    what every caller of the reference turns that into.
    """
    run = _call(in_outs, test, timeout, None, run_all_tests)
    if isinstance(run, BaseException):
        raise run
    if run.raised is not None:
        raise run.raised
    if run.fatal:
        return [-1 for _ in range(len(in_outs["inputs"]))], {}
    return run.results, run.info or {}


def check_correctness(
    in_outs: Any, generation: Any, timeout: int = 10, debug: bool = True
) -> tuple[list[Any], list[dict[str, Any]]]:
    """verl 0.9.1 ``check_correctness``: one run with a global limit of ``timeout + 1`` seconds."""
    return _outcome(_call(in_outs, generation, timeout, timeout + 1 if isinstance(timeout, int) else 1), in_outs)


def _outcome(run: _Run | BaseException, in_outs: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """What ``check_correctness`` makes of one ``run_test`` call."""
    if isinstance(run, BaseException) or run.raised is not None:
        return [-1 for _ in range(len(in_outs["inputs"]))], [{}]
    if run.fatal:
        return [-1 for _ in range(len(in_outs["inputs"]))], []
    return run.results, [run.info or {}]


def _check_each(
    cases: list[dict[str, Any]], generation: str, timeout: int
) -> list[tuple[list[Any], list[dict[str, Any]]]]:
    """``check_correctness`` on each case, as separate processes, but in one container."""
    prepared = [_prepare(case, generation, timeout, False) for case in cases]
    runnable = [run for run in prepared if isinstance(run, _Run)]
    if runnable:
        _execute(runnable, generation, timeout, timeout + 1)
    return [_outcome(run, case) for run, case in zip(prepared, cases, strict=True)]


def compute_score(completion: str, test_cases: Any, continuous: bool = False) -> tuple[Any, Any]:
    """verl 0.9.1 ``compute_score``: all tests in one run, then (``continuous``) the first ten
    one at a time (without ``fn_name``, as the reference does) for a fractional reward."""
    solution = completion.split("```python")[-1].split("```")[0]
    # Kept as loosely typed as the reference keeps them: their types change along the way.
    success: Any
    metadata: Any
    metadata_list: Any
    try:
        try:
            if not isinstance(test_cases, dict):
                test_cases = json.loads(test_cases)
        except Exception as exc:  # noqa: BLE001 - the reference prints and carries on
            print(f"Error:{exc}")
        try:
            res, metadata = check_correctness(in_outs=test_cases, generation=solution, timeout=5, debug=False)
            metadata = dict(enumerate(metadata))[0]
            success = all(x is True for x in res)
            if success:
                return success, metadata
        except SandboxError:
            raise
        except Exception:  # noqa: BLE001, S110 - as the reference: fall through to the per-test pass
            pass
        test_cases_list = []
        inputs = test_cases["inputs"]
        outputs = test_cases["outputs"]
        for i in range(len(inputs)):
            test_cases_list.append({"inputs": [inputs[i]], "outputs": [outputs[i]]})
        if continuous:
            metadata_list = []
            res_list: list[Any] = []
            for case, (res, metadata_found) in zip(
                test_cases_list, _check_each(test_cases_list[:10], solution, 10), strict=False
            ):
                try:
                    metadata = dict(enumerate(metadata_found))[0]
                except Exception:  # noqa: BLE001 - metadata can be empty, as in the reference
                    metadata = {}
                metadata["test_case"] = {
                    "input": str(case["inputs"][0]),
                    "output": str(case["outputs"][0]),
                    "res": str(res),
                }
                metadata_list.append(metadata)
                res_list.extend(res)
            res_count = len(res_list) if len(res_list) > 0 else 1
            success = sum(x is True for x in res_list) / res_count
    except SandboxError:
        raise  # a failed sandbox is not a zero reward
    except Exception:  # noqa: BLE001 - the reference prints the traceback and scores zero
        traceback.print_exc(10)
        success = False
        metadata_list = None
    return success, metadata_list  # the reference raises UnboundLocalError here without `continuous`
