"""How a checker program's exit code and stderr become a test's score and detail (testlib's
protocol; docs/contest-judging.md). Pure logic: observations made here, no container."""

from __future__ import annotations

import pytest

from engine._models import ErrorInfo, Usage
from engine.judge._protocol import Observation, Status
from engine.judge._testlib import testlib_answer as answer_of  # (not collected as a test)


def ran(
    exit_code: int | None, stderr: str = "", status: Status = Status.RUNTIME_ERROR, signal: int | None = None
) -> Observation:
    return Observation(
        type="test",
        index=0,
        status=Status.OK if exit_code == 0 and status is Status.RUNTIME_ERROR else status,
        exit_code=exit_code,
        signal=signal,
        stdout="",
        stderr=stderr,
        stdout_truncated=False,
        stderr_truncated=False,
        usage=Usage(),
        error=ErrorInfo(type="Timeout", message="the CPU time limit was exceeded")
        if status is Status.TIMEOUT
        else None,
    )


@pytest.mark.parametrize(
    ("exit_code", "stderr", "answer"),
    [
        (0, "ok 3 numbers\n", (1.0, "3 numbers")),
        (0, "", (1.0, None)),
        (1, "wrong answer 2nd numbers differ\n", (0.0, "2nd numbers differ")),
        (1, "they differ", (0.0, "they differ")),
        (2, "wrong output format Unexpected end of file\n", (0.0, "presentation error: Unexpected end of file")),
        (2, "", (0.0, "presentation error")),
        (7, "points 0.25 a quarter\n", (0.25, "a quarter")),
        (7, "points 1", (1.0, None)),
        (7, "0.5", (0.5, None)),
    ],
)
def test_a_verdict_is_read_from_the_exit_code_and_its_message_from_stderr(
    exit_code: int, stderr: str, answer: tuple[float, str | None]
) -> None:
    assert answer_of(ran(exit_code, stderr)) == answer


@pytest.mark.parametrize(
    ("observation", "why"),
    [
        (ran(3, "FAIL the jury's answer is worse"), "it reported its own failure: the jury's answer is worse"),
        (ran(5), "it exited with 5"),
        (ran(7, "points 30"), "it gave 30 points; a test's points are a score from 0 to 1"),
        (ran(7, "points nan"), "it gave nan points"),
        (ran(7, "points many"), "without a number first"),
        (ran(None, status=Status.TIMEOUT), "the CPU time limit was exceeded"),
        (ran(None, signal=11), "it ended with runtime_error"),
    ],
)
def test_what_is_no_verdict_says_why(observation: Observation, why: str) -> None:
    answer = answer_of(observation)
    assert isinstance(answer, str) and why in answer, answer
