"""From a submission to a harness request, and from the harness's observations to verdicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._compare import Comparison, compare_call, compare_stdout
from ._limits import Limits
from ._models import ErrorInfo
from ._protocol import Observation
from ._submission import (
    AssertTest,
    CallTest,
    RunTest,
    StdinTest,
    Submission,
    SubmissionResult,
    Test,
    TestResult,
    Verdict,
)
from .harness import codec
from .harness.protocol import MAX_REQUEST_BYTES

__all__ = ["conclude", "harness_request", "stop_rule", "verdict_for"]

_STATUS_VERDICT = {
    "runtime_error": Verdict.RUNTIME_ERROR,
    "compile_error": Verdict.COMPILE_ERROR,
    "timeout": Verdict.TIMEOUT,
    "memory_limit": Verdict.MEMORY_LIMIT,
    "output_limit": Verdict.OUTPUT_LIMIT,
    "assertion_failed": Verdict.WRONG_ANSWER,
    "aborted": Verdict.RUNTIME_ERROR,
}


def harness_request(submission: Submission, limits: Limits) -> dict[str, Any]:
    """The request document for the harness (see ``engine.harness.protocol``)."""
    tests: list[dict[str, Any]]
    entry: str | None = None
    match submission.kind:
        case "stdin":
            mode, tests = "script", [{"stdin": _as(StdinTest, t).input} for t in submission.tests]
        case "run":
            mode, tests = "script", [{"stdin": _as(RunTest, t).stdin} for t in submission.tests]
        case "call":
            mode, entry = "call", submission.fn_name
            tests = [{"args": codec.encode(_as(CallTest, t).args)} for t in submission.tests]
        case _:
            mode, entry = "assert", submission.entry_point
            tests = [{"code": _as(AssertTest, t).code} for t in submission.tests]
    request = {
        "mode": mode,
        "code": submission.code,
        "entry": entry,
        "tests": tests,
        "time_limit_s": limits.wall_time_s,
        "output_limit_bytes": limits.output_bytes,
        "stop_on_failure": submission.stop_on_first_failure,
    }
    size = sum(len(t.get("stdin", "")) + len(t.get("code", "")) for t in tests) + len(submission.code)
    if size > MAX_REQUEST_BYTES:
        raise ValueError(f"the submission's code and tests come to {size} characters; the limit is {MAX_REQUEST_BYTES}")
    return request


def _as(kind: type[Any], test: Test) -> Any:
    assert isinstance(test, kind)
    return test


def verdict_for(submission: Submission, observation: Observation) -> TestResult:
    """Judge one observation against the expectation of the test it belongs to."""
    test = submission.tests[observation.index]
    facts: dict[str, Any] = {
        "index": observation.index,
        "stdout": observation.stdout,
        "stderr": observation.stderr,
        "stdout_truncated": observation.stdout_truncated,
        "stderr_truncated": observation.stderr_truncated,
        "exit_code": observation.exit_code,
        "signal": observation.signal,
        "wall_time_s": observation.wall_time_s,
        "cpu_time_s": observation.cpu_time_s,
        "peak_memory_kb": observation.max_rss_kb,
        "error": observation.error,
    }
    if isinstance(test, RunTest) and observation.status in ("ok", "runtime_error") and observation.signal is None:
        if observation.exit_code != test.expected_exit_code:
            detail = f"expected exit status {test.expected_exit_code}, got {observation.exit_code}"
            return TestResult(verdict=Verdict.RUNTIME_ERROR, detail=detail, **facts)
        if test.expected_stdout is None:
            return TestResult(verdict=Verdict.PASSED, **facts)
        return _compared(compare_stdout(observation.stdout, test.expected_stdout, submission.comparator), facts)
    if observation.status != "ok":
        message = observation.error.message if observation.error else None
        return TestResult(verdict=_STATUS_VERDICT[observation.status], detail=message, **facts)
    if isinstance(test, StdinTest):
        return _compared(compare_stdout(observation.stdout, test.expected_output, submission.comparator), facts)
    if isinstance(test, CallTest):
        try:
            returned = codec.decode(observation.value, keep_types=True)
        except codec.CodecError as exc:
            error = ErrorInfo(type="UnjudgeableValue", message=str(exc))
            return TestResult(verdict=Verdict.RUNTIME_ERROR, detail=str(exc), **{**facts, "error": error})
        facts["returned"] = codec.decode(observation.value)
        return _compared(compare_call(returned, test.expected, submission.comparator), facts)
    return TestResult(verdict=Verdict.PASSED, **facts)


def _compared(comparison: Comparison, facts: dict[str, Any]) -> TestResult:
    if comparison.error is not None:
        error = ErrorInfo(type="ComparisonError", message=comparison.error)
        return TestResult(verdict=Verdict.RUNTIME_ERROR, detail=comparison.error, **{**facts, "error": error})
    verdict = Verdict.PASSED if comparison.passed else Verdict.WRONG_ANSWER
    return TestResult(verdict=verdict, detail=comparison.detail, **facts)


def stop_rule(submission: Submission) -> Callable[[Observation], bool] | None:
    """With ``stop_on_first_failure``, stop the container at the first test that does not pass."""
    if not submission.stop_on_first_failure:
        return None
    return lambda observation: verdict_for(submission, observation).verdict is not Verdict.PASSED


def conclude(
    submission: Submission,
    observations: list[Observation],
    missing: Verdict,
    error: ErrorInfo | None,
    wall_time_s: float,
) -> SubmissionResult:
    """Verdicts for every test: judged observations, then ``missing`` for the first test that has
    none (unless it is ``SKIPPED``) and ``SKIPPED`` or ``SANDBOX_ERROR`` for the rest."""
    results = [verdict_for(submission, observation) for observation in observations]
    for index in range(len(results), len(submission.tests)):
        verdict = missing if index == len(observations) or missing is Verdict.SANDBOX_ERROR else Verdict.SKIPPED
        detail = error.message if error is not None and verdict is not Verdict.SKIPPED else None
        results.append(TestResult(index=index, verdict=verdict, detail=detail))
    failure = next((r for r in results if r.verdict is not Verdict.PASSED), None)
    return SubmissionResult(
        id=submission.id,
        verdict=failure.verdict if failure else Verdict.PASSED,
        passed=sum(r.verdict is Verdict.PASSED for r in results),
        total=len(results),
        tests=results,
        error=error,
        wall_time_s=round(wall_time_s, 6),
    )
