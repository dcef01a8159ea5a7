"""Cases for the differential test: every quirk of the reference we know of, and ordinary code.

Each case names the behaviour it pins. ``layer`` is the reference function called:
``check_correctness`` (timeout in seconds) or ``compute_score`` (its own 5 s / 10 s limits).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

Case = dict[str, Any]
CASES: list[Case] = []

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
ADD = "def add(a, b):\n    return a + b\n"


def _code(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def raw(name: str, in_outs: Any, code: Any, timeout: Any = 2) -> None:
    CASES.append({"name": name, "layer": "check_correctness", "in_outs": in_outs, "code": code, "timeout": timeout})


def stdin(name: str, code: str, inputs: list[Any], outputs: list[Any], timeout: Any = 2) -> None:
    raw(name, {"inputs": inputs, "outputs": outputs}, _code(code), timeout)


def call(name: str, code: str, fn_name: Any, inputs: list[Any], outputs: list[Any], timeout: Any = 2) -> None:
    raw(name, {"fn_name": fn_name, "inputs": inputs, "outputs": outputs}, _code(code), timeout)


def score(name: str, completion: str, test_cases: Any, continuous: bool = True) -> None:
    CASES.append(
        {"name": name, "layer": "compute_score", "in_outs": test_cases, "code": completion, "continuous": continuous}
    )


def args(*values: Any) -> str:
    return "\n".join(json.dumps(v) for v in values)


# -- standard input: ordinary programs ---------------------------------------------------------------
stdin("s_correct", SUM, ["1 2\n", "10 20\n"], ["3\n", "30\n"])
stdin("s_wrong_on_second", SUM, ["1 2\n", "3 4\n", "5 6\n"], ["3\n", "8\n", "11\n"])
stdin("s_wrong_on_first", SUM, ["1 2\n"], ["4\n"])
stdin("s_syntax_error", "print(1 +\n", ["1\n"], ["1\n"])
stdin("s_runtime_error_first", "print(1 // 0)\n", ["\n", "\n"], ["0\n", "0\n"])
stdin("s_runtime_error_second", "n = int(input())\nprint(10 // n)\n", ["2\n", "0\n", "5\n"], ["5\n", "0\n", "2\n"])
stdin("s_many_lines", "n = int(input())\nfor i in range(n):\n    print(i)\n", ["5\n"], ["0\n1\n2\n3\n4\n"])
stdin("s_print_end_no_newline", "print('ok', end='')\n", ["\n"], ["ok\n"])
stdin("s_extra_final_newlines", "print('ok\\n\\n\\n')\n", ["\n"], ["ok\n"])
stdin("s_unicode", "print(input()[::-1])\n", ["héllo ✓\n"], ["✓ olléh\n"])
stdin("s_zero_tests", SUM, [], [])
stdin("s_large_output", "for i in range(30000):\n    print(i)\n", ["\n"], ["\n".join(map(str, range(30000))) + "\n"])
stdin(
    "s_recursion_depth_100k",
    """
    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)
    print(depth(100000))
""",
    ["\n"],
    ["100000\n"],
)
stdin("s_memory_error", "x = [0] * (10 ** 12)\nprint(len(x))\n", ["\n"], ["0\n"])
stdin("s_list_of_ints", "print(*sorted(map(int, input().split())))\n", ["3 1 2\n"], ["1 2 3\n"])
stdin(
    "s_multiple_test_cases_format",
    """
    t = int(input())
    for _ in range(t):
        a, b = map(int, input().split())
        print(a * b)
""",
    ["2\n2 3\n4 5\n"],
    ["6\n20\n"],
)

# -- standard input: how input can be read -------------------------------------------------------------
stdin("s_sys_stdin_read", "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n", ["1 2 3\n"], ["6\n"])
stdin("s_sys_stdin_readline", "import sys\nprint(int(sys.stdin.readline()) * 2)\n", ["21\n"], ["42\n"])
stdin("s_sys_stdin_readlines", "import sys\nprint(len(sys.stdin.readlines()))\n", ["a\nb\nc\n"], ["3\n"])
stdin(
    "s_for_line_in_sys_stdin",
    "import sys\nfor line in sys.stdin:\n    print(line.strip().upper())\n",
    ["a\nb\n"],
    ["A\nB\n"],
)
stdin("s_input_eof", "a = input()\nb = input()\nprint(a, b)\n", ["only\n"], ["only x\n"])
stdin(
    "s_read_twice",
    "import sys\na = sys.stdin.read()\nb = sys.stdin.read()\nprint(len(a), len(b))\n",
    ["abc"],
    ["3 0\n"],
)
stdin("s_stdin_buffer_read", "import sys\nprint(sys.stdin.buffer.read().decode().strip())\n", ["x\n"], ["x\n"])
stdin("s_stdin_buffer_readline", "import sys\nprint(sys.stdin.buffer.readline().strip())\n", ["x\n"], ["b'x'\n"])
stdin(
    "s_toplevel_from_sys_import_stdin_readline",
    "from sys import stdin\nn = int(stdin.readline())\nprint(n + 1)\n",
    ["41\n"],
    ["42\n"],
)
stdin("s_bare_stdin_global", "n = int(stdin.readline())\nprint(n * 3)\n", ["5\n"], ["15\n"])
stdin(
    "s_toplevel_stdin_readline_exhausted",
    "a = stdin.readline()\nb = stdin.readline()\nc = stdin.readline()\nprint(a)\n",
    ["x\n"],
    ["x\n"],
)
stdin(
    "s_toplevel_from_sys_import_stdin_iterate",
    "from sys import stdin\nfor line in stdin:\n    print(line.strip())\n",
    ["a\nb\n"],
    ["a\nb\n"],
)
stdin(
    "s_readline_strips_newline",
    "from sys import stdin\nline = stdin.readline()\nprint(repr(line))\n",
    ["abc\n"],
    ["'abc'\n"],
)
stdin(
    "s_stdin_after_first_statement",
    "x = 1\nfrom sys import stdin\nprint(stdin.readline().strip(), x)\n",
    ["z\n"],
    ["z 1\n"],
)
stdin("s_open_fd0", "print(open(0).read().strip())\n", ["data\n"], ["data\n"])
stdin("s_open_dev_stdin", "print(open('/dev/stdin').read().strip())\n", ["data\n"], ["data\n"])
stdin("s_input_with_prompt", "name = input('name? ')\nprint(name)\n", ["bob\n"], ["bob\n"])
stdin("s_map_input_split", "print(max(map(int, input().split())))\n", ["4 9 2\n"], ["9\n"])
stdin(
    "s_input_then_read",
    "import sys\nn = int(input())\nrest = sys.stdin.read().split()\nprint(n, len(rest))\n",
    ["2\na b c\n"],
    ["2 3\n"],
)

# -- standard input: what is captured --------------------------------------------------------------------
stdin("s_stdout_global_write", "stdout.write('42\\n')\n", ["\n"], ["42\n"])
stdin("s_toplevel_from_sys_import_stdout", "from sys import stdout\nstdout.write('42\\n')\n", ["\n"], ["42\n"])
stdin("s_sys_stdout_write", "import sys\nsys.stdout.write('42\\n')\n", ["\n"], ["42\n"])
stdin("s_stderr_and_stdout", "import sys\nprint('err', file=sys.stderr)\nprint('out')\n", ["\n"], ["out\n"])
stdin("s_only_stderr", "import sys\nprint('out', file=sys.stderr)\n", ["\n"], ["out\n"])
stdin("s_os_write_fd1", "import os\nos.write(1, b'42\\n')\n", ["\n"], ["42\n"])
stdin("s_stdout_buffer_write", "import sys\nsys.stdout.buffer.write(b'42\\n')\n", ["\n"], ["42\n"])
stdin("s_stdout_close", "print('x')\nimport sys\nsys.stdout.close()\n", ["\n"], ["x\n"])
stdin("s_output_before_exception", "print('partial')\nraise ValueError('boom')\n", ["\n"], ["partial\n"])
stdin(
    "s_threading_big_stack",
    """
    import threading
    threading.stack_size(64 * 1024 * 1024)
    def work():
        print(int(input()) + 1)
    t = threading.Thread(target=work)
    t.start()
    t.join()
