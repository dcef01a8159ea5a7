"""Differential test: ``engine.compat.reward_kit`` against the real reward-kit 0.4.1.

The reference runs the corpus's programs on the host (they are benign), in a child process with
no standard input; ours run in sandboxes. Scores, validity, metric names and reasons must be
the same; the texts of errors (tracebacks, file names) are cut off before comparing. Where the
reference touches the host, we differ on purpose and say why.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import time
from typing import Any

import pytest
from sandboxes import cheapest

from engine.compat._shared import deadline_at
from engine.compat.reward_kit import _engine as shared_engine

from . import normalize
from .external import REWARD_KIT, reward_kit_call, reward_kit_outcomes
from .reward_kit_corpus import CASES

pytestmark = [pytest.mark.docker, pytest.mark.installs(*REWARD_KIT)]

DEVIATIONS: dict[str, str] = {}


def _ours(case: dict[str, Any]) -> Any:
    module = importlib.import_module(f"engine.compat.reward_kit.{case['module']}")
    function = getattr(module, case["function"])
    return normalize.reward_outcome(lambda: function(**case["kwargs"]))


def test_reward_kit_agrees_case_by_case() -> None:
    # What is compared is the judging, not the container around it: the cheapest sandbox here,
    # in an engine of the drop-ins' own making (their limits), chosen by its variables.
    with cheapest().chosen_by_environment():
        shared_engine.close()
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as background:
                theirs_future = background.submit(reward_kit_outcomes, CASES)
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    ours = dict(zip((c["name"] for c in CASES), pool.map(_ours, CASES), strict=True))
                theirs = theirs_future.result()
        finally:
            shared_engine.close()
    differing = {
        name: {"ours": ours[name], "theirs": theirs[name]}
        for name in ours
        if ours[name] != theirs[name] and name not in DEVIATIONS
    }
    assert not differing, differing
    assert len(CASES) - len(DEVIATIONS) >= 80


HELPER_CALLS: list[tuple[str, str, list[Any]]] = [
    ("cpp_code", "compare_outputs", ["3", "3"]),
    ("cpp_code", "compare_outputs", ["100.5", "100"]),
    ("cpp_code", "compare_outputs", ["1 2 3", "1 2 4"]),
    ("cpp_code", "compare_outputs", ["hello world", "hello there"]),
    ("cpp_code", "compare_outputs", ["0", "0.0"]),
    ("cpp_code", "compare_outputs", [None, ""]),
    ("cpp_code", "string_similarity", ["kitten", "sitting"]),
    ("cpp_code", "levenshtein_distance", ["flaw", "lawn"]),
    ("cpp_code", "add_cpp_includes", ["int main() { std::cout << 1; }"]),
    ("cpp_code", "add_cpp_includes", ["#include <bits/stdc++.h>\nusing namespace std;\nint main(){}"]),
    ("cpp_code", "add_c_includes", ["int main(void) { return 0; }"]),
    ("cpp_code", "extract_code_blocks", ["```cpp\nint a;\n```\n```c\nint b;\n```\n```\nint c;\n```", "cpp"]),
    ("cpp_code", "extract_code_blocks", ["```cpp\nint a;\n```\n```c\nint b;\n```", "c"]),
    ("code_execution", "extract_code_blocks", ["```Python\n<think>x</think>\nprint(1)\n```", "python"]),
    ("code_execution", "extract_code_blocks", ["```python \nprint(1)\n```\n```js\nx\n```", None]),
    ("code_execution", "compare_outputs", ["[1, 2, 2]", "[2, 1]"]),
    ("code_execution", "compare_outputs", ["nan", "1"]),
    ("code_execution", "compare_outputs", ["110", "100"]),
    ("code_execution", "normalize_output", ["  a\r\n\tb \u00a0c  "]),
    ("code_execution", "string_similarity", ["abcdef", "azced"]),
]
HELPER_SCRIPT = """
import importlib, json, sys
calls = json.load(sys.stdin)
print(json.dumps([getattr(importlib.import_module("reward_kit.rewards." + m), f)(*a) for m, f, a in calls]))
"""


def test_the_helpers_agree() -> None:
    ours = [
        getattr(importlib.import_module(f"engine.compat.reward_kit.{module}"), name)(*arguments)
        for module, name, arguments in HELPER_CALLS
    ]
    theirs = reward_kit_call(HELPER_SCRIPT, HELPER_CALLS)
    assert json.loads(json.dumps(ours)) == theirs


NOT_JUDGED_CALLS = [
    ("code_execution", "local_code_execution_reward", {"messages": [], "ground_truth": "3"}),
    (
        "code_execution",
        "fractional_code_reward",
        {"messages": [], "ground_truth": [{"input": "", "expected_output": "3"}]},
    ),
    (
        "apps_coding_reward",
        "evaluate_apps_solution",
        {"messages": [], "ground_truth": {"inputs": [""], "outputs": ["3"]}},
    ),
    ("cpp_code", "binary_cpp_code_reward", {"messages": [], "ground_truth": [{"input": "", "expected_output": "3"}]}),
]


@pytest.mark.parametrize(("module", "function", "kwargs"), NOT_JUDGED_CALLS, ids=[c[1] for c in NOT_JUDGED_CALLS])
def test_a_program_the_sandbox_could_not_judge_has_no_valid_score(module: str, function: str, kwargs: Any) -> None:
    """A sandbox failure (here: the call's deadline, already passed) is never the 0 of a wrong
    program: reward-kit's result says the score is not valid, and why."""
    cpp = module == "cpp_code"
    program = '```cpp\n#include <cstdio>\nint main(){puts("3");}\n```' if cpp else "```python\nprint(3)\n```"
    messages = [{"role": "user", "content": "Print 3."}, {"role": "assistant", "content": program}]
    reward = getattr(importlib.import_module(f"engine.compat.reward_kit.{module}"), function)
    with deadline_at(time.monotonic()):
        result = reward(**{**kwargs, "messages": messages})
    assert result.score == 0.0 and result.is_score_valid is False, result
    assert "not judged" in str(result.reason).lower() or "deadline" in str(result.reason), result.reason
    assert reward(**{**kwargs, "messages": messages}).score == 1.0
