"""Cases for the reward-kit differential test: each names a function of
``reward_kit.rewards.code_execution`` and its keyword arguments (JSON: the same call is made on
both sides). Programs are benign: the reference runs them on the host."""

from __future__ import annotations

import json
from typing import Any

CASES: list[dict[str, Any]] = []


def answer(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "Write a program."}, {"role": "assistant", "content": text}]


def fenced(code: str, tag: str = "python") -> str:
    return f"Here it is:\n```{tag}\n{code}\n```\nDone."


def local(name: str, text: str, **kwargs: Any) -> None:
    CASES.append(
        {
            "name": name,
            "module": "code_execution",
            "function": "local_code_execution_reward",
            "kwargs": {"messages": answer(text), **kwargs},
        }
    )


def fractional(name: str, text: str, ground_truth: Any, **kwargs: Any) -> None:
    CASES.append(
        {
            "name": name,
            "module": "code_execution",
            "function": "fractional_code_reward",
            "kwargs": {"messages": answer(text), "ground_truth": ground_truth, **kwargs},
        }
    )


# -- local_code_execution_reward: Python ------------------------------------------------------------------
local("l_exact", fenced("print(1 + 2)"), ground_truth="3")
local("l_close_number", fenced("print(100.5)"), ground_truth="100")
local("l_far_number", fenced("print(150)"), ground_truth="100")
local("l_partial_list", fenced("print([1, 2, 4])"), ground_truth="[1, 2, 3]")
local("l_similar_text", fenced("print('hello world')"), ground_truth="hello there")
local("l_whitespace", fenced("print('a\\n\\n  b')"), ground_truth="a b")
local("l_no_truth", fenced("print('anything')"))
local("l_empty_truth", fenced("print('anything')"), ground_truth="")
local("l_crash", fenced("raise ValueError('no')"), ground_truth="1")
local("l_exit_is_disabled", fenced("print(1)\nexit()"), ground_truth="1")
local("l_sys_exit_1", fenced("import sys\nprint(1)\nsys.exit(1)"), ground_truth="1")
local("l_timeout", fenced("while True:\n    pass"), ground_truth="1", timeout=1)
local("l_stdin_is_empty", fenced("import sys\nprint(repr(sys.stdin.read()))"), ground_truth="''")
local("l_no_block", "print(1) without a fence", ground_truth="1")
local("l_other_tag_skipped", fenced("console.log(1)", "javascript") + fenced("print(2)"), ground_truth="2")
local("l_untagged_block", "```\nprint(5)\n```", ground_truth="5")
local("l_py_is_unsupported", fenced("print(1)", "py"), ground_truth="1", language="py")
local("l_think_removed", fenced("<think>plan</think>\nprint(7)"), ground_truth="7")
local("l_user_last", fenced("print(1)"), ground_truth="1", messages=[{"role": "user", "content": "x"}])
local("l_first_block_wins", fenced("print(1)") + fenced("print(2)"), ground_truth="2")

# -- local_code_execution_reward: JavaScript --------------------------------------------------------------
local("j_exact", fenced("console.log(1 + 2);", "javascript"), ground_truth="3", language="javascript")
local("j_js_tag", fenced("console.log('hi');", "js"), ground_truth="hi", language="js")
local("j_throw", fenced("throw new Error('no');", "javascript"), ground_truth="1", language="javascript")
local(
    "j_exit_is_disabled",
    fenced("console.log(1);\nprocess.exit(0);\nconsole.log(2);", "javascript"),
    ground_truth="1 2",
    language="javascript",
)
local(
    "j_template_literal_indented",
    fenced("console.log(`a\nb`);", "javascript"),
    ground_truth="a\n  b",
    language="javascript",
)
local("j_timeout", fenced("for (;;) {}", "javascript"), ground_truth="1", language="javascript", timeout=1)