""",
    ["1\n"],
    ["2\n"],
)

# -- standard input: exits -------------------------------------------------------------------------------
stdin("s_sys_exit_after_print", "import sys\nprint('done')\nsys.exit(0)\n", ["\n"], ["done\n"])
stdin("s_sys_exit_before_print", "import sys\nsys.exit(0)\nprint('done')\n", ["\n"], ["done\n"])
stdin("s_sys_exit_nonzero_after_print", "import sys\nprint('done')\nsys.exit(3)\n", ["\n"], ["done\n"])
stdin("s_raise_system_exit", "print('x')\nraise SystemExit\n", ["\n"], ["x\n"])
stdin("s_exit_builtin_after_print", "print('done')\nexit()\n", ["\n"], ["done\n"])
stdin("s_quit_builtin_after_print", "print('done')\nquit()\n", ["\n"], ["done\n"])
stdin("s_from_sys_import_exit", "from sys import exit\nprint('done')\nexit(0)\n", ["\n"], ["done\n"])
stdin("s_keyboard_interrupt", "raise KeyboardInterrupt\n", ["\n", "\n"], ["\n", "\n"])
stdin("s_os_exit", "import os\nprint('x')\nos._exit(0)\n", ["\n"], ["x\n"])
stdin(
    "s_exit_in_second_test",
    "import sys\nn = int(input())\nprint(n)\nif n == 2:\n    sys.exit(0)\n",
    ["1\n", "2\n", "3\n"],
    ["1\n", "2\n", "3\n"],
)

# -- standard input: comparison cascade --------------------------------------------------------------
echo = "import sys\nsys.stdout.write(sys.stdin.read())\n"
stdin("s_cr_in_output", "print('a\\rb')\n", ["\n"], ["a\nb\n"])
stdin("s_formfeed_in_output", "print('a\\x0cb')\n", ["\n"], ["a\nb\n"])
stdin("s_unicode_line_separator_output", "print('a\\u2028b')\n", ["\n"], ["a\nb\n"])
stdin("s_blank_lines_in_expected", echo, ["a\nb\n"], ["a\n\n\nb\n"])
stdin("s_crlf_expected", echo, ["a\nb\n"], ["a\r\nb\r\n"])
stdin("s_line_trailing_spaces_expected", echo, ["a\nb\n"], ["a   \nb  \n"])
stdin("s_blank_lines_in_output", echo, ["a\n\n\nb\n"], ["a\nb\n"])
stdin("s_whitespace_line_in_output", echo, ["a\n   \nb\n"], ["a\nb\n"])
stdin("s_leading_spaces_output", echo, ["   a\n  b\n"], ["a\nb\n"])
stdin("s_leading_spaces_expected", echo, ["a\nb\n"], ["  a\n  b\n"])
stdin("s_inner_double_space", echo, ["1  2\n"], ["1 2\n"])
stdin("s_tab_separator", echo, ["1\t2\n"], ["1 2\n"])
stdin("s_token_order_set_compare_dead", echo, ["2 1\n"], ["1 2\n"])
stdin("s_case_yes", echo, ["YES\n"], ["yes\n"])
stdin("s_missing_line", echo, ["1\n2\n"], ["1\n2\n3\n"])
stdin("s_extra_line", echo, ["1\n2\n3\n"], ["1\n2\n"])
stdin("s_float_one_per_line_multi", echo, ["0.333333\n0.666667\n"], ["0.3333333333\n0.6666666667\n"])
stdin("s_float_two_per_line", echo, ["0.333333 0.5\n"], ["0.3333333333 0.5\n"])
stdin("s_float_far_off", echo, ["0.34\n"], ["0.3333333\n"])
stdin("s_bigint_off_by_one_positive", echo, ["100000001\n"], ["100000000\n"])
stdin("s_bigint_off_by_one_negative", echo, ["-100000001\n"], ["-100000000\n"])
stdin("s_bigint_off_with_float_line", echo, ["100000001\n0.5\n"], ["100000000\n0.5\n"])
stdin("s_leading_zero_int", echo, ["007\n"], ["7\n"])
stdin("s_leading_zero_vs_float", echo, ["007\n"], ["7.0\n"])
stdin("s_plus_sign", echo, ["+5\n"], ["5\n"])
stdin("s_underscore_number", echo, ["1_000\n"], ["1000\n"])
stdin("s_scientific_notation", echo, ["1e3\n"], ["1000\n"])
stdin("s_inf_spelling", echo, ["inf\n"], ["Infinity\n"])
stdin("s_nan_other_spelling", echo, ["nan\n"], ["NaN\n"])
stdin("s_hex_number", echo, ["0x10\n"], ["16\n"])
stdin("s_float_vs_int_repr", echo, ["2.0\n"], ["2\n"])
stdin("s_int_vs_float_repr", echo, ["2\n"], ["2.000\n"])
stdin("s_absolute_tolerance", echo, ["1e-8\n"], ["0\n"])
stdin("s_relative_tolerance_edge", echo, ["1000.02\n"], ["1000\n"])
stdin("s_negative_float_close", echo, ["-0.5000001\n"], ["-0.5\n"])
stdin("s_empty_output_empty_expected", "pass\n", ["\n"], ["\n"])
stdin("s_empty_output_nonempty_expected", "pass\n", ["\n"], ["x\n"])
stdin("s_only_whitespace_expected", "print('   ')\n", ["\n"], ["\n"])
stdin("s_word_and_number_lines", echo, ["abc\n1.0000001\n"], ["abc\n1.0\n"])

# -- standard input: turning a script into a function -------------------------------------------------
stdin(
    "s_main_guard_last",
    "def main():\n    print(int(input()) * 2)\n\nif __name__ == '__main__':\n    main()\n",
    ["4\n"],
    ["8\n"],
)
stdin(
    "s_main_guard_double_quotes",
    'def main():\n    print("hi")\n\nif __name__ == "__main__":\n    main()\n',
    ["\n"],
    ["hi\n"],
)
stdin(
    "s_main_guard_with_else",
    "if __name__ == '__main__':\n    print('main')\nelse:\n    print('imported')\n",
    ["\n"],
    ["main\n"],
)
stdin(
    "s_main_guard_not_last",
    "if __name__ == '__main__':\n    print('main')\nprint('after')\n",
    ["\n"],
    ["main\nafter\n"],
)
stdin("s_main_guard_reversed", "if '__main__' == __name__:\n    print('main')\n", ["\n"], ["main\n"])
stdin(
    "s_main_guard_global_counter",
    """
    count = 0
    def bump():
        global count
        count += 1
    if __name__ == '__main__':
        bump()
        print(count)
