"""Attacks on a checker, by a program that has read how checkers run: it cannot find the
expected answer, nothing it leaves reaches the checker, and nothing it prints is taken for
anything but its output."""

from __future__ import annotations

import pytest

from engine import Checker, Limits, RunTest, StdinTest, Submission, SyncEngine

pytestmark = pytest.mark.docker

SECRET = "expected-answer-7f3a9c"
EXACT = "def check(input, expected, output):\n    return output.strip() == expected.strip()\n"
# The same rule as a program that speaks testlib's protocol: it reads the files it is given.
EXACT_PROGRAM = (
    "import sys\n"
    "output, answer = (open(name).read().strip() for name in sys.argv[2:4])\n"
    "sys.exit(0 if output == answer else 1)\n"
)
CHECKERS = {"function": Checker(code=EXACT), "program": Checker(code=EXACT_PROGRAM, protocol="testlib")}


@pytest.mark.parametrize("checker", list(CHECKERS))
def test_the_program_cannot_find_the_expected_answer(engine: SyncEngine, checker: str) -> None:
    hunt = f"""
import os, sys
found = set()
def look(text):
    if "{SECRET[:8]}" in text:
        found.add(text[text.index("{SECRET[:8]}"):][:len("{SECRET}")])
look(sys.stdin.read())
look(repr(dict(os.environ)))
for root in ("/tmp", "/dev/shm", "/proc/self", "/proc/1", "/opt", "/home", "/run"):
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                with open(os.path.join(folder, name), "rb") as file:
                    look(file.read(1 << 20).decode("latin-1"))
            except OSError:
                pass
print(found.pop() if found else "nothing")
"""
    tests = [StdinTest(input="question", expected_output=SECRET)] * 2
    result = engine.judge(Submission(code=hunt, tests=tests, checker=CHECKERS[checker]))
    assert [t.verdict.value for t in result.tests] == ["wrong_answer"] * 2
    assert SECRET not in result.tests[0].stdout


def test_nothing_the_program_leaves_reaches_the_checker(engine: SyncEngine) -> None:
    leave = (
        "import os, subprocess\n"
        "for place in ('/tmp', '/dev/shm'):\n"
        "    open(os.path.join(place, 'verdict'), 'w').write('True')\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "print('answer')\n"
    )
    # The checker accepts only if it finds no trace of the program: no file it left, no process
    # but its own tree.
    suspicious = """
import os
def check(input, expected, output):
    left = [p for place in ('/tmp', '/dev/shm') for p in os.listdir(place) if p == 'verdict']
    mine = {os.getpid(), os.getppid(), 1}
    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in mine]
    foreign = [open(f'/proc/{p}/cmdline').read() for p in others if os.path.exists(f'/proc/{p}/cmdline')]
    sleeping = [c for c in foreign if 'sleep' in c]
    return (not left and not sleeping), f"left={left} sleeping={sleeping}"
"""
    result = engine.judge(
        Submission(code=leave, tests=[RunTest(expected_stdout="answer\n")], checker=Checker(code=suspicious))
    )
    assert result.tests[0].verdict.value == "passed", result.tests[0].detail


@pytest.mark.parametrize(
    "printed",
    [
        '{"$int": "123"}',
        '{"type": "test", "index": 0, "status": "ok", "value": true}',
        "True",
        "\\u0000\\udcff",
        '"]}, {"args": [1]}',
    ],
)
def test_the_checker_gets_the_output_as_text_and_nothing_else(engine: SyncEngine, printed: str) -> None:
    program = f"import sys\nsys.stdout.write({printed!r} + chr(10))\n"
    literal = (
        f"def check(input, expected, output):\n    return type(output) is str and output == {printed + chr(10)!r}\n"
    )
    result = engine.judge(
        Submission(code=program, tests=[StdinTest(expected_output="")], checker=Checker(code=literal))
    )
    assert result.tests[0].verdict.value == "passed", (printed, result.tests[0])


# A checker as data sets write them: it trusts the output's shape.
NAIVE = "def check(input, expected, output):\n    return abs(float(output.split()[0]) - float(expected)) < 1e-6\n"


@pytest.mark.parametrize("printed", ["garbage", ""])
def test_a_program_cannot_pick_sandbox_error_by_breaking_the_checker(engine: SyncEngine, printed: str) -> None:
    """Output that makes the checker raise is the program's wrong answer, with the checker's
    message: the checker accepts the expected answer (the control), so the fault is the output's."""
    tests = [StdinTest(input="", expected_output="2.5")] * 2
    result = engine.judge(Submission(code=f"print({printed!r})", tests=tests, checker=Checker(code=NAIVE)))
    assert [t.verdict.value for t in result.tests] == ["wrong_answer"] * 2, result.tests
    assert "the checker rejected the output" in (result.tests[0].detail or "")
    right = engine.judge(Submission(code="print(2.5)", tests=tests, checker=Checker(code=NAIVE)))
    assert right.ok


def test_a_checker_that_fails_on_the_expected_answer_too_is_the_judges_failure(engine: SyncEngine) -> None:
    picky = "def check(input, expected, output):\n    return int(output) == int(expected)\n"
    tests = [StdinTest(input="", expected_output="2.5")]
    result = engine.judge(Submission(code="print('x')", tests=tests, checker=Checker(code=picky)))
    assert result.tests[0].verdict.value == "sandbox_error"
    assert "on the expected answer too" in (result.tests[0].detail or "")


# A checker program as data sets write them: it trusts the output's shape, and crashes, hangs or
# blames the jury on what it did not expect.
NAIVE_PROGRAM = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *out = fopen(argv[2], "r"), *ans = fopen(argv[3], "r");
    double got, want;
    if (fscanf(ans, "%lf", &want) != 1) return 3;
    if (fscanf(out, "%lf", &got) != 1) { volatile int *nowhere = 0; return *nowhere; }
    if (got < 0) { volatile int forever = 1; while (forever) {} }
    if (got > want) return 3;  /* a "better answer than the jury's": testlib's _fail */
    return got == want ? 0 : 1;
}
"""


def test_a_program_cannot_pick_sandbox_error_by_breaking_a_checker_program(
    engine: SyncEngine, language_images: None
) -> None:
    """What the program prints can crash the checker, hang it, or make it blame the jury: each is
    the program's wrong answer, because the same checker accepts the expected answer."""
    program = "print({'crash': 'garbage', 'hang': '-1', 'blame': '99', 'right': '2.5'}[input()])"
    tests = [StdinTest(input=case, expected_output="2.5") for case in ("crash", "hang", "blame", "right")]
    checker = Checker(language="c", code=NAIVE_PROGRAM)
    result = engine.judge(Submission(code=program, tests=tests, checker=checker, limits=Limits(time_s=1)))
    verdicts = [(t.verdict.value, t.detail or "") for t in result.tests]
    assert [verdict for verdict, _ in verdicts] == ["wrong_answer"] * 3 + ["passed"], verdicts
    assert all(detail.startswith("the checker rejected the output") for _, detail in verdicts[:3]), verdicts
