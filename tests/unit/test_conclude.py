"""Judging observations on the host: pure logic, no containers."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from engine import CallTest, ErrorInfo, StdinTest, Submission, Subtask, Verdict
from engine.harness import codec
from engine.judge._judge import KEPT_TEXT_BYTES, conclude
from engine.judge._protocol import HarnessRun, Observation, RunEnd


def observation(index: int, **fields: Any) -> Observation:
    body: dict[str, Any] = {
        "type": "test",
        "index": index,
        "status": "ok",
        "exit_code": 0,
        "signal": None,
        "stdout": "",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "usage": {"wall_time_s": 0.01, "cpu_time_s": 0.01, "peak_memory_kb": 1000},
        "error": None,
        **fields,
    }
    return Observation.model_validate(body)


def test_early_stop_is_applied_after_the_run_to_every_later_test() -> None:
    tests = [StdinTest(expected_output=str(n)) for n in range(3)]
    submission = Submission(code="", tests=tests, stop_on_first_failure=True)
    # The container ran every test; the third would even have passed.
    run = HarnessRun(
        observations=[observation(0, stdout="9"), observation(1, stdout="1"), observation(2, stdout="2")],
        end=RunEnd.COMPLETE,
    )
    result = conclude(submission, run, 0.1)
    assert [t.verdict for t in result.tests] == [Verdict.WRONG_ANSWER, Verdict.SKIPPED, Verdict.SKIPPED]
    assert result.tests[2].stdout == ""  # what a skipped test did is not reported


def test_results_stay_small_and_writable_whatever_was_printed() -> None:
    flood = "\x01" * (4 * KEPT_TEXT_BYTES)
    submission = Submission(code="", tests=[StdinTest(expected_output="x")])
    run = HarnessRun(observations=[observation(0, stdout=flood, stderr="\ud800" * 10)], end=RunEnd.COMPLETE)
    result = conclude(submission, run, 0.1)
    test = result.tests[0]
    assert test.verdict is Verdict.WRONG_ANSWER and test.clipped
    assert len(json.dumps(test.stdout)) <= KEPT_TEXT_BYTES and test.stderr == "\ufffd" * 10
    result.model_dump_json().encode("utf-8")


def test_a_value_the_judge_cannot_show_is_still_judged() -> None:
    expected = 10**5000
    submission = Submission(code="", fn_name="f", tests=[CallTest(expected=expected), CallTest(expected=expected)])
    run = HarnessRun(
        observations=[observation(0, value=codec.encode(expected)), observation(1, value=codec.encode(expected + 1))],
        end=RunEnd.COMPLETE,
    )
    result = conclude(submission, run, 0.1)
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert result.tests[1].detail is not None and "digits>" in result.tests[1].detail
    json.loads(result.model_dump_json())


def test_subtasks_earn_all_or_nothing_and_sandbox_failures_earn_nothing() -> None:
    tests = [StdinTest(expected_output=str(n)) for n in range(4)]
    subtasks = [Subtask(tests=[0, 1], points=30), Subtask(tests=[2, 3], points=70), Subtask(tests=[0], points=5)]
    submission = Submission(code="", tests=tests, subtasks=subtasks)
    # Test 3 was never reached: the sandbox failed.
    run = HarnessRun(
        observations=[observation(0, stdout="0"), observation(1, stdout="1"), observation(2, stdout="2")],
        end=RunEnd.SANDBOX_ERROR,
        error=ErrorInfo(type="SandboxError", message="lost"),
    )
    result = conclude(submission, run, 0.1)
    assert (result.points, result.max_points) == (35, 105)
    assert result.subtasks is not None
    assert [(s.points, s.verdict) for s in result.subtasks] == [
        (30, Verdict.PASSED),
        (0, Verdict.SANDBOX_ERROR),
        (5, Verdict.PASSED),
    ]
    assert Submission(code="", tests=tests).model_dump().get("subtasks") is None
    assert conclude(Submission(code="", tests=tests), run, 0.1).points is None


@pytest.mark.parametrize(
    ("subtask", "message"),
    [
        ({"tests": [0, 4], "points": 1}, "subtask 0 names test 4; there are 4 tests (from 0)"),
        ({"tests": [-1], "points": 1}, "greater than or equal to 0"),
        ({"tests": [], "points": 1}, "at least 1 item"),
        ({"tests": [0], "points": -5}, "greater than or equal to 0"),
        ({"tests": [0], "points": "nan"}, "finite number"),
    ],
)
def test_a_subtask_that_cannot_be_scored_is_refused(subtask: dict[str, Any], message: str) -> None:
    tests = [{"kind": "stdin", "expected_output": ""}] * 4
    with pytest.raises(ValidationError, match=re.escape(message)):
        Submission.model_validate({"code": "", "tests": tests, "subtasks": [subtask]})
