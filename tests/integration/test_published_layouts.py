"""Records in the layouts published data sets ship (written here, in each layout, not copied
from the data sets), a right and a wrong solution each, through ``airlock score``: each is read by
its own fields and judged as that data set's own harness judges."""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

NODE_SETUP = """class Node:
    def __init__(self, data):
        self.data = data
        self.left = None
        self.right = None
root = Node(1)
root.left = Node(2)
root.right = Node(3)
root.left.left = Node(4)
"""
PAIR = """class Pair(object):
    def __init__(self, a, b):
        self.a = a
        self.b = b
def max_chain_length(arr, n):
    arr = sorted(arr, key=lambda p: p.b)
    count, end = 0, float("-inf")
    for p in arr[:n]:
        if p.a > end:
            count, end = count + 1, p.b
    return count
"""


def mbpp(task: int, code: str, tests: list[str], setup: str = "") -> dict[str, Any]:
    return {
        "task_id": task,
        "text": "...",
        "code": code,
        "test_list": tests,
        "test_setup_code": setup,
        "challenge_test_list": [],
    }


MBPP = [
    mbpp(
        1,
        "import cmath\nimport math\ndef angle_complex(a, b):\n    return cmath.phase(a + b)\n",
        ["assert math.isclose(angle_complex(0, 1j), 1.5707963267948966, rel_tol=0.001)"],
    ),
    mbpp(
        2,
        "def remove_datatype(t, data_type):\n    return [e for e in t if not isinstance(e, data_type)]\n",
        ["assert remove_datatype((4, 5, 4, 7.7, 1.2), int) == [7.7, 1.2]"],
    ),
    mbpp(
        3,
        "def max_height(node):\n    if node is None:\n        return 0\n"
        "    return 1 + max(max_height(node.left), max_height(node.right))\n",
        ["assert (max_height(root)) == 3"],
        NODE_SETUP,
    ),
    mbpp(4, PAIR, ["assert max_chain_length([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3"]),
    mbpp(
        5,
        "import sys\ndef biggest(x):\n    return sys.maxsize if x else -sys.maxsize\n",
        ["assert biggest(True) == sys.maxsize", "assert biggest(False) == -sys.maxsize"],
    ),
    # Wrong: one right assert and one wrong.
    mbpp(
        6,
        "def remove_datatype(t, data_type):\n    return list(t)\n",
        ["assert remove_datatype((), int) == []", "assert remove_datatype((1, 2.5), int) == [2.5]"],
    ),
]

GO_SETUP = 'package main\n\nimport (\n    "testing"\n    "github.com/stretchr/testify/assert"\n)\n'
GO_TEST = 'func TestShout(t *testing.T) {\n    assert := assert.New(t)\n    assert.Equal("AB!", Shout("ab"))\n}\n'


def humaneval_x(task: str, prompt: str, completion: str, test: str, **more: str) -> dict[str, Any]:
    return {
        "task_id": task,
        "prompt": prompt,
        "declaration": prompt,
        "canonical_solution": "",
        "test": test,
        "example_test": "",
        "generation": completion,
        **more,
    }


