"""reward-kit's C and C++ rewards (``engine.compat.reward_kit.cpp_code``) on real programs: the
Piston flow (compile, run each test, stop at the first test scoring 0), in the cpp image."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.compat.reward_kit.cpp_code import binary_cpp_code_reward, execute_cpp_code, ioi_cpp_code_reward

pytestmark = pytest.mark.docker

SUM = "int main() { long a, b; cin >> a >> b; cout << a + b << endl; }"  # the includes are added
TESTS = [
    {"input": "1 2", "expected_output": "3"},
    {"input": "2 2", "expected_output": "5"},
    {"input": "3 3", "expected_output": "6"},
]


def answer(code: str, tag: str = "cpp") -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"```{tag}\n{code}\n```"}]


def statuses(result: object) -> list[str]:
    return [r["status"] for r in json.loads(result.metrics["test_results"].reason)]  # type: ignore[attr-defined]


def test_tests_stop_at_the_first_that_scores_nothing(language_images: None) -> None:
    passing = ioi_cpp_code_reward(answer(SUM), TESTS[:1] + TESTS[2:])
    assert passing.score == 1.0 and passing.reason == "2/2 tests passed (100.00%).", passing.metrics
    assert statuses(passing) == ["AC"] * 2
    # "4" against "5" is 80 % alike by edit distance: partial, not zero, so the third runs.
    partial = ioi_cpp_code_reward(answer(SUM), TESTS)
    assert statuses(partial) == ["AC", "PA", "AC"] and partial.score == pytest.approx(2 / 3)
    wrong = ioi_cpp_code_reward(answer('int main() { cout << "x" << endl; }'), TESTS)
    assert statuses(wrong) == ["WA"] and wrong.reason == "0/1 tests passed (0.00%)."
    broken = ioi_cpp_code_reward(answer("int main() { return }"), TESTS)
    assert statuses(broken) == ["CE"] and broken.score == 0.0


def test_a_string_truth_c_and_the_binary_reward(language_images: None) -> None:
    close = ioi_cpp_code_reward(answer('int main() { printf("%d\\n", 101); }', "c"), "100", language="c")
    assert close.score == 0.95 and close.reason == "Code executed successfully. Output similarity: 0.95."
    binary = binary_cpp_code_reward(answer(SUM), TESTS)
    assert binary.score == 0.0 and binary.metrics["binary_result"].reason == "Failed (threshold: 0.99, actual: 0.67)"
    crashed = asyncio.run(execute_cpp_code("int main() { return 3; }"))
    assert crashed == {"success": False, "output": None, "error": "Runtime error (exit code 3): "}
    slow = asyncio.run(execute_cpp_code("int main() { for (;;); }", timeout=4000))
    assert slow["success"] is False and slow["error"].startswith("Runtime error (exit code None)")
