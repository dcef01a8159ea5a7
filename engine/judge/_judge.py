"""The judge: from a submission to a harness request (``plan``), and from what the harness
observed to verdicts (``conclude``); the same for a plain run (``plan_run``, ``run_result``).

Judging happens once the container has reported: nothing the host concludes reaches a
container while it runs. (Stopping a container at a wrong answer would tell the program that
its answer was wrong, an oracle it could pass on.) ``stop_on_first_failure`` is applied here,
after the fact: the tests after the first failure are ``skipped``, whatever they observed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._languages import toolchain
from .._limits import Limits
from .._models import ErrorInfo, Language, Outcome, RunResult, safe_text
from .._submission import (
    AssertTest,
    CallTest,
    Case,
    CaseResult,
    Checker,
    RunTest,
    StdinTest,
    Submission,
    SubmissionResult,
    SubtaskResult,
    Verdict,
)
from ..harness import codec
from ..harness.protocol import MAX_REQUEST_BYTES, STARVED_ALLOWANCE
from ._comparators import compare_call, compare_stdout
from ._compare import Comparison, clip, show
from ._protocol import HarnessRequest, HarnessRun, Observation, RunEnd, Status, limit_fields
from ._testlib import CHECKER_FILES, testlib_answer

__all__ = [
    "KEPT_TEXT_BYTES",
    "CheckerReport",
    "checker_answer",
    "conclude",
    "interactor_limits_for",
    "interactor_reports",
    "not_judged",
    "plan",
    "plan_checks",
    "plan_controls",
    "plan_interactor",
    "plan_run",
    "run_result",
    "verdict_for",
]


@dataclass(frozen=True)
class CheckerReport:
    """What the checker said of one test's output; and, when that was no usable answer (it
    raised, ran out of time or memory, returned nonsense), what it said of the expected answer
    in the output's place (the control), which decides whose failure it was."""

    observed: Observation | None
    control: Observation | None = None
    missing: str = "it reported nothing for this test"
    """Why ``observed`` is None: the checker's container failed, or the check could not be sent."""
    ended_first: bool = False
    """An interactor's: it ended its test before the program did."""


# The checker's reports, by the index of the program's test each judges.
Checks = Mapping[int, CheckerReport]
# A checker request holds at most this much of inputs, outputs and answers (JSON-encoded); more
# tests go to more requests, one after another.
CHECK_REQUEST_BYTES = 32 << 20

# What a result keeps of each output and of a returned value, measured as JSON: the judge sees
# everything, but a result (one line of `airlock score`'s output) stays small whatever was printed.
KEPT_TEXT_BYTES = 64 * 1024

_STATUS_VERDICT = {
    Status.RUNTIME_ERROR: Verdict.RUNTIME_ERROR,
    Status.COMPILE_ERROR: Verdict.COMPILE_ERROR,
    Status.TIMEOUT: Verdict.TIMEOUT,
    Status.MEMORY_LIMIT: Verdict.MEMORY_LIMIT,
    Status.OUTPUT_LIMIT: Verdict.OUTPUT_LIMIT,
    Status.ASSERTION_FAILED: Verdict.WRONG_ANSWER,
    Status.ABORTED: Verdict.RUNTIME_ERROR,
}
_END_VERDICT = {
    RunEnd.MEMORY_LIMIT: Verdict.MEMORY_LIMIT,
    RunEnd.TIMEOUT: Verdict.TIMEOUT,
    RunEnd.SANDBOX_ERROR: Verdict.SANDBOX_ERROR,
}
_STATUS_OUTCOME = {
    Status.OK: Outcome.OK,
    Status.RUNTIME_ERROR: Outcome.RUNTIME_ERROR,
    Status.COMPILE_ERROR: Outcome.COMPILE_ERROR,
    Status.TIMEOUT: Outcome.TIMEOUT,
    Status.MEMORY_LIMIT: Outcome.MEMORY_LIMIT,
    Status.OUTPUT_LIMIT: Outcome.OUTPUT_LIMIT,
    Status.ASSERTION_FAILED: Outcome.RUNTIME_ERROR,
    Status.ABORTED: Outcome.RUNTIME_ERROR,
}
_END_OUTCOME = {
    RunEnd.MEMORY_LIMIT: Outcome.MEMORY_LIMIT,
    RunEnd.TIMEOUT: Outcome.TIMEOUT,
    RunEnd.SANDBOX_ERROR: Outcome.SANDBOX_ERROR,
}


