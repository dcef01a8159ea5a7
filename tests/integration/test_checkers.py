"""Checkers (special judges) and output rules: problems with more than one right answer."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Checker, Limits, OutputMatch, StdinTest, Submission, SyncEngine

pytestmark = pytest.mark.docker

# Any two non-negative integers that add up to N.
SPLIT_CHECKER = """
def check(input, expected, output):
    n = int(input)
    parts = output.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return False, f"expected two non-negative integers, got {output[:50]!r}"
    if int(parts[0]) + int(parts[1]) != n:
        return 0.5, "they do not add up"
    return True
"""
TESTS = [StdinTest(input="10\n", expected_output="5 5\n"), StdinTest(input="7\n", expected_output="3 4\n")]


def judged(engine: SyncEngine, code: str, checker: str = SPLIT_CHECKER, **extra: Any) -> list[tuple[str, Any, Any]]:
    submission = Submission(code=code, tests=TESTS, checker=Checker(code=checker), **extra)
    return [(t.verdict.value, t.score, t.detail) for t in engine.judge(submission).tests]


def test_a_checker_accepts_any_right_answer_and_says_why_it_rejects(engine: SyncEngine) -> None:
    assert judged(engine, "n = int(input())\nprint(0, n)") == [("passed", 1.0, None)] * 2
    assert judged(engine, "n = int(input())\nprint(n - 1, 1)") == [("passed", 1.0, None)] * 2
    assert judged(engine, "print(1, 1)") == [("wrong_answer", 0.5, "they do not add up")] * 2
    assert judged(engine, "print('x')")[0] == ("wrong_answer", 0.0, "expected two non-negative integers, got 'x\\n'")
    # What the program does wrong is still its own: the checker only sees outputs of tests that ran.
    assert judged(engine, "raise SystemExit(3)")[0][0] == "runtime_error"
    cpp = '#include <cstdio>\nint main(){int n;scanf("%d",&n);printf("%d 0\\n",n);}'
    assert judged(engine, cpp, language="cpp") == [("passed", 1.0, None)] * 2


@pytest.mark.parametrize(
    ("checker", "why"),
    [
        ("def check(input, expected, output):\n    raise ValueError('broken checker')", "broken checker"),
        ("def check(input, expected, output):\n    return 'yes'", "it must return a bool or a score"),
        ("def check(input, expected, output):\n    return 2", "it must return a bool or a score"),
        ("def other(): pass", "check"),
    ],
)
def test_a_broken_checker_is_the_judges_failure_not_the_programs(engine: SyncEngine, checker: str, why: str) -> None:
    verdict, score, detail = judged(engine, "print(5, 5)", checker)[0]
    assert verdict == "sandbox_error" and score is None and why in detail


def test_output_rules_from_a_record(engine: SyncEngine) -> None:
    record = {
        "code": "print('b 2')\nprint('A 1.0004')",
        "tests": [{"kind": "stdin", "input": "", "expected_output": "a 1\nb 2\n"}],
        "comparator": {"layout": "unordered_lines", "case_sensitive": False},
    }
    result = engine.judge(Submission.model_validate(record))
    # Unordered lines compare tokens as text: 1.0004 is not 1.
    assert result.verdict.value == "wrong_answer"
    tolerant = {**record, "comparator": {"layout": "tokens", "abs_tol": 0.001, "case_sensitive": False}}
    tolerant["code"] = "print('a 1.0004 b')\nprint(2)"
    tolerant["tests"] = [{"kind": "stdin", "input": "", "expected_output": "A 1.0\nB 2\n"}]
    assert engine.judge(Submission.model_validate(tolerant)).verdict.value == "passed"
    assert Submission.model_validate(tolerant).comparator == OutputMatch(
        layout="tokens", abs_tol=0.001, case_sensitive=False
    )


def test_no_output_size_breaks_the_checkers_requests(engine: SyncEngine) -> None:
    """45 tests of 1 MiB of output that JSON escapes sixfold (270 MiB as a request) are checked
    in as many requests as their size needs."""
    printing = "import sys\nsys.stdout.write('\\x01' * (1 << 20))"
    measuring = "def check(input, expected, output):\n    return len(output) == int(expected)\n"
    tests = [StdinTest(input="", expected_output=str(1 << 20))] * 45
    limits = Limits(output_bytes=2 << 20, memory_mb=1024)
    result = engine.judge(Submission(code=printing, tests=tests, checker=Checker(code=measuring), limits=limits))
    assert [t.verdict.value for t in result.tests] == ["passed"] * 45, result.tests[0]