HUMANEVAL_X = [
    humaneval_x(
        "Python/0",
        'def add(a, b):\n    """Add."""\n',
        "    return a + b\n\ndef unrelated():\n    pass\n",
        "\n\ndef check(add):\n    assert add(1, 2) == 3\n    assert np.isclose(add(0.1, 0.2), 0.3)\n\ncheck(add)\n",
    ),
    humaneval_x(
        "Python/1",
        'def add(a, b):\n    """Add."""\n',
        "    return a - b\n",
        "\n\ndef check(add):\n    assert add(1, 2) == 3\n\ncheck(add)\n",
    ),
    humaneval_x(
        "CPP/0",
        "/*\nAdd.\n*/\n#include<stdio.h>\nusing namespace std;\nint add(int a,int b){\n",
        "    return a+b;\n}\n",
        "#undef NDEBUG\n#include<assert.h>\nint main(){\n    assert (add(1,2)==3);\n}\n",
    ),
    humaneval_x(
        "CPP/1",
        "#include<stdio.h>\nusing namespace std;\nint add(int a,int b){\n",
        "    return a-b;\n}\n",
        "#undef NDEBUG\n#include<assert.h>\nint main(){\n    assert (add(1,2)==3);\n}\n",
    ),
    # The libraries users' C++ assumes: Boost, OpenSSL's MD5 (HumanEval-X's problem 162), GMP.
    humaneval_x(
        "CPP/2",
        "#include<string>\n#include<boost/any.hpp>\n#include<openssl/md5.h>\n#include<gmpxx.h>\nusing namespace std;\n"
        "string md5_of(string text){\n",
        "    unsigned char digest[MD5_DIGEST_LENGTH];\n"
        "    MD5((const unsigned char*)text.c_str(), text.size(), digest);\n"
        '    char hex[33];\n    for (int i = 0; i < 16; i++) sprintf(hex + 2 * i, "%02x", digest[i]);\n'
        "    boost::any kept = string(hex);\n    return boost::any_cast<string>(kept);\n}\n",
        "#undef NDEBUG\n#include<assert.h>\nint main(){\n"
        '    assert (md5_of("abc") == "900150983cd24fb0d6963f7d28e17f72");\n'
        "    mpz_class f = 1; for (int i = 2; i <= 25; i++) f *= i;\n"
        '    assert (f.get_str() == "15511210043330985984000000");\n}\n',
    ),
    humaneval_x(
        "Java/0",
        "import java.util.*;\nimport java.lang.*;\n\nclass Solution {\n    public int add(int a, int b) {\n",
        "        return a + b;\n    }\n}",
        "public class Main {\n    public static void main(String[] args) {\n        Solution s = new Solution();\n"
        "        if (s.add(1, 2) != 3) {\n            throw new AssertionError();\n        }\n    }\n}\n",
    ),
    humaneval_x(
        "Java/1",
        "import java.util.*;\n\nclass Solution {\n    public int add(int a, int b) {\n",
        "        return a * b;\n    }\n}",
        "public class Main {\n    public static void main(String[] args) {\n        Solution s = new Solution();\n"
        "        if (s.add(1, 2) != 3) {\n            throw new AssertionError();\n        }\n    }\n}\n",
    ),
    humaneval_x(
        "JavaScript/0",
        "const add = (a, b) => {\n",
        "  return a + b;\n}\n",
        "const testAdd = () => {\n  console.assert(add(1, 2) === 3)\n}\n\ntestAdd()\n",
    ),
    # console.assert only prints: the harness fails it by its message, so does Airlock.
    humaneval_x(
        "JavaScript/1",
        "const add = (a, b) => {\n",
        "  return a - b;\n}\n",
        "const testAdd = () => {\n  console.assert(add(1, 2) === 3)\n}\n\ntestAdd()\n",
    ),
    humaneval_x(
        "Go/0",
        'import (\n    "strings"\n)\n\nfunc Shout(s string) string {\n',
        '    return strings.ToUpper(s) + "!"\n}\n',
        GO_TEST,
        **{"import": 'import (\n    "strings"\n)\n', "test_setup": GO_SETUP},
    ),
    humaneval_x(
        "Go/1",
        'import (\n    "strings"\n)\n\nfunc Shout(s string) string {\n',
        "    return strings.ToLower(s)\n}\n",
        GO_TEST,
        **{"import": 'import (\n    "strings"\n)\n', "test_setup": GO_SETUP},
    ),
]

JS_TESTS = (
    "const assert = require('node:assert');\n\nfunction test() {\n  let candidate = add;\n"
    "  assert.deepEqual(candidate(1, 2),3);\n}\n\ntest();"
)
JAVA_ASSERTS = "    }\n    public static void main(String[] args) {\n    assert(add((1l), (2l)) == (3l));\n    }\n\n}\n"
MULTIPL_E = [
    {
        "name": "HumanEval_0_add",
        "language": "js",
        "prompt": "function add(a, b){\n",
        "completion": "  return a + b;\n}",
        "tests": JS_TESTS,
        "stop_tokens": ["\nfunction "],
    },
    {
        "name": "HumanEval_1_add",
        "language": "js",
        "prompt": "function add(a, b){\n",
        "completion": "  return a;\n}",
        "tests": JS_TESTS,
        "stop_tokens": [],
    },
    {
        "name": "HumanEval_2_add",
        "language": "py",
        "prompt": "def add(a: int, b: int) -> int:\n",
        "completion": "    return a + b\n",
        "tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n\n"
        "def test_check():\n    check(add)\n\ntest_check()\n",
    },
    {
        "name": "HumanEval_3_add",
        "language": "rs",
        "prompt": "fn add(a: isize, b: isize) -> isize {\n",
        "completion": "    a + b\n}\n",
        "tests": "\nfn main() {\n    let candidate = add;\n    assert_eq!(candidate(1, 2), 3);\n}\n",
    },
    {
        "name": "HumanEval_4_add",
        "language": "rs",
        "prompt": "fn add(a: isize, b: isize) -> isize {\n",
        "completion": "    a - b\n}\n",
        "tests": "\nfn main() {\n    let candidate = add;\n    assert_eq!(candidate(1, 2), 3);\n}\n",
    },
    # MultiPL-E's Java problems live in class Problem, asserting with assertions on (java -ea).
    {
        "name": "HumanEval_5_add",
        "language": "java",
        "prompt": "import java.util.*;\nclass Problem {\n    public static long add(long a, long b) {\n",
        "completion": "        System.out.println(a);\n        return a + b;\n",
        "tests": JAVA_ASSERTS,
    },
    {
        "name": "HumanEval_6_add",
        "language": "java",
        "prompt": "import java.util.*;\nclass Problem {\n    public static long add(long a, long b) {\n",
        "completion": "        return a - b;\n",
        "tests": JAVA_ASSERTS,
    },
]