def plan_run(
    code: str,
    stdin: str,
    limits: Limits,
    language: Language = "python",
    args: Sequence[str] = (),
    files: Mapping[str, str] | None = None,
    *,
    process_per_test: bool = True,
) -> HarnessRequest:
    """The request for one plain run of ``code`` with ``args``; ``files`` go beside the program
    (a source its compiler takes is compiled with it) and into its working directory."""
    how = _runner(language, code)
    if files and how["runner"] == "process":
        how["process"] = toolchain(language).with_sources(how["process"], files)
    run: dict[str, Any] = {"stdin": stdin}
    if args:
        run["argv"] = list(args)
    if files:
        run["files"] = dict(files)
    return HarnessRequest(
        **how,
        mode="script",
        code=code,
        tests=[run],
        program_files=dict(files) if files else None,
        shared_process=not process_per_test and how["runner"] == "python",
        **limit_fields(limits),
    )


def run_result(run: HarnessRun) -> RunResult:
    """What one plain run observed."""
    if not run.observations:
        return RunResult(outcome=_END_OUTCOME.get(run.end, Outcome.SANDBOX_ERROR), error=run.error)
    observation = run.observations[0]
    return RunResult(
        outcome=_STATUS_OUTCOME[observation.status],
        exit_code=observation.exit_code,
        signal=observation.signal,
        stdout=observation.stdout,
        stderr=observation.stderr,
        stdout_truncated=observation.stdout_truncated,
        stderr_truncated=observation.stderr_truncated,
        usage=observation.usage,
        error=observation.error,
    )


def plan(submission: Submission, limits: Limits, *, process_per_test: bool = True) -> HarnessRequest:
    """The request document for the harness (see ``engine.harness.protocol``); ``process_per_test``
    where the submission does not choose."""
    tests: list[dict[str, Any]]
    entry: str | None = None
    match submission.kind:
        case "stdin" if submission.interactor is not None:
            # The input is the interactor's alone: the program hears only what it says.
            mode, tests = "script", [{"stdin": ""} for _ in submission.tests]
        case "stdin":
            mode, tests = "script", [{"stdin": _as(StdinTest, t).input} for t in submission.tests]
        case "run":
            mode, tests = "script", [{"stdin": _as(RunTest, t).stdin} for t in submission.tests]
        case "call":
            mode, entry = "call", submission.fn_name
            tests = [{"args": codec.encode(_as(CallTest, t).args)} for t in submission.tests]
        case _:
            mode, entry = "assert", submission.entry_point
            tests = [{"code": _as(AssertTest, t).code, "prelude": _as(AssertTest, t).prelude} for t in submission.tests]
    size = sum(len(t.get("stdin", "")) + len(t.get("code", "")) for t in tests) + len(submission.code)
    if size > MAX_REQUEST_BYTES:
        raise ValueError(f"the submission's code and tests come to {size} characters; the limit is {MAX_REQUEST_BYTES}")
    how = _runner(submission.language, submission.code, submission.standard, mode)
    if submission.process_per_test is not None:
        process_per_test = submission.process_per_test
    return HarnessRequest(
        **how,
        mode=mode,
        code=submission.code,
        entry=entry,
        tests=tests,
        **limit_fields(limits),
        stop_on_first_failure=submission.stop_on_first_failure,
        interactive=submission.interactor is not None,
        # Only Python's runner has a process that tests could share (an interaction's are pipes).
        shared_process=not process_per_test and how["runner"] == "python" and submission.interactor is None,
    )


