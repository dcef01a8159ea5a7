"""Tests that run in the program's own process, where the program could answer for them:
BigCodeBench's (their mocks patch the program's modules) and the test programs of HumanEval-X and
MultiPL-E outside Python (their harnesses judge by exit status). Neither can be unforgeable
against a program that walks its own process (as in those data sets' own harnesses), but no
cheap way passes: leaving early with any status, printing what a pass looks like, reading its
own source or stdin, changing the test framework. Each attack, on every sandbox."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Limits, SyncEngine, Verdict
from engine.judge._datasets import to_submission

PROMPT = 'import random\n\n\ndef task_func(n):\n    """The sum of n rolls of a die (random.randint)."""\n'
TEST = """import unittest
from unittest.mock import patch


class TestCases(unittest.TestCase):
    @patch("random.randint", return_value=4)
    def test_sum_of_fixed_rolls(self, randint):
        self.assertEqual(task_func(3), 12)
        self.assertEqual(randint.call_count, 3)

    def test_no_rolls(self):
        self.assertEqual(task_func(0), 0)
"""
WRONG = PROMPT + "    return -1\n"
# Every file descriptor the program might share with the driver, and every hex word it can find
# in its own script: what a pass would print, aimed everywhere a pass could be read.
SHOUT_TOKENS = """
import os, re, sys
text = open(sys.argv[0]).read() + open(__file__ if os.path.exists(__file__) else sys.argv[0]).read()
for fd in range(0, 64):
    for word in set(re.findall(r"[0-9a-f]{32}", text)) | {"ok"}:
        try:
            os.write(fd, f"ok {word}\\n".encode())
        except OSError:
            pass