def packed(cases: list[dict[str, str]]) -> str:
    """LiveCodeBench's private tests: base64 of zlib of a pickled JSON text."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


STDIN_CASES = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
LIVECODEBENCH = [
    {
        "question_id": "lcb-1",
        "public_test_cases": json.dumps(STDIN_CASES),
        "private_test_cases": packed([{"input": "5 7\n", "output": "12\n", "testtype": "stdin"}]),
        "metadata": "{}",
        "completion": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
    },
    {
        "question_id": "lcb-2",
        "public_test_cases": json.dumps(STDIN_CASES),
        "private_test_cases": packed([{"input": "5 7\n", "output": "12\n", "testtype": "stdin"}]),
        "metadata": "{}",
        "completion": "```python\nprint(3)\n```",
    },
    {
        "question_id": "lcb-3",
        "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
        "private_test_cases": "",
        "metadata": json.dumps({"func_name": "add"}),
        "completion": "class Solution:\n    def add(self, a: int, b: int) -> int:\n        return a + b\n",
    },
]


def contest(name: str, solutions: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["10 20\n"], "output": ["30\n"]},
        "generated_tests": {"input": ["-1 1\n"], "output": ["0\n"]},
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 268435456,
        "solutions": solutions,
    }


CPP_SUM = "#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}\n"
CODE_CONTESTS = [
    contest("cc-right", {"language": [1, 2], "solution": ["print sum(map(int, raw_input().split()))", CPP_SUM]}),
    contest("cc-wrong", {"language": [3], "solution": ["a, b = map(int, input().split())\nprint(a * b)\n"]}),
]

BCB_PROMPT = 'import os\n\n\ndef task_func(directory):\n    """The names of the .txt files in directory, sorted."""\n'
BCB_TEST = """import unittest
from unittest.mock import patch


class TestCases(unittest.TestCase):
    @patch("os.listdir", return_value=["b.txt", "a.py", "a.txt"])
    def test_only_text_files_sorted(self, listdir):
        self.assertEqual(task_func("/data"), ["a.txt", "b.txt"])
        listdir.assert_called_once_with("/data")

    def test_a_real_directory(self):
        os.makedirs("here", exist_ok=True)
        open(os.path.join("here", "x.txt"), "w").close()
        self.assertEqual(task_func("here"), ["x.txt"])
"""


def bigcodebench(task: int, **solution: str) -> dict[str, Any]:
    return {
        "task_id": f"BigCodeBench/{task}",
        "complete_prompt": BCB_PROMPT,
        "instruct_prompt": "...",
        "code_prompt": "import os\n\n\ndef task_func(directory):\n",
        "canonical_solution": "    return sorted(n for n in os.listdir(directory) if n.endswith('.txt'))\n",
        "test": BCB_TEST,
        "entry_point": "task_func",
        "libs": "['os']",
        **solution,
    }


BIGCODEBENCH = [
    bigcodebench(0),
    bigcodebench(1, completion="    return sorted(filter(lambda n: n.endswith('.txt'), os.listdir(directory)))\n"),
    # Wrong: it lists the directory its own way, which the test's mock does not see.
    bigcodebench(
        2, solution=BCB_PROMPT + "    return sorted(e.name for e in os.scandir(directory) if e.name.endswith('.txt'))\n"
    ),
]

EXPECTED = {
    "1": "passed",
    "2": "passed",
    "3": "passed",
    "4": "passed",
    "5": "passed",
    "6": "wrong_answer",
    "Python/0": "passed",
    "Python/1": "wrong_answer",
    "CPP/0": "passed",
    "CPP/1": "runtime_error",
    "CPP/2": "passed",
    "Java/0": "passed",
    "Java/1": "runtime_error",
    "JavaScript/0": "passed",
    "JavaScript/1": "wrong_answer",
    "Go/0": "passed",
    "Go/1": "runtime_error",
    "HumanEval_0_add": "passed",
    "HumanEval_1_add": "runtime_error",
    "HumanEval_2_add": "passed",
    "HumanEval_3_add": "passed",
    "HumanEval_4_add": "runtime_error",
    "HumanEval_5_add": "passed",
    "HumanEval_6_add": "runtime_error",
    "lcb-1": "passed",
    "lcb-2": "wrong_answer",
    "lcb-3": "passed",
    "cc-right": "passed",
    "cc-wrong": "wrong_answer",
    "BigCodeBench/0": "passed",
    "BigCodeBench/1": "passed",
    "BigCodeBench/2": "runtime_error",
}


def test_each_published_layout_is_read_and_judged_as_its_harness_judges(tmp_path: Path) -> None:
    data = tmp_path / "published.jsonl"
    records = MBPP + HUMANEVAL_X + MULTIPL_E + LIVECODEBENCH + CODE_CONTESTS + BIGCODEBENCH
    data.write_text("".join(json.dumps(record) + "\n" for record in records))
    out = tmp_path / "out.jsonl"
    completed = subprocess.run(
        [sys.executable, "-m", "engine", "score", str(data), "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    verdicts = {str(r["id"]): r.get("verdict", r.get("error")) for r in results}
    details = {
        str(r["id"]): [t.get("detail") for t in r.get("tests", []) if t.get("verdict") != "passed"][:1]
        for r in results
        if verdicts[str(r["id"])] != EXPECTED.get(str(r["id"]))
    }
    assert verdicts == EXPECTED, details