# -- fractional_code_reward -------------------------------------------------------------------------------
STDIN_TESTS = [
    {"input": "1 2", "expected_output": "3"},
    {"input": "10 20", "expected_output": "30"},
    {"input": "5 5", "expected_output": "11"},
]
fractional("f_stdin_two_of_three", fenced("a, b = map(int, input().split())\nprint(a + b)"), STDIN_TESTS)
fractional("f_stdin_crash", fenced("raise SystemError('x')"), STDIN_TESTS[:1])
fractional("f_sys_exit_loses_output", fenced("print(3)\nimport sys\nsys.exit(0)"), STDIN_TESTS[:1])
fractional(
    "f_triple_quote_input",
    fenced("print(input())"),
    [{"input": "it'''s", "expected_output": "it'''s"}, {"input": "ends with '", "expected_output": "ends with '"}],
)
fractional(
    "f_call_mode",
    fenced("def add(a, b):\n    return a + b"),
    [{"input": "1 2", "expected_output": "3"}, {"input": "[1, 2]", "expected_output": "3"}],
    function_to_call="add",
)
fractional(
    "f_call_repr_match",
    fenced("def name(x):\n    return 'bob'"),
    [{"input": "1", "expected_output": "bob"}, {"input": "'7'", "expected_output": "'bob'"}],
    function_to_call="name",
)
fractional(
    "f_js_stdin",
    fenced("const [a, b] = readline().split(' ').map(Number);\nconsole.log(a + b);", "javascript"),
    STDIN_TESTS,
    language="javascript",
)
fractional(
    "f_js_call",
    fenced("function add(a, b) { return a + b; }", "javascript"),
    [{"input": "1 2", "expected_output": "3"}, {"input": "x y", "expected_output": "xy"}],
    language="javascript",
    function_to_call="add",
)
fractional("f_string_truth", fenced("print(42)"), "42")
fractional("f_none_truth", fenced("print(42)"), None)
fractional("f_empty_list_truth", fenced("print(42)"), [])
fractional("f_bad_list", fenced("print(42)"), [{"input": "1"}, "not a dict"])
fractional("f_bad_type", fenced("print(42)"), 42)
fractional("f_unsupported", fenced("puts 1", "ruby"), "1", language="ruby")
fractional("f_unsupported_tests", fenced("puts 1", "ruby"), STDIN_TESTS, language="ruby")
fractional("f_no_block", "no code here", STDIN_TESTS)


# -- deepcoder_code_reward ---------------------------------------------------------------------------------


def deepcoder(name: str, text: str, ground_truth: Any, language: str = "python", **kwargs: Any) -> None:
    CASES.append(
        {
            "name": name,
            "module": "deepcoder_reward",
            "function": "deepcoder_code_reward",
            "kwargs": {"messages": answer(text), "ground_truth": ground_truth, "language": language, **kwargs},
        }
    )


SUM = "a, b = map(int, input().split())\nprint(a + b)"
deepcoder("d_all_pass", fenced(SUM), STDIN_TESTS[:2])
deepcoder("d_one_fails", fenced(SUM), STDIN_TESTS)
deepcoder(
    "d_call",
    fenced("def add(a, b):\n    return a + b"),
    [{"input": "2 3", "expected_output": "5"}],
    target_function="add",
)
deepcoder("d_no_tests", fenced(SUM), [])
deepcoder("d_no_block", "nothing", STDIN_TESTS, language="javascript")
deepcoder("d_unsupported", fenced("puts 1", "ruby"), STDIN_TESTS, language="ruby")
deepcoder(
    "d_js",
    fenced("console.log(readline().split(' ').map(Number).reduce((a, b) => a + b));", "js"),
    STDIN_TESTS,
    language="js",
)
deepcoder("d_user_last", fenced(SUM), STDIN_TESTS, messages=[{"role": "user", "content": "x"}])


# -- evaluate_apps_solution (reward_kit.rewards.apps_coding_reward) -----------------------------------------


def apps(name: str, text: str, ground_truth: Any, messages: list[dict[str, str]] | None = None, **kwargs: Any) -> None:
    CASES.append(
        {
            "name": name,
            "module": "apps_coding_reward",
            "function": "evaluate_apps_solution",
            "kwargs": {
                "messages": answer(text) if messages is None else messages,
                "ground_truth": ground_truth,
                **kwargs,
            },
        }
    )


