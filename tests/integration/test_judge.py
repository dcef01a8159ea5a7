"""Judging through the public API: every test kind, every verdict, early stop, batches."""

from __future__ import annotations

import pytest

from engine import AssertTest, CallTest, Limits, RunTest, StdinTest, Submission, SyncEngine, Verdict

pytestmark = pytest.mark.docker

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def verdicts(engine: SyncEngine, submission: Submission) -> list[str]:
    return [test.verdict.value for test in engine.judge(submission).tests]


def test_stdin_verdicts(engine: SyncEngine) -> None:
    submission = Submission(
        code="n = int(input())\nif n == 3:\n    raise ValueError('three')\nprint(n * 2)\n",
        tests=[
            StdinTest(input="1", expected_output="2"),
            StdinTest(input="2", expected_output="5"),
            StdinTest(input="3", expected_output="6"),
            StdinTest(input="x", expected_output=""),
        ],
    )
    result = engine.judge(submission)
    assert [t.verdict for t in result.tests] == [
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
        Verdict.RUNTIME_ERROR,
    ]
    assert (result.passed, result.total, result.fraction) == (1, 4, 0.25)
    assert result.verdict is Verdict.WRONG_ANSWER and result.first_failure is result.tests[1]
    assert result.tests[1].detail == "line 1: expected '5', got '4'"
    assert "ValueError: three" in result.tests[2].stderr


def test_every_input_reading_style(engine: SyncEngine) -> None:
    programs = [
        "print(int(input()) + 1)",
        "import sys\nprint(int(sys.stdin.read()) + 1)",
        "import sys\nprint(int(sys.stdin.readline()) + 1)",
        "import sys\nprint(int(sys.stdin.readlines()[0]) + 1)",
        "import sys\nprint(int(sys.stdin.buffer.read()) + 1)",
        "print(int(open(0).read()) + 1)",
        "import sys\nfor line in sys.stdin:\n    print(int(line) + 1)",
    ]
    for code in programs:
        result = engine.judge(Submission(code=code, tests=[StdinTest(input="41\n", expected_output="42\n")]))
        assert result.ok, (code, result.tests[0])


def test_call_verdicts_and_solution_class(engine: SyncEngine) -> None:
    code = "class Solution:\n    def f(self, xs, k):\n        return sorted(xs)[:k]\n"
    submission = Submission(
        code=code,
        fn_name="f",
        tests=[
            CallTest(args=[[3, 1, 2], 2], expected=[1, 2]),
            CallTest(args=[[3, 1, 2], 1], expected=[2]),
            CallTest(args=[None, 1], expected=[]),
        ],
    )
    result = engine.judge(submission)
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR]
    assert result.tests[0].returned == [1, 2]
    assert result.tests[2].error is not None and result.tests[2].error.type == "TypeError"


def test_call_tests_do_not_share_state_with_a_process_per_test(engine: SyncEngine) -> None:
    code = "seen = []\ndef f(x):\n    seen.append(x)\n    return len(seen)\n"
    tests = [CallTest(args=[i], expected=1) for i in range(3)]
    assert engine.judge(Submission(code=code, fn_name="f", tests=tests, process_per_test=True)).ok


def test_assert_tests(engine: SyncEngine) -> None:
    code = "def is_even(n):\n    return n % 2 == 0\n"
    submission = Submission(
        code=code,
        entry_point="is_even",
        tests=[
            AssertTest(code="assert candidate(2) and not candidate(3)"),
            AssertTest(code="assert is_even(5)"),
        ],
    )
    result = engine.judge(submission)
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert result.tests[1].detail == "failed: assert is_even(5)"


def test_run_tests_judge_exit_status_and_optional_output(engine: SyncEngine) -> None:
    submission = Submission(
        code="import sys\nprint('hi')\nsys.exit(int(input()))\n",
        tests=[
            RunTest(stdin="0"),
            RunTest(stdin="3", expected_exit_code=3),
            RunTest(stdin="0", expected_stdout="hi\n"),
            RunTest(stdin="0", expected_stdout="bye\n"),
            RunTest(stdin="1"),
        ],
    )
    assert verdicts(engine, submission) == ["passed", "passed", "passed", "wrong_answer", "runtime_error"]


def test_compile_error_applies_to_every_test(engine: SyncEngine) -> None:
    submission = Submission(code="def f(:\n", fn_name="f", tests=[CallTest(args=[], expected=1)] * 3)
    result = engine.judge(submission)
    assert [t.verdict for t in result.tests] == [Verdict.COMPILE_ERROR] * 3
    assert result.tests[0].error is not None and "SyntaxError" in result.tests[0].error.type


def test_limits_verdicts(engine: SyncEngine) -> None:
    limits = Limits(wall_time_s=1, memory_mb=128, tmpfs_mb=8, shm_mb=4, output_bytes=10_000)
    code = (
        "n = input()\n"
        "if n == 'loop':\n    while True: pass\n"
        "if n == 'memory':\n    x = b'x' * (400 * 2**20)\n"
        "if n == 'flood':\n    print('y' * 100_000)\n"
        "print('ok')\n"
    )
    tests = [StdinTest(input=kind, expected_output="ok") for kind in ("loop", "memory", "flood", "fine")]
    assert verdicts(engine, Submission(code=code, tests=tests, limits=limits)) == [
        "timeout",
        "memory_limit",
        "output_limit",
        "passed",
    ]


def test_stop_on_first_failure_skips_the_rest(engine: SyncEngine) -> None:
    tests = [
        StdinTest(input="1 1", expected_output="2"),
        StdinTest(input="1 1", expected_output="3"),
        StdinTest(input="1 1", expected_output="2"),
    ]
    result = engine.judge(Submission(code=SUM, tests=tests, stop_on_first_failure=True))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.SKIPPED]
    assert result.verdict is Verdict.WRONG_ANSWER


def test_prime_comparator_is_selectable(engine: SyncEngine) -> None:
    spaced = [StdinTest(expected_output="1 2")]
    assert engine.judge(Submission(code="print('1  2')", tests=spaced)).ok
    assert not engine.judge(Submission(code="print('1  2')", tests=spaced, comparator="prime")).ok
    loose = [StdinTest(expected_output="0.333333333")]
    assert not engine.judge(Submission(code="print(0.33333)", tests=loose)).ok
    assert engine.judge(Submission(code="print(0.33333)", tests=loose, comparator="prime")).ok


def test_batch_results_come_back_in_input_order(engine: SyncEngine) -> None:
    submissions = [
        Submission(
            id=str(i),
            code=f"import time\ntime.sleep({0.3 if i % 2 else 0})\nprint({i})",
            tests=[StdinTest(expected_output=str(i))],
        )
        for i in range(8)
    ]
    results = engine.judge_many(submissions)
    assert [r.id for r in results] == [str(i) for i in range(8)]
    assert all(r.ok for r in results)


def test_oversized_jobs_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="code"):
        Submission(code="x" * 2_000_000, tests=[StdinTest(expected_output="")])
    with pytest.raises(ValueError, match="tests"):
        Submission(code="x", tests=[StdinTest(expected_output="")] * 10_001)
