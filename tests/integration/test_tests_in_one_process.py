"""A Python submission whose tests share one process (``process_per_test=False``): the same
verdicts as with a process per test, what a test leaves in memory found by the next, and every
way a test can end its process (exit, signal, time, a closed channel) that test's verdict alone.
Both ways side by side, on each runtime and isolation tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sandboxes import SESSION_SANDBOXES, Sandbox, ids

from engine import AssertTest, CallTest, Limits, StdinTest, Submission, SubmissionResult, SyncEngine

pytestmark = pytest.mark.docker

LIMITS = Limits(time_s=1, wall_time_s=5)
BOTH = pytest.mark.parametrize("process_per_test", [True, False], ids=["forked-tests", "tests-in-one-process"])


@pytest.fixture(scope="module", params=SESSION_SANDBOXES, ids=ids(SESSION_SANDBOXES))
def runtime_engine(request: pytest.FixtureRequest) -> Iterator[SyncEngine]:
    sandbox: Sandbox = request.param
    with SyncEngine(sandbox.require().settings(pool_size=0)) as engine:
        yield engine


def judged(
    engine: SyncEngine, process_per_test: bool, code: str, tests: list[StdinTest], **fields: object
) -> SubmissionResult:
    return engine.judge(Submission(code=code, tests=tests, limits=LIMITS, process_per_test=process_per_test, **fields))


def verdicts(result: SubmissionResult) -> list[str]:
    return [test.verdict.value for test in result.tests]


@BOTH
def test_memory_is_shared_only_when_asked(runtime_engine: SyncEngine, process_per_test: bool) -> None:
    code = "calls = []\ndef f(x):\n    calls.append(x)\n    return len(calls)\n"
    expected = [1, 1, 1] if process_per_test else [1, 2, 3]
    tests = [CallTest(args=[n], expected=e) for n, e in enumerate(expected)]
    result = runtime_engine.judge(Submission(code=code, fn_name="f", tests=tests, process_per_test=process_per_test))
    assert verdicts(result) == ["passed"] * 3, result.tests


@BOTH
def test_each_test_reads_only_its_own_input(runtime_engine: SyncEngine, process_per_test: bool) -> None:
    # The first line only: the rest stays in the stream's buffer, which the next test must not get.
    code = "import sys\nprint(sys.stdin.readline().strip())\nprint(repr(sys.argv[1:]), file=sys.stderr)\n"
    tests = [StdinTest(input=f"{n}\nrest of {n}\n" * 50, expected_output=f"{n}\n") for n in range(4)]
    result = judged(runtime_engine, process_per_test, code, tests)
    assert verdicts(result) == ["passed"] * 4, result.tests
    assert [test.stderr for test in result.tests] == ["[]\n"] * 4


@BOTH
def test_a_test_that_ends_its_process_ends_only_itself(runtime_engine: SyncEngine, process_per_test: bool) -> None:
    code = """
import os, signal, sys
how = input()
print("ran", how, flush=True)
if how == "exit 3":
    os._exit(3)
if how == "exit 0":
    os._exit(0)
if how == "sys.exit":
    sys.exit(4)
if how == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "spin":
    while True:
        pass
if how == "channel":
    os.closerange(3, 1024)
"""
    hows = ["exit 3", "fine", "exit 0", "sys.exit", "killed", "fine", "spin", "channel", "fine"]
    tests = [StdinTest(input=how, expected_output=f"ran {how}\n") for how in hows]
    result = judged(runtime_engine, process_per_test, code, tests)
    assert verdicts(result) == [
        "runtime_error",
        "passed",
        "passed",
        "runtime_error",
        "runtime_error",
        "passed",
        "timeout",
        "passed",
        "passed",
    ], result.tests
    assert [(t.exit_code, t.signal) for t in result.tests[:5]] == [
        (3, None),
        (0, None),
        (0, None),
        (4, None),
        (None, 9),
    ]
    assert all(t.stdout == f"ran {how}\n" for t, how in zip(result.tests, hows, strict=True) if how != "spin")


@BOTH
def test_threads_and_exit_handlers_finish_with_their_test(runtime_engine: SyncEngine, process_per_test: bool) -> None:
    code = """
