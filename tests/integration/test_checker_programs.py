"""Checkers written as programs that speak testlib's protocol (issue: contest-grade judging): a
problem with many right answers judged by a C++ checker with our testlib.h and by one without it,
through ``airlock score`` as a data set's author writes the record; and how the checker's own
failures are told from the program's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import Checker, StdinTest, Submission, SyncEngine

# The checkers are C++: the cpp image must be there.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("language_images")]

# Any two non-negative integers that add up to N; one short of it earns half the test.
TESTLIB_CHECKER = r"""
#include "testlib.h"

int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long long n = inf.readLong();
    ans.readLong(0, n, "jury's a");
    long long a = ouf.readLong(0, n, "a");
    long long b = ouf.readLong(0, n, "b");
    if (a + b == n - 1)
        quitp(0.5, "%lld + %lld is one short of %lld", a, b, n);
    if (a + b != n)
        quitf(_wa, "%lld + %lld is not %lld", a, b, n);
    quitf(_ok, "%lld = %lld + %lld", n, a, b);
}
"""
PLAIN_CHECKER = r"""
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    std::ifstream in(argv[1]), out(argv[2]);
    long long n, a, b;
    std::string extra;
    in >> n;
    if (!(out >> a >> b) || (out >> extra)) { std::cerr << "two integers expected"; return 2; }
    if (a < 0 || b < 0 || a + b != n) { std::cerr << a << " + " << b << " is not " << n; return 1; }
    std::cerr << "fine";
    return 0;
}
"""
PYTHON_CHECKER = """
import sys
n, output = (open(name).read() for name in sys.argv[1:3])
parts = output.split()
if len(parts) != 2 or not all(part.isdigit() for part in parts):
    sys.exit("wrong output format: two non-negative integers expected")
if int(parts[0]) + int(parts[1]) != int(n):
    print("wrong answer they do not add up", file=sys.stderr)
    sys.exit(1)
"""
TESTS = [
    {"kind": "stdin", "input": "10\n", "expected_output": "5 5\n"},
    {"kind": "stdin", "input": "7\n", "expected_output": "3 4\n"},
]
PROGRAMS = {
    "halves": "n = int(input())\nprint(n // 2, n - n // 2)\n",
    "zero-and-all": "n = int(input())\nprint(0, n)\n",
    "one-short": "n = int(input())\nprint(0, n - 1)\n",
    "wrong": "input()\nprint(1, 1)\n",
    "words": "input()\nprint('five and five')\n",
    "extra": "n = int(input())\nprint(0, n, 0)\n",
    "negative": "n = int(input())\nprint(-1, n + 1)\n",
}


def _records() -> list[dict[str, Any]]:
    with_testlib = [
        {
            "id": f"testlib-{name}",
            "code": code,
            "tests": TESTS,
            "checker": {"language": "cpp", "code": TESTLIB_CHECKER, "protocol": "testlib"},
        }
        for name, code in PROGRAMS.items()
    ]
    plain = [
        {
            "id": f"plain-{name}",
            "code": PROGRAMS[name],
            "tests": TESTS,
            "checker": {"language": "cpp", "code": PLAIN_CHECKER},
        }
        for name in ("zero-and-all", "wrong", "words")
    ]
    return with_testlib + plain


def test_checker_programs_through_airlock_score(tmp_path: Path) -> None:
    data, out = tmp_path / "contest.jsonl", tmp_path / "results.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in _records()))
    completed = subprocess.run(
        [sys.executable, "-m", "engine", "score", str(data), "-o", str(out), "-q", "--details", "all"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    results = {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}
    tests = {
        name: [(t["verdict"], t.get("score"), t.get("detail") or "") for t in r["tests"]] for name, r in results.items()
    }
    verdicts = {name: [t[0] for t in found] for name, found in tests.items()}

    for accepted in ("testlib-halves", "testlib-zero-and-all", "plain-zero-and-all"):
        assert verdicts[accepted] == ["passed", "passed"], tests[accepted]
    assert tests["testlib-halves"][0][2] == "10 = 5 + 5"
    assert tests["testlib-one-short"][0][:2] == ("wrong_answer", 0.5), tests["testlib-one-short"]
    assert tests["testlib-one-short"][0][2] == "0 + 9 is one short of 10"
    assert tests["testlib-wrong"][0][2] == "1 + 1 is not 10"
    assert tests["plain-wrong"][0][2] == "1 + 1 is not 10"
    # A presentation error is a wrong answer that says so.
    for malformed, why in [
        ("testlib-words", 'Expected integer, but "five" found'),
        ("testlib-extra", "Extra information in the output file"),
        ("plain-words", "two integers expected"),
    ]:
        assert tests[malformed][0][:2] == ("wrong_answer", 0.0), tests[malformed]
        assert tests[malformed][0][2] == f"presentation error: {why}"
    assert tests["testlib-negative"][0][2] == "Integer -1 violates the range [0, 10] (a)"
    for name in ("testlib-wrong", "testlib-words", "testlib-negative", "plain-wrong", "plain-words"):
        assert verdicts[name] == ["wrong_answer", "wrong_answer"], tests[name]


def judge(engine: SyncEngine, program: str, checker: Checker) -> list[tuple[str, Any, str]]:
    tests = [StdinTest(**{k: v for k, v in test.items() if k != "kind"}) for test in TESTS]
    result = engine.judge(Submission(code=program, tests=tests, checker=checker))
    return [(t.verdict.value, t.score, t.detail or "") for t in result.tests]


def test_a_checker_program_in_python(engine: SyncEngine) -> None:
    checker = Checker(code=PYTHON_CHECKER, protocol="testlib")
    assert [t[0] for t in judge(engine, PROGRAMS["halves"], checker)] == ["passed", "passed"]
    assert judge(engine, PROGRAMS["wrong"], checker)[0] == ("wrong_answer", 0.0, "they do not add up")
    # sys.exit with a message exits with 1, a wrong answer, and says why on stderr.
    words = judge(engine, PROGRAMS["words"], checker)[0]
    assert words == ("wrong_answer", 0.0, "wrong output format: two non-negative integers expected")


BROKEN = {
    # It fails on every output, the expected answer too: the judge's failure.
    "fails-always": (
        '#include "testlib.h"\nint main(int c, char** v) { registerTestlibCmd(c, v); quitf(_fail, "jury broken"); }',
        "jury broken",
    ),
    "cannot-compile": ("int main() { return undefined_name; }", "undefined_name"),
    "unknown-exit-code": ("int main() { return 5; }", "exited with 5"),
    "points-out-of-range": (
        '#include "testlib.h"\nint main(int c, char** v) { registerTestlibCmd(c, v); quitp(30.0); }',
        "30 points",
    ),
    "no-verdict": (
        '#include "testlib.h"\nint main(int c, char** v) { registerTestlibCmd(c, v); }',
        "ended without a verdict",
    ),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_checker_program_is_the_judges_failure(engine: SyncEngine, name: str) -> None:
    code, why = BROKEN[name]
    verdict, _, detail = judge(engine, PROGRAMS["halves"], Checker(language="cpp", code=code))[0]
    assert verdict == "sandbox_error", detail
    assert why in detail, detail