""",
    ["\n"],
    ["1\n"],
)
stdin(
    "s_global_statement",
    "total = 0\ndef add(x):\n    global total\n    total += x\nadd(5)\nprint(total)\n",
    ["\n"],
    ["5\n"],
)
stdin(
    "s_closure_read_toplevel", "base = 10\ndef f(x):\n    return base + x\nprint(f(int(input())))\n", ["5\n"], ["15\n"]
)
stdin("s_import_star_after_code", "x = 1\nfrom math import *\nprint(floor(2.5))\n", ["\n"], ["2\n"])
stdin("s_import_star_first", "from math import *\nprint(floor(2.5))\n", ["\n"], ["2\n"])
stdin(
    "s_multiline_import_first",
    "from math import (\n    floor,\n    ceil,\n)\nprint(floor(2.5), ceil(2.5))\n",
    ["\n"],
    ["2 3\n"],
)
stdin(
    "s_multiline_import_after_code",
    "x = 0\nfrom math import (\n    floor,\n)\nprint(floor(2.5) + x)\n",
    ["\n"],
    ["2\n"],
)
stdin(
    "s_multiline_import_first_with_guard",
    "from math import (\n    floor,\n)\nif __name__ == '__main__':\n    print(floor(2.5))\n",
    ["\n"],
    ["2\n"],
)
stdin("s_triple_quoted_string", 'text = """a\nb"""\nprint(text)\n', ["\n"], ["a\nb\n"])
stdin("s_only_imports_no_newline", "import math", ["\n"], ["\n"])
stdin("s_empty_code", "", ["\n"], ["\n"])
stdin("s_tabs_indentation", "for i in range(2):\n\tprint(i)\n", ["\n"], ["0\n1\n"])
stdin("s_crlf_source", "x = input()\r\nprint(x)\r\n", ["a\n"], ["a\n"])
stdin("s_future_import", "from __future__ import annotations\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_indented_import_line", "if True:\n    import math\n    print(math.floor(1.5))\n", ["\n"], ["1\n"])
stdin("s_comment_first_line", "# a comment\nimport math\nprint(math.pi > 3)\n", ["\n"], ["True\n"])
stdin(
    "s_class_definition",
    "class P:\n    def __init__(self, v):\n        self.v = v\nprint(P(int(input())).v)\n",
    ["7\n"],
    ["7\n"],
)
stdin(
    "s_function_recursion_toplevel",
    "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\nprint(fib(int(input())))\n",
    ["15\n"],
    ["610\n"],
)
stdin("s_dunder_name_value", "print(__name__)\n", ["\n"], ["tmp_sol\n"])

# -- standard input: the prelude -------------------------------------------------------------------------
stdin("s_prelude_copy_is_module", "print(copy([1, 2]))\n", ["\n"], ["[1, 2]\n"])
stdin(
    "s_prelude_names_without_import",
    "print(gcd(12, 18), inf > 1, defaultdict(int)['x'], bisect_left([1, 3], 2))\n",
    ["\n"],
    ["6 True 0 1\n"],
)
stdin("s_prelude_time_is_class", "print(time)\n", ["\n"], ["<class 'datetime.time'>\n"])
stdin("s_prelude_counter_from_typing", "print(Counter('aab')['a'])\n", ["\n"], ["2\n"])
stdin("s_prelude_random_is_module", "print(random(1))\n", ["\n"], ["1\n"])
# A program gets the prelude's lines for the names it names; these reach the rest other ways.
stdin("s_prelude_builtins_shadow_math", "print(pow(2, 3), sqrt(4))\n", ["\n"], ["8 2.0\n"])
stdin(
    "s_prelude_names_through_globals",
    "print([k for k in ('Counter', 'mean', 'deque', 'List', 'loads') if k in globals()])\n",
    ["\n"],
    ["['Counter', 'mean', 'deque', 'List', 'loads']\n"],
)
# Where a program cannot reach the builtin open, the patches go in without unittest.mock.
stdin("s_open_mocked_in_a_test", "print(open('x').read().split()[1])\n", ["1 2\n"], ["2\n"])
stdin("s_module_imported_in_a_test", "x = 1\nimport fileinput\nprint(sum(map(int, fileinput.input())))\n", ["5"], ["5"])
stdin(
    "s_stdin_patches_undone_between_tests",
    "import sys\nprint(sys.stdin.readline().strip(), hasattr(sys.stdin, 'getvalue'), input())\n",
    ["1\n3\n", "2\n4\n"],
    ["1 True 3\n", "2 True 4\n"],
)
stdin("s_prelude_modules_loaded", "import sys\nprint('statistics' in sys.modules)\n", ["\n"], ["True\n"])
call("c_prelude_name_through_eval", "def f(x):\n    return eval(x)\n", "f", ['"median([3, 1, 2])"'], ["2"])
stdin(
    "s_prelude_string_annotations",
    "import typing\ndef g(x: 'Deque[int]') -> 'NormalDist': pass\nprint(len(typing.get_type_hints(g)))\n",
    ["\n"],
    ["2\n"],
)
stdin(
    "s_prelude_dataclass_string_classvar",
    "import dataclasses\n@dataclasses.dataclass\nclass A:\n    x: 'ClassVar[int]' = 1\n"
    "print(len(dataclasses.fields(A)))\n",
    ["\n"],
    ["0\n"],
)

# -- standard input: the reliability guard -------------------------------------------------------------
stdin("s_os_getcwd", "import os\nprint(os.getcwd())\n", ["\n"], ["/\n"])
stdin("s_os_system", "import os\nos.system('true')\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_os_remove", "import os\nopen('f', 'w').close()\nos.remove('f')\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_shutil_rmtree", "import shutil\nshutil.rmtree('nothing')\n", ["\n"], ["\n"])
stdin("s_help_none", "help(print)\n", ["\n"], ["\n"])
stdin("s_os_environ_set", "import os\nos.environ['X'] = '1'\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_os_environ_read", "import os\nprint(os.environ.get('OMP_NUM_THREADS'))\n", ["\n"], ["1\n"])
stdin("s_import_resource", "import resource\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_import_subprocess_top", "import subprocess\nprint(1)\n", ["\n"], ["1\n"])
stdin("s_import_ctypes_in_body", "x = 1\nimport ctypes\nprint(x)\n", ["\n"], ["1\n"])
stdin("s_import_psutil_in_body", "print(0)\nimport psutil\n", ["\n"], ["0\n"])
# What the reference's process loaded before its guard, a program may import after it.
call("c_imports_asyncio", "import asyncio\ndef f(x):\n    return x\n", "f", ["1"], ["1"])
call("c_imports_unittest_mock", "from unittest import mock\ndef f(x):\n    return x\n", "f", ["1"], ["1"])
call("c_imports_numpy_in_its_body", "def f(x):\n    import numpy\n    return int(numpy.int64(x))\n", "f", ["2"], ["2"])
stdin(
    "s_program_drops_the_patching_module",
    "import sys\nsys.modules['unittest.mock'] = None\nprint(input())\n",
    ["1\n", "2\n"],
    ["1\n", "2\n"],
)
stdin(
    "s_file_write_and_read_back",
    "open('t.txt', 'w').write('hello')\nprint(open('t.txt').read())\n",
    ["\n"],
    ["hello\n"],
)
stdin("s_os_fork_none", "import os\nos.fork()\n", ["\n"], ["\n"])
stdin("s_os_kill_none", "import os\nos.kill(0, 0)\n", ["\n"], ["\n"])

# -- standard input: state shared between tests --------------------------------------------------------
stdin(
    "s_sys_setrecursionlimit_persists",
    """
    import sys
    print(sys.getrecursionlimit())
    sys.setrecursionlimit(5000)