def plan_interactor(submission: Submission, limits: Limits) -> HarnessRequest:
    """The interactor's request: one run per test as ``interactor input output [answer]``, its
    stdin and stdout the other ends of the program's."""
    interactor = submission.interactor
    assert interactor is not None
    tests = []
    for test in submission.tests:
        given = _as(StdinTest, test)
        files = {"input": given.input}
        if given.expected_output:
            files["answer"] = given.expected_output
        tests.append({"stdin": "", "argv": ["input", "output", *files.keys() - {"input"}], "files": files})
    return HarnessRequest(
        **_runner(interactor.language, interactor.code, interactor.standard),
        mode="script",
        code=interactor.code,
        tests=tests,
        **limit_fields(interactor_limits_for(limits)),
        interactive=True,
    )


def interactor_limits_for(limits: Limits) -> Limits:
    """The interactor's limits: the program's, with a wall-clock backstop past anything the
    program's side can take (its own backstop stretched by a busy machine, its compilation), so
    that a program that stops talking reaches its own limit first and the interactor, waiting
    on it, is never the one blamed."""
    stretched = (1 + STARVED_ALLOWANCE) * limits.wall_time_s + limits.compile_wall_time_s
    return limits.model_copy(update={"wall_time_s": stretched})


def interactor_reports(run: HarnessRun, tests: int, ended_first: set[int]) -> dict[int, CheckerReport]:
    """What the interactor said of each of ``tests`` tests, by index (why it said nothing, for those
    it did not report); ``ended_first``: the tests it ended before the program did."""
    why = run.error.message if run.error is not None else "it reported nothing for this test"
    reports = {index: CheckerReport(None, missing=why) for index in range(tests)}
    for observation in run.observations:
        reports[observation.index] = CheckerReport(observation, ended_first=observation.index in ended_first)
    return reports


def _runner(language: Language, code: str, standard: str | None = None, mode: str = "script") -> dict[str, Any]:
    """Python's own runner, the language's runner for calling functions, or the process runner
    with the language's commands."""
    chain = toolchain(language)
    if mode in ("call", "assert") and chain.function_runner is not None:
        return {"runner": chain.function_runner}
    commands = chain.commands_for(code, standard)
    return {"runner": "python"} if commands is None else {"runner": "process", "process": commands}


def _as(kind: type[Any], test: Case) -> Any:
    assert isinstance(test, kind)
    return test


def plan_checks(submission: Submission, run: HarnessRun, limits: Limits) -> list[tuple[list[int], HarnessRequest]]:
    """The checker's requests: one call of its function per test whose output it must judge, with
    that test's input, expected output and the program's output, in requests of at most
    ``CHECK_REQUEST_BYTES``; with the indices of the tests each judges. No request without a checker or
    without an output to judge."""
    calls = []
    for observation in run.observations:
        judged = _output_to_judge(submission.tests[observation.index], observation)
        if judged is not None:
            calls.append((observation.index, [judged[0], judged[1], observation.stdout]))
    return _checker_requests(submission, calls, limits)


def plan_controls(submission: Submission, indices: list[int], limits: Limits) -> list[tuple[list[int], HarnessRequest]]:
    """The controls for the tests at ``indices``: the checker called on each one's expected
    answer in place of the program's output."""
    calls = []
    for index in indices:
        judged = _expected_of(submission.tests[index])
        if judged is not None:
            calls.append((index, [judged[0], judged[1], judged[1]]))
    return _checker_requests(submission, calls, limits)