"""
ATTACKS = {
    "exit-0-at-import": "import sys\nsys.exit(0)\n",
    "os-exit-0-at-import": "import os\nos._exit(0)\n",
    "os-exit-0-in-the-call": PROMPT + "    import os\n    os._exit(0)\n",
    "print-a-pass": "print('ok')\n" + WRONG,
    "shout-every-token-everywhere": SHOUT_TOKENS + WRONG,
    "silence-failures": "import unittest\nunittest.TestResult.addFailure = lambda *args: None\n" + WRONG,
    "equal-always": "import unittest\nunittest.TestCase.assertEqual = lambda *args, **kw: None\n" + WRONG,
    "run-nothing-pass-all": (
        "import unittest\n"
        "def run(self, result=None):\n"
        "    result.startTest(self)\n    result.addSuccess(self)\n    result.stopTest(self)\n"
        "unittest.TestCase.run = run\n" + WRONG
    ),
    "read-stdin-for-the-secret": "import sys\nprint(sys.stdin.read())\n" + WRONG,
}


def record(solution: str) -> dict[str, Any]:
    return {
        "task_id": "BigCodeBench/0",
        "complete_prompt": PROMPT,
        "code_prompt": "import random\n\n\ndef task_func(n):\n",
        "canonical_solution": "    return sum(random.randint(1, 6) for _ in range(n))\n",
        "test": TEST,
        "entry_point": "task_func",
        "solution": solution,
    }


def test_the_right_solution_passes_and_the_wrong_one_fails(engine: SyncEngine) -> None:
    right = engine.judge(
        to_submission(record(PROMPT + "    return sum(random.randint(1, 6) for _ in range(n))\n"), "r")
    )
    wrong = engine.judge(to_submission(record(WRONG), "w"))
    assert [t.verdict for t in right.tests] == [Verdict.PASSED, Verdict.PASSED], right
    assert [t.verdict for t in wrong.tests] == [Verdict.WRONG_ANSWER, Verdict.WRONG_ANSWER], wrong
    assert "AssertionError: -1 != " in (wrong.tests[0].detail or "")


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_no_cheap_forgery_passes_a_test(engine: SyncEngine, attack: str) -> None:
    result = engine.judge(to_submission(record(ATTACKS[attack]), attack))
    verdicts = [t.verdict for t in result.tests]
    assert len(verdicts) == 2 and Verdict.PASSED not in verdicts, result


CPP_TEST = "#undef NDEBUG\n#include<assert.h>\nint main(){\n    assert (add(1,2)==3);\n}\n"
JAVA_PROMPT = "import java.util.*;\n\nclass Solution {\n    public int add(int a, int b) {\n"
JAVA_TEST = (
    "public class Main {\n    public static void main(String[] args) {\n        Solution s = new Solution();\n"
    "        if (s.add(1, 2) != 3) {\n            throw new AssertionError();\n        }\n    }\n}\n"
)
JS_TEST = "const testAdd = () => {\n  console.assert(add(1, 2) === 3)\n}\n\ntestAdd()\n"
GO_PROMPT = 'package add_test\n\nimport (\n    "os"\n    "testing"\n)\n\nfunc add(a int, b int) int {\n'
GO_TEST = 'func TestAdd(t *testing.T) {\n    if add(1, 2) != 3 {\n        t.Fatal("add(1, 2) != 3")\n    }\n}\n'
RUST_TEST = "\nfn main() {\n    let candidate = add;\n    assert_eq!(candidate(1, 2), 3);\n}\n"
TS_TEST = (
    "declare var require: any;\nconst assert = require('node:assert');\n"
    "function test() {\n  assert.deepEqual(add(1, 2), 3);\n}\n\ntest();"
)


def humaneval_x(task: str, prompt: str, completion: str, test: str) -> dict[str, Any]:
    return {"task_id": task, "prompt": prompt, "declaration": prompt, "generation": completion, "test": test}


def multipl_e(language: str, prompt: str, completion: str, tests: str) -> dict[str, Any]:
    return {
        "name": f"HumanEval_0_{language}",
        "language": language,
        "prompt": prompt,
        "completion": completion,
        "tests": tests,
    }


# A function under test that leaves with status 0 before its test can fail it: each one passed
# by exit status alone, as the data sets' own harnesses judge.
EARLY_EXITS = {
    "humaneval-x-cpp": humaneval_x("CPP/0", "int add(int a,int b){\n", "  exit(0);\n}\n", CPP_TEST),
    "humaneval-x-java": humaneval_x("Java/0", JAVA_PROMPT, "        System.exit(0); return 0;\n    }\n}", JAVA_TEST),
    "humaneval-x-js": humaneval_x("JavaScript/0", "const add = (a, b) => {\n", "  process.exit(0);\n}\n", JS_TEST),
    "multipl-e-ts": multipl_e("ts", "function add(a: number, b: number): number {\n", "  process.exit(0);\n}", TS_TEST),
    "multipl-e-go": multipl_e("go_test.go", GO_PROMPT, "    os.Exit(0)\n    return 0\n}\n", GO_TEST),
    "multipl-e-rust": multipl_e(
        "rs", "fn add(a: isize, b: isize) -> isize {\n", "    std::process::exit(0)\n}\n", RUST_TEST
    ),
    # Printing what a pass looks like, with every hex word the program's text holds.
    "multipl-e-cpp-prints": multipl_e(
        "cpp",
        "#include<cstdio>\n#include<assert.h>\nlong add(long a, long b) {\n",
        '    printf("ok\\n"); fflush(stdout); _exit(0);\n}\n',
        "int main() {\n    assert(add(1, 2) == 3);\n}\n",
    ),
}


def test_no_early_exit_passes_a_test_program(engine: SyncEngine) -> None:
    names = list(EARLY_EXITS)
    # Compiling gets room beyond any load: gVisor's count of a compiler's threads (javac's) runs
    # ahead of the CPU they got when sandboxes share the cores, and compiling is not on trial here.
    submissions = [to_submission(EARLY_EXITS[name], name) for name in names]
    roomy = [Limits.model_validate({**(s.limits or Limits()).model_dump(), "compile_time_s": 120}) for s in submissions]
    results = engine.judge_many([s.model_copy(update={"limits": r}) for s, r in zip(submissions, roomy, strict=True)])
    judged = dict(zip(names, results, strict=True))
    assert all(r.tests and Verdict.PASSED not in [t.verdict for t in r.tests] for r in judged.values()), judged
    # Each lost only its finish line: it ran, and compiled.
    first = {name: (result.tests[0].verdict.value, result.tests[0].detail) for name, result in judged.items()}
    assert {verdict for verdict, _ in first.values()} == {"wrong_answer"}, first