""",
    ["\n", "\n"],
    ["600000\n", "600000\n"],
)
stdin(
    "s_global_state_via_builtins",
    """
    import builtins
    builtins.seen = getattr(builtins, "seen", 0) + 1
    print(builtins.seen)
""",
    ["\n", "\n"],
    ["1\n", "1\n"],
)
stdin(
    "s_module_cache_between_tests",
    """
    import functools
    @functools.lru_cache(None)
    def f(x):
        print('computing')
        return x
    f(1)
""",
    ["\n", "\n"],
    ["computing\n", "computing\n"],
)

# -- standard input: timeouts ---------------------------------------------------------------------------
stdin("s_tle_loop", "while True:\n    pass\n", ["\n", "\n"], ["\n", "\n"], timeout=1)
stdin(
    "s_tle_second_test",
    "import time\nn = int(input())\nif n == 2:\n    time.sleep(5)\nprint(n)\n",
    ["1\n", "2\n"],
    ["1\n", "2\n"],
    timeout=1,
)
stdin(
    "s_cumulative_time_over_global",
    "import time\ntime.sleep(1.2)\nprint(1)\n",
    ["\n", "\n", "\n", "\n"],
    ["1\n", "1\n", "1\n", "1\n"],
    timeout=3,
)
stdin("s_slightly_over_timeout", "import time\ntime.sleep(1.4)\nprint(1)\n", ["\n"], ["1\n"], timeout=1)
stdin("s_alarm_disarmed", "import signal, time\nsignal.alarm(0)\ntime.sleep(4)\nprint(1)\n", ["\n"], ["1\n"], timeout=1)
stdin("s_fast_under_timeout", "import time\ntime.sleep(0.2)\nprint(1)\n", ["\n", "\n"], ["1\n", "1\n"], timeout=1)
stdin(
    "s_timeout_after_wrong_answer",
    "import time\nn = int(input())\nif n == 2:\n    time.sleep(5)\nprint(n + 1)\n",
    ["1\n", "2\n"],
    ["1\n", "2\n"],
    timeout=1,
)

# -- standard input: malformed test data ----------------------------------------------------------------
stdin("s_inputs_outputs_as_lists", echo, [["a", "b"]], [["a", "b"]])
stdin("s_output_as_list_only", echo, ["a\n"], [["a"]])
stdin("s_input_is_int", echo, [5], ["5\n"])
stdin("s_fewer_outputs", echo, ["a\n", "b\n"], ["a\n"])
stdin("s_fewer_outputs_after_failure", echo, ["a\n", "b\n"], ["x\n"])
stdin("s_bad_data_after_syntax_error", "print(\n", [["a"]], [["a"]])
raw("s_missing_inputs_key", {"outputs": ["1\n"]}, "print(1)\n")
raw("s_missing_outputs_key", {"inputs": ["1\n"]}, "print(1)\n")
raw("s_empty_in_outs", {}, "print(1)\n")
raw("s_fn_name_none", {"fn_name": None, "inputs": ["1\n"], "outputs": ["1\n"]}, "print(input())\n")
raw("s_float_timeout", {"inputs": ["1\n"], "outputs": ["1\n"]}, "print(input())\n", timeout=1.5)
raw("s_code_none", {"inputs": ["1\n"], "outputs": ["1\n"]}, None)

# -- call-based: ordinary functions -------------------------------------------------------------------
call("c_correct", ADD, "add", [args(1, 2), args(5, 5)], ["3", "10"])
call("c_wrong_on_second", ADD, "add", [args(1, 2), args(2, 2), args(3, 3)], ["3", "5", "6"])
call("c_exception_in_function", "def f(x):\n    return 1 // x\n", "f", [args(1), args(0)], ["1", "0"])
call("c_recursion_error", "def f(x):\n    return f(x + 1)\n", "f", [args(0)], ["0"])
call("c_returns_none", "def f(_):\n    return None\n", "f", ["null"], ["null"])
call("c_returns_string", "def f(s):\n    return s.upper()\n", "f", [args("ab")], ['"AB"'])
call("c_returns_list", "def f(n):\n    return list(range(n))\n", "f", [args(3)], ["[0, 1, 2]"])
call("c_returns_nested", "def f(_):\n    return {'a': [1, {'b': 2}]}\n", "f", ["null"], ['{"a": [1, {"b": 2}]}'])
call("c_big_int", "def f(n):\n    return 2 ** n\n", "f", [args(200)], [str(2**200)])
call("c_unicode_string", "def f(s):\n    return s * 2\n", "f", [args("✓")], ['"✓✓"'])
call("c_bool_result", "def f(x):\n    return x > 0\n", "f", [args(1), args(-1)], ["true", "false"])
call("c_wrong_type_str_vs_int", "def f(_):\n    return '5'\n", "f", ["null"], ["5"])
call("c_list_argument", "def f(xs):\n    return sum(xs)\n", "f", [args([1, 2, 3])], ["6"])
call("c_string_with_newline_arg", "def f(s):\n    return s.count('\\n')\n", "f", [args("a\nb")], ["1"])

# -- call-based: comparison quirks ---------------------------------------------------------------------
call("c_returns_tuple", "def f(_):\n    return (1, 2)\n", "f", ["null"], ["[1, 2]"])
call("c_returns_list_of_tuples", "def f(_):\n    return [(1, 2), (3, 4)]\n", "f", ["null"], ["[[1, 2], [3, 4]]"])
call(
    "c_returns_list_of_tuples_wrapped",
    "def f(_):\n    return [(1, 2), (3, 4)]\n",
    "f",
    ["null"],
    ["[[[1, 2], [3, 4]]]"],
)
call("c_nested_tuple_in_list", "def f(_):\n    return [1, (2, 3)]\n", "f", ["null"], ["[1, [2, 3]]"])
call("c_returns_unwrapped_singleton", "def f(_):\n    return 5\n", "f", ["null"], ["[5]"])
call("c_returns_first_element", "def f(_):\n    return 5\n", "f", ["null"], ["[5, 6, 7]"])
call("c_returns_second_element", "def f(_):\n    return 6\n", "f", ["null"], ["[5, 6, 7]"])
call("c_returns_one_for_true", "def f(_):\n    return 1\n", "f", ["null"], ["true"])
call("c_returns_true_for_one", "def f(_):\n    return True\n", "f", ["null"], ["1"])
call("c_float_equals_int", "def f(_):\n    return 2.0\n", "f", ["null"], ["2"])
call("c_float_exact", "def f(_):\n    return 0.1 + 0.2\n", "f", ["null"], ["0.3"])
call("c_nan_expected", "def f(_):\n    return float('nan')\n", "f", ["null"], ["NaN"])
call("c_infinity", "def f(_):\n    return float('inf')\n", "f", ["null"], ["Infinity"])
call("c_exp_empty_list", "def f(_):\n    return []\n", "f", ["null"], ["[]"])
call("c_exp_empty_list_out_none", "def f(_):\n    return None\n", "f", ["null"], ["[]"])
call("c_exp_list_of_list", "def f(_):\n    return [[1]]\n", "f", ["null"], ["[[1]]"])
call("c_exp_string_first_char", "def f(_):\n    return 'a'\n", "f", ["null"], ['"abc"'])
call("c_dict_int_keys", "def f(_):\n    return {1: 'a'}\n", "f", ["null"], ['{"1": "a"}'])
call("c_dict_str_keys_int_like", "def f(_):\n    return {'1': 'a'}\n", "f", ["null"], ['{"1": "a"}'])
call("c_dict_word_keys", "def f(_):\n    return {'x': 1}\n", "f", ["null"], ['{"x": 1}'])
call(
    "c_dict_list_expected_truncated",
    "def f(_):\n    return [{1: 2}, {3: 4}]\n",
    "f",
    ["null"],
    ['[{"1": 2}, {"3": 4}]'],
)
call("c_dict_list_expected_first_only", "def f(_):\n    return {1: 2}\n", "f", ["null"], ['[{"1": 2}, {"3": 4}]'])
call("c_dict_mixed_keys", "def f(_):\n    return {'a': 1, 2: 3}\n", "f", ["null"], ['{"a": 1, "2": 3}'])

# -- call-based: values json.dumps refuses, and numpy --------------------------------------------------
call("c_returns_set", "def f(_):\n    return {1, 2}\n", "f", ["null"], ["[1, 2]"])
call("c_returns_frozenset", "def f(_):\n    return frozenset()\n", "f", ["null"], ["[]"])
call("c_returns_bytes", "def f(_):\n    return b'x'\n", "f", ["null"], ['"x"'])
call("c_returns_generator", "def f(_):\n    return (i for i in range(2))\n", "f", ["null"], ["[0, 1]"])
call("c_returns_object", "class P:\n    pass\ndef f(_):\n    return P()\n", "f", ["null"], ["{}"])
call("c_returns_tuple_key_dict", "def f(_):\n    return {(1, 2): 3}\n", "f", ["null"], ["{}"])
call("c_returns_complex", "def f(_):\n    return 1j\n", "f", ["null"], ["0"])
call("c_returns_numpy_int", "import numpy as np\ndef f(_):\n    return np.int64(3)\n", "f", ["null"], ["3"])
call("c_returns_numpy_float", "import numpy as np\ndef f(_):\n    return np.float64(1.5)\n", "f", ["null"], ["1.5"])
call(
    "c_returns_numpy_float_vs_singleton",
    "import numpy as np\ndef f(_):\n    return np.float64(1.5)\n",
    "f",
    ["null"],
    ["[1.5]"],
)
call(
    "c_returns_numpy_float_vs_pair",
    "import numpy as np\ndef f(_):\n    return np.float64(1.5)\n",
    "f",
    ["null"],
    ["[1.5, 2.5]"],
)
call("c_returns_numpy_bool", "import numpy as np\ndef f(_):\n    return np.bool_(True)\n", "f", ["null"], ["true"])
call("c_returns_numpy_array", "import numpy as np\ndef f(_):\n    return np.array([1, 2])\n", "f", ["null"], ["[1, 2]"])
call(
    "c_numpy_float_inside_list",
    "import numpy as np\ndef f(_):\n    return [np.float64(1.5)]\n",
    "f",
    ["null"],
    ["[1.5]"],
)
call(
    "c_returns_int_enum",
    "import enum\nclass E(enum.IntEnum):\n    A = 3\ndef f(_):\n    return E.A\n",
    "f",
    ["null"],
    ["3"],
)

# -- call-based: finding the function ----------------------------------------------------------------
call("c_missing_function", "def other():\n    return 1\n", "solve", ["null"], ["1"])
call("c_missing_function_prelude_add", "def other():\n    return 1\n", "add", [args(2, 3)], ["5"])
call("c_fn_name_from_prelude", "x = 1\n", "gcd", [args(12, 18)], ["6"])
# The guard's exit is None, and the prelude's star import of builtins binds it so.
call(
    "c_prelude_exit_is_none",
    "def f(x):\n    try:\n        exit(x)\n    except TypeError:\n        return 1\n",
    "f",
    [args(0)],
    ["1"],
)
call("c_class_solution", "class Solution:\n    def twice(self, x):\n        return 2 * x\n", "twice", [args(4)], ["8"])
call(
    "c_class_solution_in_comment",
    "# class Solution is not used here\ndef twice(x):\n    return 2 * x\n",
    "twice",
    [args(4)],
    ["8"],
)
call(
    "c_class_solution_module_fn",
    "class Solution:\n    pass\ndef twice(x):\n    return 2 * x\n",
    "twice",
    [args(4)],
    ["8"],
)
call(
    "c_class_solution_init_arg",
    "class Solution:\n    def __init__(self, k):\n        self.k = k\n    def twice(self, x):\n        return 2 * x\n",
    "twice",
    [args(4)],
    ["8"],
)
call(
    "c_class_solution_helper_name",
    "class SolutionHelper:\n    pass\ndef twice(x):\n    return 2 * x\n",
    "twice",
    [args(4)],
    ["8"],
)
call(
    "c_class_solution_state",
    """
    class Solution:
        def __init__(self):
            self.calls = 0
        def count(self, _):
            self.calls += 1
            return self.calls