def in_outs(*pairs: tuple[str, str], **extra: Any) -> str:
    return json.dumps({"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs], **extra})


SUMS = in_outs(("1 2\n", "3\n"), ("20 22\n", "42\n"))
apps("a_pass", fenced(SUM), SUMS)
apps("a_partial", fenced(SUM), in_outs(("1 2\n", "3\n"), ("2 2\n", "5\n"), ("3 3\n", "6\n")))
apps("a_first_wrong", fenced("print(0)"), SUMS)
apps("a_crash", fenced("raise ValueError('no')"), SUMS)
apps("a_crash_after_pass", fenced("import sys\nn = int(input().split()[0])\nassert n < 10\nprint(n + 2)"), SUMS)
apps("a_syntax", fenced("print(1"), SUMS)
apps("a_timeout_two", fenced("while True:\n    pass"), SUMS, execution_timeout=1)
apps("a_timeout_one", fenced("while True:\n    pass"), in_outs(("1 2\n", "3\n")), execution_timeout=1)
apps("a_main_appended", fenced("def main():\n    a, b = map(int, input().split())\n    print(a + b)"), SUMS)
apps(
    "a_main_guard",
    fenced("def main():\n    print(sum(map(int, input().split())))\n\nif __name__ == '__main__':\n    main()"),
    SUMS,
)
apps(
    "a_import_in_function",
    fenced("def f(x):\n    import math\n    return math.isqrt(x)\nprint(f(int(input().split()[0]) ** 2 + 2))"),
    SUMS,
)
apps("a_indented", fenced("    a, b = map(int, input().split())\n    print(a + b)"), SUMS)
apps("a_floats_close", fenced("print(1 / 3)"), in_outs(("\n", "0.3333333\n")))
apps("a_floats_far", fenced("print(0.3)"), in_outs(("\n", "0.3333333\n")))
apps("a_lines_stripped", fenced("print('  3  ')\nprint()"), in_outs(("1 2\n", "3\n")))
apps("a_exit_keeps_output", fenced("print(3)\nexit()\nprint(4)"), in_outs(("1 2\n", "3\n")))
apps("a_stdin_readline", fenced("a, b = map(int, stdin.readline().split())\nprint(a + b)"), SUMS)
apps("a_sys_stdin_lines", fenced("import sys\nfor line in sys.stdin:\n    print(sum(map(int, line.split())))"), SUMS)
apps("a_fn_name_ignored", fenced(SUM), in_outs(("1 2\n", "3\n"), fn_name="add"))
apps("a_dict_truth", fenced(SUM), {"inputs": ["1 2\n"], "outputs": ["3\n"]})
apps("a_list_input", fenced(SUM), json.dumps({"inputs": [["1 2"]], "outputs": ["3\n"]}))
apps("a_list_input_later", fenced(SUM), json.dumps({"inputs": ["1 2\n", ["1 2"]], "outputs": ["3\n", "3\n"]}))
apps("a_no_tests", fenced(SUM), in_outs())
apps("a_zero_timeout", fenced(SUM), SUMS, execution_timeout=0)
apps("a_bad_json", fenced(SUM), "{not json")
apps("a_bad_structure", fenced(SUM), json.dumps({"inputs": ["1"]}))
apps("a_bad_type", fenced(SUM), 42)
apps("a_no_messages", "", SUMS, messages=[])
apps("a_empty_block", "```python\n\n```", SUMS)
apps("a_think_only", "<think>I will write it later</think>", SUMS)
apps("a_untagged_block", "```\n" + SUM + "\n```", SUMS)
apps("a_py_tag_kept", "```py\n" + SUM + "\n```", SUMS)
apps("a_from_def", "Use this: def main():\n    print(sum(map(int, input().split())))\n", SUMS)
apps("a_plain_text", SUM, SUMS)
