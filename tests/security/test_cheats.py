"""Verdict forgery: every cheat here is a wrong answer plus a trick, and none of them may pass.

The expected answers are chosen so that an honest wrong program fails; each test asserts the
specific verdict the cheat gets.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from engine import AssertTest, CallTest, StdinTest, Submission, SyncEngine, Verdict

pytestmark = pytest.mark.docker

SECRET = "correct-horse-battery-staple"


def fake_report(tests: int = 1) -> str:
    frame = {
        "type": "test",
        "index": 0,
        "status": "ok",
        "exit_code": 0,
        "signal": None,
        "stdout": SECRET + "\n",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "wall_time_s": 0.0,
        "cpu_time_s": 0.0,
        "max_rss_kb": 1,
        "error": None,
        "value": SECRET,
    }
    lines = [{"type": "hello", "protocol": 1, "tests": tests}, frame, {"type": "done", "tests": tests}]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def stdin_result(engine: SyncEngine, code: str) -> Verdict:
    submission = Submission(code=textwrap.dedent(code), tests=[StdinTest(input="", expected_output=SECRET)])
    return engine.judge(submission).tests[0].verdict


def call_result(engine: SyncEngine, code: str) -> Verdict:
    submission = Submission(code=textwrap.dedent(code), fn_name="solve", tests=[CallTest(args=[], expected=SECRET)])
    return engine.judge(submission).tests[0].verdict


def assert_result(engine: SyncEngine, code: str) -> Verdict:
    test = AssertTest(code=f"assert candidate() == {SECRET!r}")
    submission = Submission(code=textwrap.dedent(code), entry_point="solve", tests=[test])
    return engine.judge(submission).tests[0].verdict


def test_printing_a_fake_report_is_just_output(engine: SyncEngine) -> None:
    assert stdin_result(engine, f"print({fake_report()!r}, end='')") is Verdict.WRONG_ANSWER


def test_writing_a_fake_report_to_the_real_stdout_is_refused(engine: SyncEngine) -> None:
    code = f"""
        import os
        for target in ("/proc/1/fd/1", "/proc/self/fd/1", "/dev/stdout"):
            try:
                with open(target, "w") as channel:
                    channel.write({fake_report()!r})
            except OSError:
                pass
        try:
            os.kill(1, 9)
        except OSError:
            pass
    """
    assert stdin_result(engine, code) is Verdict.WRONG_ANSWER


def test_fake_report_then_flood_is_an_output_limit(engine: SyncEngine) -> None:
    code = f"import sys\nsys.stdout.write({fake_report()!r})\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    assert stdin_result(engine, code) is Verdict.OUTPUT_LIMIT


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "raise SystemExit(0)", "os._exit(0)", "exit(0)"])
def test_exiting_early_is_not_passing(engine: SyncEngine, exit_call: str) -> None:
    assert stdin_result(engine, f"import os, sys\n{exit_call}\n") is Verdict.WRONG_ANSWER
    assert call_result(engine, f"import os, sys\ndef solve():\n    {exit_call}\n") is Verdict.RUNTIME_ERROR
    assert assert_result(engine, f"import os, sys\ndef solve():\n    {exit_call}\n") is Verdict.RUNTIME_ERROR


def test_an_object_equal_to_everything_is_not_an_answer(engine: SyncEngine) -> None:
    code = """
        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def solve():
            return Anything()
    """
    assert call_result(engine, code) is Verdict.RUNTIME_ERROR
    # The test holds a handle to the program's object, compared by its state, never its __eq__.
    assert assert_result(engine, code) is Verdict.WRONG_ANSWER


def test_a_builtin_subclass_with_a_lying_eq_is_compared_by_value(engine: SyncEngine) -> None:
    code = """
        class Anything(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        def solve():
            return Anything("wrong")
    """
    assert call_result(engine, code) is Verdict.WRONG_ANSWER
    assert assert_result(engine, code) is Verdict.WRONG_ANSWER


def test_monkeypatching_cannot_reach_the_judge(engine: SyncEngine) -> None:
    code = """
        import builtins, json, sys
        builtins.AssertionError = type("Never", (Exception,), {})
        builtins.print = lambda *a, **k: None
        json.dumps = lambda *a, **k: '"correct-horse-battery-staple"'
        for name, module in list(sys.modules.items()):
            if "airlock" in name:
                for attr in ("encode", "send", "decode"):
                    if hasattr(module, attr):
                        setattr(module, attr, lambda *a, **k: None)
        def solve():
            return "wrong"
    """
    assert call_result(engine, code) in (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR)
    assert assert_result(engine, code) in (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR)


def test_the_expected_answer_is_nowhere_in_the_sandbox(engine: SyncEngine) -> None:
    code = f"""
        import glob, os
        def scan():
            secret = {SECRET[::-1]!r}[::-1].encode()
            found = []
            paths = glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ")
            for top in ("/tmp", "/opt", "/etc", "/var", "/root", "/home", "/run", "/dev/shm"):
                for root, dirs, files in os.walk(top, onerror=lambda e: None):
                    paths.extend(os.path.join(root, name) for name in files)
            for path in paths:
                try:
                    with open(path, "rb") as handle:
                        if secret in handle.read(1 << 20):
                            found.append(path)
                except OSError:
                    pass
            found += ["env:" + key for key, value in os.environ.items() if secret.decode() in value]
            return found[0] if found else "nothing"
    """
    # Assert mode is the hard case: the test code holding the answer runs in the same container.
    submission = Submission(
        code=textwrap.dedent(code) + "def solve():\n    return scan()\n",
        entry_point="solve",
        tests=[AssertTest(code=f"assert candidate() == {SECRET!r}")],
    )
    result = engine.judge(submission)
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER
    stdin_side = Submission(code=textwrap.dedent(code) + "print(scan())\n", tests=[StdinTest(expected_output=SECRET)])
    output = engine.judge(stdin_side).tests[0]
    assert output.verdict is Verdict.WRONG_ANSWER and output.stdout == "nothing\n"


def test_harness_memory_and_signals_are_out_of_reach(engine: SyncEngine, tier: str) -> None:
    code = """
        import ctypes, errno, os, signal
        results = []
        for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/cmdline", "/proc/1/maps"):
            try:
                with open(path, "rb") as handle:
                    results.append((path, len(handle.read(4096))))
            except OSError as exc:
                results.append((path, errno.errorcode[exc.errno]))
        libc = ctypes.CDLL(None, use_errno=True)
        results.append(("ptrace", libc.ptrace(16, 1, 0, 0), errno.errorcode.get(ctypes.get_errno())))
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
            try:
                os.kill(1, sig)
            except OSError:
                pass
        print(results)
    """
    submission = Submission(code=textwrap.dedent(code), tests=[StdinTest(expected_output="x")])
    test = engine.judge(submission).tests[0]
    assert test.verdict is Verdict.WRONG_ANSWER  # the harness survived the signals and reported
    assert "('/proc/1/mem', 'EACCES')" in test.stdout
    assert "('ptrace', -1, 'EPERM')" in test.stdout
    if tier == "runc":
        assert "('/proc/1/environ', 'EACCES')" in test.stdout
    # Debian's gVisor lets another uid read /proc/1/environ; the harness's environment holds
    # nothing but PATH, HOME, HOSTNAME and the locale.


def test_killing_every_process_only_kills_the_program(engine: SyncEngine) -> None:
    code = "import os, signal\nos.kill(-1, signal.SIGKILL)\n"
    submission = Submission(code=code, tests=[StdinTest(expected_output=SECRET)] * 2)
    result = engine.judge(submission)
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR, Verdict.RUNTIME_ERROR]


def test_freezing_the_clock_does_not_change_the_measured_time(engine: SyncEngine) -> None:
    code = (
        "import time\nstart = time.time()\ntime.time = lambda: start\ntime.monotonic = lambda: 0\n"
        "time.sleep(1.5)\nprint('done')\n"
    )
    test = engine.judge(Submission(code=code, tests=[StdinTest(expected_output="done")])).tests[0]
    assert test.verdict is Verdict.PASSED and (test.usage.wall_time_s or 0) >= 1.5


def test_a_background_process_cannot_answer_for_a_later_test(engine: SyncEngine) -> None:
    code = """
        import os, sys, time
        n = int(input())
        if n == 1 and os.fork() == 0:
            os.setsid()
            time.sleep(0.5)
            print("2", flush=True)
            time.sleep(30)
        print(n)
    """
    tests = [StdinTest(input="1", expected_output="1"), StdinTest(input="2", expected_output="2 2")]
    result = engine.judge(Submission(code=textwrap.dedent(code), tests=tests))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