""",
    "count",
    ["null", "null"],
    ["1", "1"],
)
call(
    "c_module_global_state",
    "calls = []\ndef count(_):\n    calls.append(1)\n    return len(calls)\n",
    "count",
    ["null", "null"],
    ["1", "1"],
)
call(
    "c_class_solution_no_typing_import",
    """
    class Solution:
        def total(self, xs: List[int]) -> int:
            return sum(xs)
""",
    "total",
    [args([1, 2])],
    ["3"],
)
call("c_fn_name_not_string", ADD, 7, [args(1, 2)], ["3"])
call("c_fn_name_empty", ADD, "", [args(1, 2)], ["3"])
call("c_method_is_attribute_not_callable", "add = 5\n", "add", [args(1, 2)], ["3"])

# -- call-based: building the module --------------------------------------------------------------------
call("c_module_level_print", "print('loading')\n" + ADD, "add", [args(1, 2)], ["3"])
call("c_module_level_input", "x = input()\n" + ADD, "add", [args(1, 2)], ["3"])
call("c_module_level_loop", "while True:\n    pass\n" + ADD, "add", [args(1, 2)], ["3"], timeout=1)
call("c_module_level_exception", "raise ValueError('at import')\n", "add", [args(1, 2)], ["3"])
call("c_module_level_sys_exit", "import sys\nsys.exit(0)\n", "add", [args(1, 2)], ["3"])
call("c_main_guard_not_run", ADD + "if __name__ == '__main__':\n    raise SystemExit(1)\n", "add", [args(1, 2)], ["3"])
call("c_module_name_value", "def f(_):\n    return __name__ == 'tmp_sol'\n", "f", ["null"], ["true"])
call("c_syntax_error", "def add(a, b)\n    return a + b\n", "add", [args(1, 2)], ["3"])
call("c_future_annotations", "from __future__ import annotations\n" + ADD, "add", [args(1, 2)], ["3"])
call("c_copy_is_module", "def f(x):\n    return copy(x)\n", "f", [args([1])], ["[1]"])
call("c_bisect_is_module", "def f(xs, x):\n    return bisect(xs, x)\n", "f", [args([1, 3], 2)], ["1"])
call("c_os_getcwd", "import os\ndef f(_):\n    return os.getcwd()\n", "f", ["null"], ['"/"'])
call("c_import_subprocess_top", "import subprocess\n" + ADD, "add", [args(1, 2)], ["3"])
call("c_import_ctypes_in_function", "def f(_):\n    import ctypes\n    return 1\n", "f", ["null"], ["1"])

# -- call-based: exits and time ---------------------------------------------------------------------------
call("c_sys_exit_in_function", "import sys\ndef f(_):\n    sys.exit(0)\n", "f", ["null", "null"], ["1", "1"])
call("c_keyboard_interrupt", "def f(_):\n    raise KeyboardInterrupt\n", "f", ["null"], ["1"])
call("c_os_exit_in_function", "import os\ndef f(_):\n    os._exit(0)\n", "f", ["null"], ["1"])
call(
    "c_tle_second_test",
    "import time\ndef f(n):\n    if n == 2:\n        time.sleep(5)\n    return n\n",
    "f",
    [args(1), args(2)],
    ["1", "2"],
    timeout=1,
)
call(
    "c_cumulative_time_over_global",
    "import time\ndef f(_):\n    time.sleep(1.2)\n    return 1\n",
    "f",
    ["null"] * 4,
    ["1"] * 4,
    timeout=3,
)
call(
    "c_slightly_over_timeout",
    "import time\ndef f(_):\n    time.sleep(1.4)\n    return 1\n",
    "f",
    ["null"],
    ["1"],
    timeout=1,
)
call(
    "c_wrong_answer_then_slow",
    "import time\ndef f(n):\n    if n == 2:\n        time.sleep(5)\n    return n + 1\n",
    "f",
    [args(1), args(2)],
    ["1", "2"],
    timeout=1,
)

# -- call-based: argument and expected-value parsing ----------------------------------------------------
call("c_input_dict_int_keys", "def f(d):\n    return sorted(d)\n", "f", [args({"2": "a", "1": "b"})], ["[1, 2]"])
call("c_input_dict_plus_arg", "def f(d, k):\n    return d[k]\n", "f", [args({"1": "a"}, 1)], ['"a"'])
call("c_input_dict_word_keys_plus_arg", "def f(d, k):\n    return d[k]\n", "f", [args({"x": "a"}, "x")], ['"a"'])
call("c_input_is_list", ADD, "add", [[1, 2]], ["3"])
call("c_input_trailing_newline", ADD, "add", [args(1, 2) + "\n"], ["3"])
call("c_zero_arg_function", "def f():\n    return 1\n", "f", [""], ["1"])
call("c_input_multiline_json", "def f(xs):\n    return len(xs)\n", "f", ["[\n1,\n2\n]"], ["2"])
call("c_output_not_json", ADD, "add", [args(1, 2)], ["three"])
call("c_input_not_json", ADD, "add", ["one\ntwo"], ["3"])
call("c_output_is_number_not_string", ADD, "add", [args(1, 2)], [3])
call("c_bad_second_input", ADD, "add", [args(1, 2), "oops"], ["3", "3"])
call("c_bad_second_input_after_wrong", ADD, "add", [args(1, 2), "oops"], ["4", "3"])
call("c_fewer_outputs", ADD, "add", [args(1, 2), args(2, 2)], ["3"])

# -- the reward: compute_score ------------------------------------------------------------------------------
io_sum = {"inputs": ["1 2\n", "2 2\n", "3 3\n"], "outputs": ["3\n", "4\n", "6\n"]}
io_add = {"fn_name": "add", "inputs": [args(1, 2), args(2, 2)], "outputs": ["3", "4"]}
score("score_all_pass", SUM, io_sum)
score("score_all_pass_not_continuous", SUM, io_sum, continuous=False)
score("score_fence", "Here you go:\n```python\n" + SUM + "```\nDone.", io_sum)
score("score_two_fences_takes_last", "```python\nprint(0)\n```\n```python\n" + SUM + "```", io_sum)
score("score_test_cases_as_json_string", SUM, json.dumps(io_sum))
score("score_partial_continuous", "a, b = map(int, input().split())\nprint(a + b if a < 3 else 0)\n", io_sum)
score("score_failure_not_continuous", "print(0)\n", io_sum, continuous=False)
score("score_call_based_pass", ADD, io_add)
score("score_call_based_fail_is_zero", "def add(a, b):\n    return a + b if a < 2 else 0\n", io_add)
score("score_zero_tests", SUM, {"inputs": [], "outputs": []})
score("score_bad_json_string", SUM, "{not json")
score("score_syntax_error", "print(\n", io_sum)
score(
    "score_eleven_tests_first_ten_pass",
    "n = int(input())\nprint(n if n < 10 else -1)\n",
    {"inputs": [f"{i}\n" for i in range(11)], "outputs": [f"{i}\n" for i in range(11)]},
)
score("score_missing_outputs", SUM, {"inputs": ["1 2\n"]})
score(
    "score_exit_in_one_test",
    "import sys\nn = int(input())\nif n == 2:\n    sys.exit(0)\nprint(n)\n",
    {"inputs": ["1\n", "2\n"], "outputs": ["1\n", "2\n"]},
)
score("score_prints_extra", "print(1)\nprint('debug')\n", {"inputs": ["\n"], "outputs": ["1\n"]})

# -- deliberate deviations (see DEVIATIONS in the test and docs/prime-compat.md) ---------------------
call(
    "c_float_subclass_eq_forgery",
    """
    class Anything(float):
        def __eq__(self, other):
            return True
    def f(_):
        return Anything(0.0)