import atexit, threading, time
n = input()
atexit.register(print, "atexit", n)
threading.Thread(target=lambda: (time.sleep(0.05), print("thread", n))).start()
print("main", n)
"""
    tests = [StdinTest(input=str(n), expected_output=f"main {n}\nthread {n}\natexit {n}\n") for n in range(3)]
    assert verdicts(judged(runtime_engine, process_per_test, code, tests)) == ["passed"] * 3


@BOTH
def test_assert_tests_call_into_the_shared_process(runtime_engine: SyncEngine, process_per_test: bool) -> None:
    code = "seen = []\ndef add(a, b):\n    seen.append(a)\n    return a + b\ndef count():\n    return len(seen)\n"
    expected = 1 if process_per_test else 2
    tests = [
        AssertTest(code="assert candidate(1, 2) == 3"),
        AssertTest(code=f"add(0, 0)\nassert count() == {expected}"),
    ]
    result = runtime_engine.judge(
        Submission(code=code, entry_point="add", tests=tests, process_per_test=process_per_test)
    )
    assert verdicts(result) == ["passed", "passed"], result.tests


def test_the_time_limit_holds_in_a_process_that_already_used_time(runtime_engine: SyncEngine) -> None:
    # Each test uses most of its second: the process's total passes every per-test limit, and no
    # test is ended for what the ones before it used.
    code = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end:\n    pass\nprint(input())\n"
    tests = [StdinTest(input=str(n), expected_output=f"{n}\n") for n in range(4)]
    result = judged(runtime_engine, False, code, tests)
    assert verdicts(result) == ["passed"] * 4, result.tests
    # gVisor's own count of a process's time runs ahead of the host's (tests/security/test_cpu_time.py).
    if runtime_engine.settings.isolation != "gvisor":
        assert all(0.5 < (t.usage.cpu_time_s or 0) < 1.0 for t in result.tests), [t.usage for t in result.tests]


def test_the_engines_setting_is_the_default_and_a_submission_chooses(runtime_engine: SyncEngine) -> None:
    code = "import os\nprint(os.getpid())\n"
    tests = [StdinTest(input="", expected_output="")] * 3

    def pids(engine: SyncEngine, process_per_test: bool | None) -> int:
        result = engine.judge(Submission(code=code, tests=tests, process_per_test=process_per_test))
        return len({test.stdout for test in result.tests})

    assert pids(runtime_engine, None) == 1
    assert pids(runtime_engine, True) == 3
    settings = runtime_engine.settings.model_copy(update={"process_per_test": True})
    with SyncEngine(settings) as forking:
        assert pids(forking, None) == 3
        assert pids(forking, False) == 1
        assert forking.run("import os\nprint(os.getppid())\n").stdout != "1\n"
    # A plain run too: its program is the harness's child, not a child of a worker.
    assert runtime_engine.run("import os\nprint(os.getppid())\n").stdout == "1\n"


def test_other_languages_run_a_process_per_test_either_way(runtime_engine: SyncEngine, language_images: None) -> None:
    code = '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("%d\\n", getpid()); }\n'
    tests = [StdinTest(input="", expected_output="")] * 2
    result = runtime_engine.judge(Submission(language="c", code=code, tests=tests, process_per_test=False))
    assert len({test.stdout for test in result.tests}) == 2, result.tests


def test_a_verdict_is_unchanged_by_the_choice(runtime_engine: SyncEngine) -> None:
    code = "a, b = map(int, input().split())\nprint(a + b if a < 5 else a - b)\n"
    tests = [StdinTest(input=f"{a} 1", expected_output=f"{a + 1}\n") for a in range(8)]
    both = [verdicts(judged(runtime_engine, choice, code, tests)) for choice in (True, False)]
    assert both[0] == both[1] == ["passed"] * 5 + ["wrong_answer"] * 3