def _checker_requests(
    submission: Submission, calls: list[tuple[int, list[str]]], limits: Limits
) -> list[tuple[list[int], HarnessRequest]]:
    checker = submission.checker
    if checker is None or not calls:
        return []
    batches: list[tuple[list[int], list[dict[str, Any]]]] = []
    size = CHECK_REQUEST_BYTES
    for index, args in calls:
        test = _checker_test(checker, args)
        cost = _json_size(test)
        if size + cost > CHECK_REQUEST_BYTES:
            batches.append(([], []))
            size = 0
        batches[-1][0].append(index)
        batches[-1][1].append(test)
        size += cost
    if checker.protocol == "testlib":
        how: dict[str, Any] = {**_runner(checker.language, checker.code, checker.standard), "mode": "script"}
    else:
        how = {"mode": "call", "entry": checker.entry}
    return [
        (indices, HarnessRequest(**how, code=checker.code, tests=tests, **limit_fields(limits)))
        for indices, tests in batches
    ]


def _checker_test(checker: Checker, texts: list[str]) -> dict[str, Any]:
    """One call of a checker function with ``texts`` (the input, the expected output, the output
    to judge), or one run of a checker program with them as its three files (in testlib's order)."""
    if checker.protocol == "testlib":
        given, expected, output = texts
        files = dict(zip(CHECKER_FILES, (given, output, expected), strict=True))
        return {"stdin": "", "argv": list(CHECKER_FILES), "files": files}
    return {"args": codec.encode(texts)}


def _expected_of(test: Case) -> tuple[str, str] | None:
    if isinstance(test, StdinTest):
        return test.input, test.expected_output
    if isinstance(test, RunTest) and test.expected_stdout is not None:
        return test.stdin, test.expected_stdout
    return None


def _output_to_judge(test: Case, observation: Observation) -> tuple[str, str] | None:
    """The test's input and expected output, when the program's output is what decides it."""
    if isinstance(test, StdinTest) and observation.status is Status.OK:
        return test.input, test.expected_output
    if (
        isinstance(test, RunTest)
        and test.expected_stdout is not None
        and observation.status in (Status.OK, Status.RUNTIME_ERROR)
        and observation.signal is None
        and observation.exit_code == test.expected_exit_code
    ):
        return test.stdin, test.expected_stdout
    return None


def verdict_for(submission: Submission, observation: Observation, checks: Checks | None = None) -> CaseResult:
    """Judge one observation against the expectation of the test it belongs to.

    Never raises: a value the judge cannot handle is a wrong answer that says so.
    """
    try:
        return _judged(submission, observation, checks)
    except Exception as exc:  # noqa: BLE001 - an unjudgeable output fails its test, never the run
        error = ErrorInfo(type="JudgeError", message=f"the output could not be compared: {type(exc).__name__}: {exc}")
        return CaseResult(index=observation.index, verdict=Verdict.WRONG_ANSWER, detail=error.message, error=error)


def _judged(submission: Submission, observation: Observation, checks: Checks | None) -> CaseResult:
    test = submission.tests[observation.index]
    facts = _facts(observation)
    if submission.interactor is not None:
        return _interacted(observation, (checks or {}).get(observation.index), facts)
    if submission.checker is not None and _output_to_judge(test, observation) is not None:
        return _checked(submission.checker, (checks or {}).get(observation.index), facts)
    if (
        isinstance(test, RunTest)
        and observation.status in (Status.OK, Status.RUNTIME_ERROR)
        and observation.signal is None
    ):
        if observation.exit_code != test.expected_exit_code:
            detail = f"expected exit status {test.expected_exit_code}, got {observation.exit_code}"
            return CaseResult(verdict=Verdict.RUNTIME_ERROR, detail=detail, **facts)
        if test.expected_stderr is not None:
            on_stderr = compare_stdout(observation.stderr, test.expected_stderr, submission.comparator)
            if not on_stderr.passed:
                return _compared(dataclasses.replace(on_stderr, detail=f"on stderr: {on_stderr.detail}"), facts)
        if test.expected_stdout is None:
            return CaseResult(verdict=Verdict.PASSED, **facts)
        return _compared(compare_stdout(observation.stdout, test.expected_stdout, submission.comparator), facts)
    if observation.status is not Status.OK:
        message = observation.error.message if observation.error else None
        return CaseResult(verdict=_STATUS_VERDICT[observation.status], detail=message, **facts)
    if isinstance(test, StdinTest):
        return _compared(compare_stdout(observation.stdout, test.expected_output, submission.comparator), facts)
    if isinstance(test, CallTest):
        try:
            returned = codec.decode(observation.value, keep_types=True)
        except codec.CodecError as exc:
            error = ErrorInfo(type="UnjudgeableValue", message=str(exc))
            return CaseResult(verdict=Verdict.RUNTIME_ERROR, detail=str(exc), **{**facts, "error": error})
        comparison = compare_call(returned, test.expected, submission.comparator)
        facts["returned"], clipped = _kept_value(codec.decode(observation.value))
        facts["clipped"] = facts["clipped"] or clipped
        return _compared(comparison, facts)
    return CaseResult(verdict=Verdict.PASSED, **facts)