""",
    "f",
    ["null"],
    ["42"],
)
call(
    "c_list_subclass_eq_forgery",
    """
    class Anything(list):
        def __eq__(self, other):
            return True
    def f(_):
        return Anything()
""",
    "f",
    ["null"],
    ["[1, 2, 3]"],
)
call(
    "c_patched_json_dumps",
    """
    import json
    json.dumps = lambda *args, **kwargs: "[]"
    def f(_):
        return {1, 2}
""",
    "f",
    ["null"],
    ["[1, 2]"],
)
stdin(
    "s_memory_beyond_the_sandbox",
    "block = b'x' * (1500 * 2**20)\nprint(len(block) > 0)\n",
    ["\n"],
    ["True\n"],
    timeout=10,
)
stdin(
    "s_network_socket",
    "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)\nprint('ok')\n",
    ["\n"],
    ["ok\n"],
)
stdin(
    "s_write_outside_the_scratch_space",
    "open('/var/tmp/airlock-probe', 'w').write('x')\nprint('ok')\n",
    ["\n"],
    ["ok\n"],
)
stdin(
    "s_many_threads",
    """
    import threading, time
    threads = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(300)]
    for t in threads:
        t.start()
    print('ok')
""",
    ["\n"],
    ["ok\n"],
)
stdin("s_output_beyond_the_cap", "print('x' * 2_000_000)\n", ["\n"], ["x" * 2_000_000 + "\n"])

# -- classes, dataclasses, typing, enum, functools: the module the program runs in ----------------------
DATACLASS = """
    from dataclasses import dataclass, field
    @dataclass(order=True)
    class Point:
        x: int
        y: int = 0
        tags: list = field(default_factory=list)
