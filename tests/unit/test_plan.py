"""The harness request a submission becomes: whether its tests share a process."""

from __future__ import annotations

import pytest

from engine import DEFAULT_LIMITS, CallTest, Interactor, StdinTest, Submission
from engine.judge._judge import plan, plan_run

STDIN = [StdinTest(input="1", expected_output="1")]


@pytest.mark.parametrize(
    ("chosen", "engine_default", "shared"),
    [(None, True, False), (None, False, True), (True, False, False), (False, True, True)],
)
def test_a_submissions_choice_wins_over_the_engines(chosen: bool | None, engine_default: bool, shared: bool) -> None:
    submission = Submission(code="print(input())", tests=STDIN, process_per_test=chosen)
    assert plan(submission, DEFAULT_LIMITS, process_per_test=engine_default).shared_process is shared


@pytest.mark.parametrize(
    "submission",
    [
        Submission(language="c", code="int main(void) { return 0; }", tests=STDIN, process_per_test=False),
        Submission(language="javascript", code="function f() {}", fn_name="f", tests=[CallTest(expected=1)]),
        Submission(
            code="print(input())",
            tests=STDIN,
            interactor=Interactor(code="print(1)"),
            process_per_test=False,
        ),
    ],
    ids=["a compiled program", "a javascript function", "an interactive problem"],
)
def test_only_pythons_runner_shares_a_process(submission: Submission) -> None:
    assert plan(submission, DEFAULT_LIMITS, process_per_test=False).shared_process is False


def test_a_plain_run_follows_the_engine() -> None:
    assert plan_run("print(1)", "", DEFAULT_LIMITS, process_per_test=False).shared_process is True
    assert plan_run("print(1)", "", DEFAULT_LIMITS).shared_process is False
    assert plan_run("int main(){}", "", DEFAULT_LIMITS, "c", process_per_test=False).shared_process is False