def checker_answer(checker: Checker, observation: Observation) -> tuple[float, str | None] | str:
    """The score and message the checker gave, or why it gave no usable answer."""
    if checker.protocol == "testlib":
        return testlib_answer(observation)
    if observation.status is not Status.OK:
        return observation.error.message if observation.error else f"it ended with {observation.status.value}"
    try:
        value = codec.decode(observation.value)
    except codec.CodecError as exc:
        return f"its value cannot be read: {exc}"
    message = None
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[1], str):
        value, message = value
    if isinstance(value, bool):
        return (1.0 if value else 0.0), message
    if isinstance(value, (int, float)) and 0 <= value <= 1:
        return float(value), message
    return f"it returned {show(value)}; it must return a bool or a score from 0 to 1 (with a message)"


def _checked(checker: Checker, report: CheckerReport | None, facts: dict[str, Any]) -> CaseResult:
    """The checker's word on one test. When it gave no usable answer for the program's output,
    the control decides whose failure that was: a checker that accepts the expected answer failed
    on what the program printed (the program's wrong answer, with the checker's message); one
    that fails on the expected answer too, or gave no report at all, is broken (the judge's
    failure, ``sandbox_error``, never the program's verdict)."""
    if report is None or report.observed is None:
        why = report.missing if report is not None else "it reported nothing for this test"
        return _checker_error(f"the checker failed: {why}", facts)
    answer = checker_answer(checker, report.observed)
    if isinstance(answer, tuple):
        score, message = answer
        verdict = Verdict.PASSED if score >= 1 else Verdict.WRONG_ANSWER
        return CaseResult(verdict=verdict, detail=message, score=score, **facts)
    control = checker_answer(checker, report.control) if report.control is not None else "it was not run"
    if isinstance(control, tuple) and control[0] >= 1:
        detail = clip(f"the checker rejected the output: {answer}")
        return CaseResult(verdict=Verdict.WRONG_ANSWER, detail=detail, score=0.0, **facts)
    on_expected = control if isinstance(control, str) else "it did not accept it"
    return _checker_error(f"the checker failed: {answer}; on the expected answer too: {on_expected}", facts)