"""
stdin(
    "s_dataclass",
    DATACLASS + "    a, b = map(int, input().split())\n    print(sorted([Point(a, b), Point(b, a)])[0])\n",
    ["2 1\n"],
    ["Point(x=1, y=2, tags=[])\n"],
)
call(
    "c_dataclass",
    DATACLASS + "    def closest(a, b):\n        return min(Point(a, b), Point(b, a)).x\n",
    "closest",
    [args(3, 1)],
    ["1"],
)
call(
    "c_frozen_dataclass_in_a_set",
    """
    from dataclasses import dataclass
    @dataclass(frozen=True)
    class Edge:
        u: int
        v: int
    def distinct(pairs):
        return len({Edge(min(p), max(p)) for p in pairs})
""",
    "distinct",
    [args([[1, 2], [2, 1], [3, 4]])],
    ["2"],
)
stdin(
    "s_enum_and_typing",
    """
    from enum import Enum, auto
    from typing import List, NamedTuple, Optional
    class Colour(Enum):
        RED = auto()
        BLUE = auto()
    class Pair(NamedTuple):
        name: str
        value: Optional[int]
    def parse(line: str) -> List[Pair]:
        return [Pair(word, len(word)) for word in line.split()]
    print(Colour.BLUE.value, parse(input())[0])
