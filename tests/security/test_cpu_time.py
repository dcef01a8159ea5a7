"""The time limit is CPU time, and no program escapes its count: threads, children, a daemon that
does the work while the test waits, all count (the container's cgroup counter; where there is
none, as under gVisor, every process below the harness). A program that sleeps meets the
wall-clock backstop instead, and every test reports the CPU time it used, timeouts included."""

from __future__ import annotations

import pytest

from engine import Limits, RunTest, StdinTest, Submission, SyncEngine, Verdict

pytestmark = pytest.mark.docker

# A generous backstop: what must stop these programs is their CPU time.
ONE_SECOND = Limits(time_s=1, wall_time_s=12)

ESCAPES = {
    "threads": (
        "c",
        "#include <pthread.h>\n"
        "static void *spin(void *arg) { volatile unsigned long n = 0; for (;;) n++; return arg; }\n"
        "int main(void) { pthread_t t[4]; for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, spin, 0);\n"
        "  pthread_join(t[0], 0); return 0; }\n",
    ),
    "children": (
        "python",
        "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        while True: pass\nos.wait()\n",
    ),
    "a daemon it waits for": (
        "python",
        "import os, time\n"
        "read, write = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        end = time.process_time() + 5\n"
        "        while time.process_time() < end: pass\n"
        "        os.write(write, b'done')\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print(os.read(read, 4).decode())\n",
    ),
    # The test waits for the daemon's own CPU count, not a wall-clock span: on a loaded host
    # a daemon can get a fifth of a core, and a span would end before it spent its second.
    "a daemon left behind": (
        "python",
        "import os, time\n"
        "read, write = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    daemon = os.fork()\n"
        "    if daemon == 0:\n"
        "        while True: pass\n"
        "    os.write(write, str(daemon).encode())\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "daemon = int(os.read(read, 16))\n"
        "def cpu_s():\n"
        "    fields = open(f'/proc/{daemon}/stat').read().rsplit(')', 1)[1].split()\n"
        "    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')\n"
        "while cpu_s() < 2: time.sleep(0.05)\n"
        "print('done')\n",
    ),
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_no_program_escapes_the_cpu_count(engine: SyncEngine, tier: str, language_images: None, escape: str) -> None:
    language, code = ESCAPES[escape]
    submission = Submission(
        language=language,
        code=code,
        tests=[RunTest(expected_stdout="done\n")],
        limits=ONE_SECOND,
    )
    (test,) = engine.judge(submission).tests
    assert test.verdict is Verdict.TIMEOUT, test
    # gVisor's own count of busy threads under the quota runs ahead of the meter's, whose readings
    # no count may push past the quota: its fence may end the program first (Clock.fenced).
    fenced = tier == "gvisor" and "fence of 3 s ended the program" in (test.detail or "")
    assert test.usage.cpu_time_s is not None and (test.usage.cpu_time_s >= 1.0 or fenced), test
    assert test.usage.wall_time_s is not None and test.usage.wall_time_s < ONE_SECOND.wall_time_s, test.usage
    assert test.detail is not None and "CPU time limit of 1 s" in test.detail, test.detail


def test_a_program_ended_by_the_kernels_cpu_fence_is_a_timeout_that_names_it(engine: SyncEngine) -> None:
    """Where the kernel's count of a process's time runs ahead of the meter (gVisor's, for busy
    threads under the quota), the fence past the limit ends the program first: that is a timeout,
    never a runtime error. Here the program lowers its own fence, which it may (it picks a failure
    either way)."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (1, resource.getrlimit(resource.RLIMIT_CPU)[1]))\n"
        "while True: pass\n"
    )
    result = engine.judge(Submission(code=code, tests=[StdinTest(expected_output="")], limits=Limits(time_s=4)))
    (test,) = result.tests
    assert test.verdict is Verdict.TIMEOUT, test
    assert test.detail is not None and "per-process fence of 6 s ended the program" in test.detail, test.detail
    assert test.usage.cpu_time_s is not None and test.usage.cpu_time_s < 4, test.usage


def test_a_program_that_sleeps_meets_the_backstop(engine: SyncEngine) -> None:
    tests = [StdinTest(expected_output="")]
    result = engine.judge(Submission(code="import time\ntime.sleep(30)", tests=tests, limits=Limits(time_s=1)))
    (test,) = result.tests
    assert test.verdict is Verdict.TIMEOUT
    assert test.detail is not None and "wall-clock backstop of 3 s" in test.detail, test.detail
    assert test.usage.cpu_time_s is not None and test.usage.cpu_time_s < 0.5, test.usage
    assert test.usage.wall_time_s is not None and 3 <= test.usage.wall_time_s < 10, test.usage


def test_every_test_reports_its_cpu_time(engine: SyncEngine) -> None:
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\nprint('ok')"
    tests = [StdinTest(expected_output="ok")] * 2
    result = engine.judge(Submission(code=busy, tests=tests, limits=Limits(time_s=2)))
    assert result.ok, result
    for test in result.tests:
        assert test.usage.cpu_time_s is not None and 0.25 <= test.usage.cpu_time_s < 1.0, test.usage