def _interacted(program: Observation, report: CheckerReport | None, facts: dict[str, Any]) -> CaseResult:
    """The interactor's word on one test. An interactor that gave no verdict (it failed, ran
    out of its own time or memory, or reported nothing) is the judge's failure, never the
    program's verdict: it is trusted, and its limits outlast the program's (a program that stops
    talking reaches its own first, see ``interactor_limits_for``). An interactor that rejected
    the program before the program ended gave the verdict: what the program did after its input
    ended (crashed on the missing answer) follows from it. Otherwise the program's own failure
    (a crash, its time, memory or output) is its verdict; then the interactor's exit code decides,
    as a testlib checker's."""
    interactor = report.observed if report is not None else None
    if report is None or interactor is None:
        why = report.missing if report is not None else "it reported nothing for this test"
        return _checker_error(f"the interactor failed: {why}", facts, "InteractorError")
    answer = testlib_answer(interactor)
    if isinstance(answer, str):
        return _checker_error(f"the interactor failed: {answer}", facts, "InteractorError")
    score, message = answer
    if program.status is not Status.OK and not (report.ended_first and score < 1):
        detail = program.error.message if program.error else None
        return CaseResult(verdict=_STATUS_VERDICT[program.status], detail=detail, **facts)
    verdict = Verdict.PASSED if score >= 1 else Verdict.WRONG_ANSWER
    return CaseResult(verdict=verdict, detail=message, score=score, **facts)


def _checker_error(message: str, facts: dict[str, Any], kind: str = "CheckerError") -> CaseResult:
    error = ErrorInfo(type=kind, message=message)
    return CaseResult(verdict=Verdict.SANDBOX_ERROR, detail=clip(message), **{**facts, "error": error})


def _facts(observation: Observation) -> dict[str, Any]:
    stdout, stdout_clipped = _kept_text(observation.stdout)
    stderr, stderr_clipped = _kept_text(observation.stderr)
    return {
        "index": observation.index,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": observation.stdout_truncated,
        "stderr_truncated": observation.stderr_truncated,
        "clipped": stdout_clipped or stderr_clipped,
        "exit_code": observation.exit_code,
        "signal": observation.signal,
        "usage": observation.usage,
        "error": observation.error,
    }


def _compared(comparison: Comparison, facts: dict[str, Any]) -> CaseResult:
    if comparison.error is not None:
        error = ErrorInfo(type="ComparisonError", message=comparison.error)
        return CaseResult(verdict=Verdict.RUNTIME_ERROR, detail=comparison.error, **{**facts, "error": error})
    verdict = Verdict.PASSED if comparison.passed else Verdict.WRONG_ANSWER
    return CaseResult(verdict=verdict, detail=comparison.detail, **facts)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", errors="surrogatepass"))


def _kept_text(text: str) -> tuple[str, bool]:
    """``text`` cut so that its JSON form fits ``KEPT_TEXT_BYTES``, and whether it was cut."""
    text = safe_text(text)
    # As JSON a character takes one to six bytes: up to four as UTF-8, six as an escape (\u0001).
    if len(text) * 6 <= KEPT_TEXT_BYTES or (len(text) <= KEPT_TEXT_BYTES and _json_size(text) <= KEPT_TEXT_BYTES):
        return text, False
    # So the longest prefix that fits lies between a sixth of the budget and the whole budget.
    fits, too_long = KEPT_TEXT_BYTES // 6, min(len(text), KEPT_TEXT_BYTES) + 1
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if _json_size(text[:middle]) <= KEPT_TEXT_BYTES:
            fits = middle
        else:
            too_long = middle
    return text[:fits], True


def _kept_value(value: Any) -> tuple[Any, bool]:
    """The JSON form of a returned value for a result, or None and True when it is too large."""
    storable = _storable(value)
    if _json_size(storable) > KEPT_TEXT_BYTES:
        return None, True
    return storable, False