""",
    ["ab cde\n"],
    ["2 Pair(name='ab', value=2)\n"],
)
call(
    "c_functools_decorators",
    """
    from functools import lru_cache, cache, wraps, total_ordering, cached_property
    def logged(f):
        @wraps(f)
        def inner(*a):
            return f(*a)
        return inner
    @total_ordering
    class Money:
        def __init__(self, cents):
            self.cents = cents
        def __eq__(self, other):
            return self.cents == other.cents
        def __lt__(self, other):
            return self.cents < other.cents
        @cached_property
        def euros(self):
            return self.cents // 100
    class Solution:
        @logged
        def fib(self, n):
            @lru_cache(maxsize=None)
            def go(k):
                return k if k < 2 else go(k - 1) + go(k - 2)
            return go(n) + max(Money(250), Money(120)).euros
""",
    "fib",
    [args(30)],
    ["832042"],
)
call(
    "c_class_with_classmethod_and_slots",
    """
    class Counter:
        __slots__ = ("n",)
        def __init__(self):
            self.n = 0
        @classmethod
        def starting_at(cls, n):
            c = cls()
            c.n = n
            return c
        @staticmethod
        def step():
            return 2
    def count(start, times):
        c = Counter.starting_at(start)
        for _ in range(times):
            c.n += Counter.step()
        return c.n
""",
    "count",
    [args(1, 3)],
    ["7"],
)
stdin(
    "s_generic_class_and_protocol",
    """
    from typing import Generic, TypeVar, Protocol
    T = TypeVar("T")
    class Stack(Generic[T]):
        def __init__(self) -> None:
            self.items: list[T] = []
        def push(self, item: T) -> None:
            self.items.append(item)
    class Sized(Protocol):
        def __len__(self) -> int: ...
    s: Stack[int] = Stack()
    for token in input().split():
        s.push(int(token))
    print(sum(s.items))
""",
    ["1 2 3\n"],
    ["6\n"],
)