def _storable(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        # Beyond 4300 digits Python will not write an integer in decimal.
        return value if value.bit_length() <= 14000 else f"<integer of {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, float):
        return value if value - value == 0 else repr(value)  # JSON has no NaN or infinity
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {
            safe_text(key if isinstance(key, str) else str(_storable(key))): _storable(item)
            for key, item in value.items()
        }
    return safe_text(repr(value))


def conclude(
    submission: Submission, run: HarnessRun, wall_time_s: float, checks: Checks | None = None
) -> SubmissionResult:
    """Verdicts for every test: the judged observations, applying ``stop_on_first_failure``;
    then, for tests with none, what the run's end says about the first of them, and ``skipped``
    (or ``sandbox_error``, when the sandbox failed) for the rest.

    Never raises: were judging itself to fail, every test would be ``sandbox_error``, saying why.
    """
    try:
        return _concluded(submission, run, wall_time_s, checks)
    except Exception as exc:  # noqa: BLE001 - every submission gets exactly one result
        error = ErrorInfo(type="JudgeError", message=f"judging failed: {type(exc).__name__}: {exc}")
        return _unjudged(submission, error, wall_time_s)


def _concluded(submission: Submission, run: HarnessRun, wall_time_s: float, checks: Checks | None) -> SubmissionResult:
    missing = _END_VERDICT.get(run.end, Verdict.SKIPPED)
    observations = run.observations
    results: list[CaseResult] = []
    failed = False
    for index in range(len(submission.tests)):
        if failed and submission.stop_on_first_failure:
            result = CaseResult(index=index, verdict=Verdict.SKIPPED)
        elif index < len(observations):
            result = verdict_for(submission, observations[index], checks)
        else:
            verdict = missing if index == len(observations) or missing is Verdict.SANDBOX_ERROR else Verdict.SKIPPED
            detail = run.error.message if run.error is not None and verdict is not Verdict.SKIPPED else None
            result = CaseResult(index=index, verdict=verdict, detail=detail)
        failed = failed or result.verdict is not Verdict.PASSED
        results.append(result)
    first_failure = next((r for r in results if r.verdict is not Verdict.PASSED), None)
    unfinished = run.end is RunEnd.SANDBOX_ERROR and any(r.verdict is Verdict.SANDBOX_ERROR for r in results)
    return SubmissionResult(
        id=submission.id,
        verdict=first_failure.verdict if first_failure else Verdict.PASSED,
        passed=sum(r.verdict is Verdict.PASSED for r in results),
        total=len(results),
        tests=results,
        error=run.error,
        wall_time_s=round(wall_time_s, 6),
        retryable=unfinished,
        **_points(submission, results),
    )


def _points(submission: Submission, tests: list[CaseResult]) -> dict[str, Any]:
    """With subtasks, what each earned (see ``Subtask``) and their sums; without, nothing."""
    if submission.subtasks is None:
        return {}

    def score(test: CaseResult) -> float:
        if test.verdict is Verdict.PASSED:
            return 1.0
        return test.score or 0.0

    subtasks = []
    for subtask in submission.subtasks:
        members = [tests[index] for index in subtask.tests]
        failed = next((test.verdict for test in members if test.verdict is not Verdict.PASSED), Verdict.PASSED)
        earned = subtask.points * min(score(test) for test in members)
        subtasks.append(SubtaskResult(points=earned, max_points=subtask.points, verdict=failed))
    return {
        "points": sum(subtask.points for subtask in subtasks),
        "max_points": sum(subtask.max_points for subtask in subtasks),
        "subtasks": subtasks,
    }


def _unjudged(
    submission: Submission, error: ErrorInfo, wall_time_s: float, *, retryable: bool = False
) -> SubmissionResult:
    tests = [
        CaseResult(index=index, verdict=Verdict.SANDBOX_ERROR, detail=error.message)
        for index in range(len(submission.tests))
    ]
    return SubmissionResult(
        id=submission.id,
        verdict=Verdict.SANDBOX_ERROR,
        passed=0,
        total=len(tests),
        tests=tests,
        error=error,
        wall_time_s=round(wall_time_s, 6),
        retryable=retryable,
        **_points(submission, tests),
    )


def not_judged(submission: Submission, why: str) -> SubmissionResult:
    """The result of a submission the infrastructure could not judge (``why``): every test
    ``sandbox_error``, and ``retryable``."""
    return _unjudged(submission, ErrorInfo(type="NotJudged", message=why), 0.0, retryable=True)
