"""White-box attacks: each one was written by reading our own code (the harness, the codec,
the comparators, the runtimes, the data set reader) and aims at one weakness found that way.

They run on every sandbox this machine provides (see ``conftest.py``). A test here passes when
the attack fails: the wrong program is not passed, the run is not crashed, nothing crosses
from one test or container to another.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, cast

import pytest
from sandboxes import Sandbox

from engine import AssertTest, CallTest, Limits, RunTest, StdinTest, Submission, SubmissionResult, SyncEngine, Verdict
from engine.compat import prime_code
from engine.judge._datasets import to_submission

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


def verdicts(result: SubmissionResult) -> list[Verdict]:
    return [test.verdict for test in result.tests]


def storable(result: SubmissionResult) -> None:
    """A result must always serialise to valid UTF-8 JSON, whatever the program produced."""
    json.loads(result.model_dump_json())
    json.dumps(result.model_dump(mode="json"), ensure_ascii=False, allow_nan=False).encode("utf-8")


# -- 1. assert tests resolve names through the program ----------------------------------------------------------

SHADOWING_PROGRAM = """
def range(*args):
    return []
def abs(x):
    return 0
def sorted(*args, **kwargs):
    return [1, 4]
def all(*args):
    return True
def len(*args):
    return 3
def square(x):
    return -1
"""
SHADOWED_TEST = """
def check(candidate):
    for i in range(5):
        assert abs(candidate(i) - i * i) == 0
    assert sorted([candidate(2), candidate(1)]) == [1, 4]
    assert all([candidate(i) >= 0 for i in [1, 2]])
    assert len([candidate(1)]) == 1
check(candidate)
"""


def test_a_program_cannot_redefine_the_builtins_the_test_code_uses(engine: SyncEngine) -> None:
    wrong = Submission(code=SHADOWING_PROGRAM, entry_point="square", tests=[AssertTest(code=SHADOWED_TEST)])
    assert verdicts(engine.judge(wrong)) == [Verdict.WRONG_ANSWER]
    right = SHADOWING_PROGRAM.replace("return -1", "return x * x")
    honest = Submission(code=right, entry_point="square", tests=[AssertTest(code=SHADOWED_TEST)])
    assert verdicts(engine.judge(honest)) == [Verdict.PASSED]


def test_a_program_cannot_end_the_iteration_the_test_code_runs(engine: SyncEngine) -> None:
    # StopIteration raised inside map() ends the map: all() of nothing is True.
    code = "def square(x):\n    raise StopIteration\n"
    test = AssertTest(code="assert all(map(lambda x: candidate(x) == x * x, range(5)))")
    result = engine.judge(Submission(code=code, entry_point="square", tests=[test]))
    assert verdicts(result) == [Verdict.RUNTIME_ERROR]


CYCLIC = {
    "task_id": "cyclic",
    "prompt": 'def encode(s):\n    return s[1:] + s[:1]\n\n\ndef decode(s):\n    """Undo encode."""\n',
    "test": "def check(candidate):\n    for s in ['abc', 'hello', 'xy']:\n        assert candidate(encode(s)) == s\n",
    "entry_point": "decode",
}


def test_a_completion_cannot_redefine_the_helpers_of_its_prompt(engine: SyncEngine) -> None:
    # HumanEval/38 and /50 test the entry point through a helper of the prompt; a completion
    # that redefines the helper as the identity (and the entry point too) must not pass.
    cheat = to_submission({**CYCLIC, "completion": "    return s\n\n\ndef encode(s):\n    return s\n"}, "cheat")
    honest = to_submission({**CYCLIC, "completion": "    return s[-1:] + s[:-1]\n"}, "honest")
    assert [r.verdict for r in engine.judge_many([cheat, honest])] == [Verdict.WRONG_ANSWER, Verdict.PASSED]


# -- 2. integers compared with float tolerance --------------------------------------------------------------


def test_an_integer_answer_is_matched_exactly(engine: SyncEngine) -> None:
    def stdin_case(printed: str, expected: str) -> Submission:
        return Submission(code=f"print({printed!r})", tests=[StdinTest(expected_output=expected)])

    def call_case(returned: str, expected: object) -> Submission:
        return Submission(code=f"def f():\n    return {returned}\n", fn_name="f", tests=[CallTest(expected=expected)])

    wrong = [
        stdin_case("999999000.0", "999999999"),
        stdin_case(str(float(10**18)), str(10**18 + 12345)),
        stdin_case("1e+18", str(10**18 + 12345)),
        stdin_case("1e400", "2e400"),  # both overflow a float: equal as floats, not as numbers
        call_case("999999000.0", 999999999),
        call_case("float(10**18)", 10**18 + 12345),
        call_case("10**400", 1.5),
    ]
    right = [
        stdin_case("5.000", "5"),  # the exact value, written another way
        stdin_case("-0", "0"),
        stdin_case("0.1000001", "0.1"),  # tolerance is for answers that are not integers
        call_case("2.0", 2),
        call_case("10**30", 10**30),
    ]
    results = engine.judge_many(wrong + right)
    assert [r.verdict for r in results] == [Verdict.WRONG_ANSWER] * len(wrong) + [Verdict.PASSED] * len(right)


# -- 3. an oracle across submissions ------------------------------------------------------------------------

# A wrong first answer, then a second test that sleeps: if the container were stopped at the
# wrong answer, the program would learn that its answer was wrong.
ORACLE = "import time\nif input() == '1':\n    time.sleep(2)\nprint('wrong')\n"


def test_early_stopping_never_reaches_the_container(engine: SyncEngine) -> None:
    submission = Submission(
        code=ORACLE,
        tests=[StdinTest(input="0", expected_output="right"), StdinTest(input="1", expected_output="x")],
        stop_on_first_failure=True,
    )
    result = engine.judge(submission)
    assert verdicts(result) == [Verdict.WRONG_ANSWER, Verdict.SKIPPED]
    assert result.wall_time_s >= 2.0, "the second test was not run: the container saw the verdict"


def test_prime_early_stopping_never_reaches_the_container(engine: SyncEngine) -> None:
    prime_code.configure(engine)
    try:
        started = time.monotonic()
        results, _ = prime_code.check_correctness({"inputs": ["0\n", "1\n"], "outputs": ["right\n", "x\n"]}, ORACLE, 5)
        elapsed = time.monotonic() - started
    finally:
        prime_code.configure(None)
    assert results == [False]
    assert elapsed >= 2.0, "the second test was not run: the container saw the verdict"


def test_apps_early_stopping_never_reaches_the_container(engine: SyncEngine) -> None:
    from engine.compat.reward_kit import apps_coding_reward

    apps_coding_reward.configure(engine)
    try:
        started = time.monotonic()
        truth = {"inputs": ["0\n", "1\n"], "outputs": ["right\n", "x\n"]}
        messages = [{"role": "assistant", "content": f"```python\n{ORACLE}```"}]
        result = apps_coding_reward.evaluate_apps_solution(messages=messages, ground_truth=truth)
        elapsed = time.monotonic() - started
    finally:
        apps_coding_reward.configure(None)
    assert result.metrics["raw_results"].reason == "[false]"
    assert elapsed >= 2.0, "the second test was not run: the container saw the verdict"


# -- 4. a test can change the process that forks the next tests ---------------------------------------------

TAMPER = """
import ctypes, os
state = bytearray(b"A")
address = ctypes.addressof((ctypes.c_char * 1).from_buffer(state))
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
made_dumpable = libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0

def f(attack):
    seen = state.decode()
    tried = []
    if attack:
        for how in ("mem", "fd"):
            try:
                if how == "mem":
                    with open(f"/proc/{os.getppid()}/mem", "r+b", buffering=0) as memory:
                        memory.seek(address)
                        memory.write(b"B")
                else:
                    os.listdir(f"/proc/{os.getppid()}/fd")
                tried.append(how + ":open")
            except OSError as exc:
                tried.append(how + ":" + type(exc).__name__)
    return [seen, made_dumpable, tried]
"""


def test_a_test_cannot_reach_the_process_that_forks_the_next(engine: SyncEngine, tier: str) -> None:
    submission = Submission(
        code=TAMPER,
        fn_name="f",
        tests=[CallTest(args=[True], expected=["A", False, []]), CallTest(args=[False], expected=["A", False, []])],
    )
    result = engine.judge(submission)
    # Both tests must have returned: a crash or a sandbox error says nothing of the attack.
    outcomes = [(test.verdict, test.detail) for test in result.tests]
    assert all(test.returned is not None for test in result.tests), outcomes
    first, second = (cast("list[Any]", test.returned) for test in result.tests)
    assert second[0] == "A", "the first test changed the state the second one was forked from"
    assert first[1] is False, "the program made its process dumpable again"
    assert "mem:PermissionError" in first[2], first[2]
    # gVisor lets a test list its parent's descriptors (not open its memory): they are the
    # test's own, inherited at the fork, so that shows it nothing it does not hold already.
    assert "fd:PermissionError" in first[2] or tier == "gvisor", first[2]


# -- 5. every container shares one host uid; 7. OCI containers share one root ------------------------------

HOLDER = """
import ctypes, fcntl, json, os, select, time
libc = ctypes.CDLL(None, use_errno=True)
instances = [fd for fd in (libc.inotify_init1(0) for _ in range(120)) if fd >= 0]
pipes = []
for _ in range(200):
    try:
        reader, writer = os.pipe()
        fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 1 << 20)
        pipes.append((reader, writer))
    except OSError:
        break
shared = open("/usr/bin/python3", "rb")
fcntl.flock(shared, fcntl.LOCK_EX)
watch = libc.inotify_init1(0)
libc.inotify_add_watch(watch, b"/etc/debian_version", 0x20 | 0x1)  # IN_OPEN | IN_ACCESS
time.sleep(float(input()))
poller = select.poll()
poller.register(watch, select.POLLIN)
events = len(poller.poll(0))
print(json.dumps({"instances": len(instances), "pipes": len(pipes), "events": events}))
"""
PROBER = """
import ctypes, fcntl, json, os, time
time.sleep(float(input()))
libc = ctypes.CDLL(None, use_errno=True)
instances = [fd for fd in (libc.inotify_init1(0) for _ in range(100)) if fd >= 0]
reader, writer = os.pipe()
default_pipe = fcntl.fcntl(writer, fcntl.F_GETPIPE_SZ)
try:
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 1 << 20)
    big_pipe = True
except OSError:
    big_pipe = False
shared = open("/usr/bin/python3", "rb")
try:
    fcntl.flock(shared, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock = "free"
except OSError:
    lock = "held elsewhere"
open("/etc/debian_version").read()
print(json.dumps({"instances": len(instances), "default_pipe": default_pipe, "big_pipe": big_pipe, "lock": lock}))
"""
ROOMY = Limits(open_files=1024, wall_time_s=8)


def test_concurrent_containers_share_no_kernel_accounting_or_files(engine: SyncEngine) -> None:
    holder = Submission(code=HOLDER, tests=[RunTest(stdin="4")], limits=ROOMY)
    prober = Submission(code=PROBER, tests=[RunTest(stdin="1.5")], limits=ROOMY)
    held, probed = engine.judge_many([holder, prober])
    assert held.ok and probed.ok, (held.tests[0].stderr[-500:], probed.tests[0].stderr[-500:])
    holder_facts, prober_facts = json.loads(held.tests[0].stdout), json.loads(probed.tests[0].stdout)
    assert holder_facts["instances"] == 120 and holder_facts["pipes"] > 0
    # Inotify instances and pipe buffers are counted per user: a shared uid would leave the
    # prober 8 instances and one-page pipes.
    assert prober_facts["instances"] == 100
    assert prober_facts["default_pipe"] == 65536 and prober_facts["big_pipe"] is True
    # One root directory shared by both would carry the lock and the file event across.
    assert prober_facts["lock"] == "free"
    assert holder_facts["events"] == 0


def test_each_container_runs_as_its_own_unprivileged_user(engine: SyncEngine) -> None:
    code = "import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n"
    results = engine.judge_many([Submission(code=code, tests=[RunTest()]) for _ in range(4)])
    identities = [r.tests[0].stdout.split()[0] for r in results]
    assert len(set(identities)) == 4, identities
    assert all(int(uid) not in (0, 65534) for uid in identities)


# -- 6. cleanup between tests is incomplete --------------------------------------------------------------------

LEFTOVERS = """
import json, os
if input() == "leave":
    for top in (os.getcwd(), "/tmp", "/dev/shm"):
        os.chdir(top)
        for _ in range(20):  # 5 KB of path: deeper than PATH_MAX
            os.mkdir("d" * 250)
            os.chdir("d" * 250)
        open("bottom", "w").write("x")
        os.chmod(".", 0)
    print("left")
else:
    print(json.dumps([top for top in (".", "/tmp", "/dev/shm") if os.path.lexists(os.path.join(top, "d" * 250))]))
"""
# Objects no runtime lets the harness list and remove everywhere (gVisor shows neither
# /proc/sysvipc nor /dev/mqueue): the sandbox refuses to create them at all.
IPC = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
IPC_CREAT = 0o1000
created = [libc.shmget(0x5EC7, 4096, IPC_CREAT | 0o600), libc.msgget(0x5EC8, IPC_CREAT | 0o600),
           libc.semget(0x5EC9, 1, IPC_CREAT | 0o600), rt.mq_open(b"/airlock-left", os.O_CREAT | os.O_RDWR, 0o600, None)]
print(json.dumps(created))
"""


def test_nothing_a_test_leaves_survives_into_the_next(engine: SyncEngine) -> None:
    tests = [RunTest(stdin="leave", expected_stdout="left"), RunTest(stdin="look", expected_stdout="[]")]
    result = engine.judge(Submission(code=LEFTOVERS, tests=tests, limits=Limits(wall_time_s=20)))
    assert verdicts(result) == [Verdict.PASSED, Verdict.PASSED], [t.stdout for t in result.tests]
    refused = engine.judge(Submission(code=IPC, tests=[RunTest(expected_stdout="[-1, -1, -1, -1]")]))
    assert refused.ok, refused.tests[0].stdout


# The program owns its folder and its source (it runs as the harness's user, or is handed them):
# ways for one test to leave state in them for the next.
OWN_FILES = """
import json, os, sys
source = os.path.abspath(sys.argv[0])
folder = os.path.dirname(source)
root = os.path.dirname(folder)
way = input().split()
if way[0] == "leave":
    if way[1] == "folders":
        for place in (folder, root):
            os.setxattr(place, "user.mark", b"left")
            os.utime(place, (1234567, 1234567))
    elif way[1] == "rewrite":  # the same size, at once: only the file's change time tells
        text = open(source).read()
        open(source, "r+").write(text.replace("leave", "LEAVE"))
    elif way[1] == "attribute":
        os.setxattr(source, "user.mark", b"left")
    elif way[1] == "mode":
        os.chmod(source, 0o640)
    elif way[1] == "times":
        os.utime(source, (7654321, 7654321))
    elif way[1] == "link":
        os.link(source, os.path.join(os.getcwd(), "kept"))
    elif way[1] == "replace":
        open(source + ".new", "w").write(open(source).read() + "#")
        os.replace(source + ".new", source)
    print("left")
else:
    found = []
    for place in (folder, root, source):
        try:
            found.append([place, os.getxattr(place, "user.mark").decode()])
        except OSError:
            pass
    found += [place for place in (folder, root) if os.stat(place).st_mtime in (1234567, 7654321)]
    print(json.dumps(found))
"""


def test_a_test_leaves_no_state_in_the_programs_own_folder(engine: SyncEngine) -> None:
    tests = [RunTest(stdin="leave folders", expected_stdout="left"), RunTest(stdin="look", expected_stdout="[]")]
    result = engine.judge(Submission(code=OWN_FILES, tests=tests))
    assert verdicts(result) == [Verdict.PASSED, Verdict.PASSED], [t.stdout for t in result.tests]


# One name of each kind, in every place a test can write beside its working directory. The scrub
# skips reading a directory whose size (tmpfs counts its entries in it) says it holds only what it
# keeps: a single name of any kind must count.
ONE_NAME_LEFT = """
import json, os, socket, sys
folder = os.path.dirname(os.path.abspath(sys.argv[0]))
places = [folder, os.path.dirname(folder), "/tmp", "/dev/shm"]
expected = {places[0]: [os.path.basename(sys.argv[0])], places[1]: ["program", "work"], places[3]: []}
expected["/tmp"] = [os.path.basename(places[1])]
kind = input().split()
if kind[0] == "leave":
    for index, place in enumerate(places):
        name = os.path.join(place, "left")
        # A second name, or a name moved in, comes from the working directory (another file
        # system than /dev/shm, which gets a plain file).
        if kind[1] == "file" or place == "/dev/shm" and kind[1] in ("link", "moved"):
            open(name, "w").write("left")
        elif kind[1] in ("link", "moved"):
            made = f"made{index}"
            open(made, "w").write("left")
            (os.link if kind[1] == "link" else os.rename)(made, name)
        elif kind[1] == "symlink":
            os.symlink("anywhere", name)
        elif kind[1] == "fifo":
            os.mkfifo(name)
        elif kind[1] == "socket":
            socket.socket(socket.AF_UNIX).bind(name)
        elif kind[1] == "folder":
            os.mkdir(name)
    print("left")
else:
    found = {place: sorted(os.listdir(place)) for place in places}
    print(json.dumps({place: names for place, names in found.items() if names != expected[place]}))
"""


def test_no_name_a_test_leaves_survives_into_the_next(engine: SyncEngine) -> None:
    kinds = ("file", "link", "moved", "symlink", "fifo", "socket", "folder")
    submissions = [
        Submission(
            code=ONE_NAME_LEFT,
            tests=[RunTest(stdin=f"leave {kind}", expected_stdout="left"), RunTest(stdin="look", expected_stdout="{}")],
        )
        for kind in kinds
    ]
    left = {
        kind: [test.stdout for test in result.tests]
        for kind, result in zip(kinds, engine.judge_many(submissions), strict=True)
        if verdicts(result) != [Verdict.PASSED, Verdict.PASSED]
    }
    assert left == {}


def test_a_test_that_changes_the_programs_own_files_fails_the_tests_after(engine: SyncEngine, tier: str) -> None:
    ways = ("rewrite", "attribute", "mode", "times", "link", "replace")
    submissions = [
        Submission(code=OWN_FILES, tests=[RunTest(stdin=f"leave {way}", expected_stdout="left"), RunTest(stdin="look")])
        for way in ways
    ]
    unnoticed = {
        way: [test.stdout for test in result.tests]
        for way, result in zip(ways, engine.judge_many(submissions), strict=True)
        if verdicts(result) != [Verdict.PASSED, Verdict.RUNTIME_ERROR]
        or result.tests[1].error is None
        or result.tests[1].error.type != "ProgramChanged"
    }
    # gVisor changes no time of a file that gets a second name, and the scrub removes that name
    # (a test's working directory goes): nothing of it is left for the next test to notice.
    assert unnoticed == ({"link": ["left\n", "[]\n"]} if tier == "gvisor" else {})


STRAY_FOR_THE_WORKER = """
import json, os, signal, time

def f(step):
    if step == "leave":
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        time.sleep(0.2)
        # One process fewer beside the stray: the harness counts the sandbox's tasks to skip
        # its walk through /proc when only it and its worker are left.
        os.kill(os.getppid(), signal.SIGKILL)
        return "left"
    others = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) not in (1, os.getpid(), os.getppid()):
            others.append(int(pid))
    return others
"""


def test_a_stray_that_kills_the_worker_to_match_the_count_does_not_survive(engine: SyncEngine) -> None:
    tests = [CallTest(args=["leave"], expected="left"), CallTest(args=["look"], expected=[])]
    # The first test waits for a worker that is gone until its backstop: a short one.
    result = engine.judge(Submission(code=STRAY_FOR_THE_WORKER, fn_name="f", tests=tests, limits=Limits(time_s=2)))
    assert result.tests[1].verdict is Verdict.PASSED, (result.tests[1].returned, result.tests[1].detail)


# -- 8. the stdin comparator's number pattern backtracks quadratically ----------------------------------------


def test_a_pathological_output_delays_nobody(engine: SyncEngine) -> None:
    attacker = Submission(code="print('1' * 300_000 + 'x')", tests=[StdinTest(expected_output="1")])
    honest = Submission(
        code="print(int(input()) * 2)",
        tests=[StdinTest(input="21", expected_output="42")],
        limits=Limits(wall_time_s=2),
    )
    results = engine.judge_many([attacker, honest, honest, honest])
    assert [r.verdict for r in results] == [Verdict.WRONG_ANSWER] + [Verdict.PASSED] * 3


# -- 9. judging failures escape as exceptions; 12. result size ------------------------------------------------

NESTED = "def f():\n    value = []\n    for _ in range(300):\n        value = [value]\n    return value\n"


def test_values_that_break_a_naive_judge_become_verdicts(engine: SyncEngine) -> None:
    def call(body: str, expected: object = "x", **extra: object) -> Submission:
        return Submission(
            code=f"def f():\n{textwrap.indent(body, '    ')}\n",
            fn_name="f",
            tests=[CallTest(expected=expected)],
            **extra,
        )

    cases = {
        "digits-equal": (
            Submission(code="print('9' * 5000)", tests=[StdinTest(expected_output="9" * 5000)]),
            Verdict.PASSED,
        ),
        "digits-differ": (
            Submission(code="print('9' * 5000)", tests=[StdinTest(expected_output="8" + "9" * 4999)]),
            Verdict.WRONG_ANSWER,
        ),
        "overflow": (call("return 10**400", 1.5), Verdict.WRONG_ANSWER),
        "big-int": (call("import sys\nsys.set_int_max_str_digits(0)\nreturn 10**5000", 10**5000), Verdict.PASSED),
        "big-int-wrong": (
            call("import sys\nsys.set_int_max_str_digits(0)\nreturn 10**5000 + 1", 10**5000),
            Verdict.WRONG_ANSWER,
        ),
        "deep": (Submission(code=NESTED, fn_name="f", tests=[CallTest(expected=[])]), Verdict.RUNTIME_ERROR),
        "surrogate-value": (call("return '\\ud800'"), Verdict.WRONG_ANSWER),
        "surrogate-error": (call("raise ValueError('\\ud800' * 10)"), Verdict.RUNTIME_ERROR),
        "surrogate-print": (
            Submission(
                code="import sys\nsys.stdout.buffer.write(b'\\xed\\xa0\\x80\\xff')\n",
                tests=[StdinTest(expected_output="x")],
            ),
            Verdict.WRONG_ANSWER,
        ),
        "bytes": (call("return b'\\xff'"), Verdict.WRONG_ANSWER),
    }
    results = engine.judge_many(case for case, _ in cases.values())
    for name, result in zip(cases, results, strict=True):
        assert result.verdict is cases[name][1], (name, result.verdict, result.first_failure)
        storable(result)


def test_error_text_fits_any_output_budget(engine: SyncEngine) -> None:
    tiny = Limits(output_bytes=16)
    cases = [
        Submission(code="raise ValueError('\\x01' * 20000)", tests=[StdinTest(expected_output="x")], limits=tiny),
        Submission(
            code="def f():\n    raise ValueError('\U0001f600' * 20000)\n",
            fn_name="f",
            tests=[CallTest(expected=1)],
            limits=tiny,
        ),
    ]
    # The script's traceback goes to its stderr, which is held to output_bytes like any output;
    # the function's error travels in the report, whose size allows for errors whatever the limit.
    assert [r.verdict for r in engine.judge_many(cases)] == [Verdict.OUTPUT_LIMIT, Verdict.RUNTIME_ERROR]


def test_a_result_is_bounded_whatever_the_output(engine: SyncEngine) -> None:
    limits = Limits(output_bytes=16 * 2**20, memory_mb=1024, wall_time_s=60)
    code = "import sys\nsys.stdout.write('\\x01' * (16 * 2**20))\nsys.stderr.write('\\x02' * (16 * 2**20))\n"
    result = engine.judge(Submission(code=code, tests=[StdinTest(expected_output="x")], limits=limits))
    assert result.verdict is Verdict.WRONG_ANSWER
    assert result.tests[0].clipped
    assert len(result.model_dump_json()) < 1 << 20


# -- 10. a program can crash the harness and pick sandbox_error ------------------------------------------------

FORGE = r"""
import os, stat, struct
def frame(value):
    return b'{"op":"result","ok":true,"value":' + value + b'}'
PAYLOADS = {
    "inf": frame(b"1e999"),
    "nan": frame(b"NaN"),
    "digits": frame(b"9" * 5000),
    "deep": frame(b"[" * 100000 + b"]" * 100000),
    "utf8": frame(b'"\xff"'),
    "not-an-object": b"[1, 2]",
    "bad-tag": frame(b'{"$tuple": 5}'),
}
def f(kind):
    if kind == "honest":
        return "x"
    data = PAYLOADS[kind]
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">I", len(data)) + data)
        except OSError:
            pass
    os._exit(0)
"""
FORGE_KINDS = ["inf", "nan", "digits", "deep", "utf8", "not-an-object", "bad-tag"]


def test_nothing_the_program_sends_the_harness_crashes_it(engine: SyncEngine) -> None:
    tests = [CallTest(args=[kind], expected="x") for kind in [*FORGE_KINDS, "honest"]]
    result = engine.judge(Submission(code=FORGE, fn_name="f", tests=tests))
    assert verdicts(result) == [Verdict.RUNTIME_ERROR] * len(FORGE_KINDS) + [Verdict.PASSED], [
        (t.verdict, t.detail) for t in result.tests
    ]


def test_nothing_the_program_sends_makes_a_reward_function_raise(engine: SyncEngine) -> None:
    prime_code.configure(engine)
    try:
        for kind in FORGE_KINDS:
            in_outs = {"fn_name": "f", "inputs": [json.dumps(kind)], "outputs": [json.dumps("x")]}
            results, _ = prime_code.check_correctness(in_outs, FORGE, 5)
            assert results in ([-1], [False]), (kind, results)
    finally:
        prime_code.configure(None)


def test_big_integers_are_judged_in_every_mode(engine: SyncEngine) -> None:
    code = "import sys\nsys.set_int_max_str_digits(0)\ndef f(n):\n    return 10**n\n"
    call = Submission(code=code, fn_name="f", tests=[CallTest(args=[5000], expected=10**5000)])
    asserted = Submission(code=code, entry_point="f", tests=[AssertTest(code="assert candidate(5000) == 10**5000")])
    assert [r.verdict for r in engine.judge_many([call, asserted])] == [Verdict.PASSED, Verdict.PASSED]


# -- 11. data set input that stops the run; 9. airlock score aborts -----------------------------------------


def hostile_dataset(path: Path) -> int:
    honest = {"code": "print(input())", "tests": [{"kind": "stdin", "input": "1", "expected_output": "1"}]}
    lines = [
        json.dumps({**honest, "id": "before"}).encode(),
        b'{"id": "big-number", "code": "def f(x):\\n    return x", "fn_name": "f", "tests": [{"kind": "call", "args": ['
        + b"7" * 5000
        + b'], "expected": '
        + b"7" * 5000
        + b"}]}",
        # APPS and TACO keep input_output as a JSON string inside the record: read whole there too.
        json.dumps(
            {
                "id": "apps-big-number",
                "input_output": json.dumps({"fn_name": "f", "inputs": [["9" * 5000]], "outputs": [["9" * 5000]]}),
                "solutions": ["def f(x):\n    return x"],
            }
        )
        .replace('\\"' + "9" * 5000 + '\\"', "9" * 5000)
        .encode(),
        b'{"id": "too-long", "code": "def f(x):\\n    return x", "fn_name": "f", "tests": [{"kind": "call", "args": ['
        + b"7" * 1_000_001
        + b'], "expected": 1}]}',
        b'{"id": "deep", "code": "print(1)", "tests": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        json.dumps({**honest, "id": "lone-\ud800"}).encode(),
        json.dumps({**honest, "id": "cr"}).replace(', "tests"', ',\r"tests"').encode(),
        b'{"id": "not-utf8", "code": "print(\xff)", "tests": []}',
        json.dumps(
            {
                "id": "overflow",
                "code": "def f():\n    return 10**400",
                "fn_name": "f",
                "tests": [{"kind": "call", "expected": 1.5}],
            }
        ).encode(),
        json.dumps(
            {
                "id": "surrogate-out",
                "code": "def f():\n    raise ValueError('\\ud800')",
                "fn_name": "f",
                "tests": [{"kind": "call", "expected": 1}],
            }
        ).encode(),
        json.dumps({**honest, "id": "after"}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def test_every_data_set_line_gets_exactly_one_result(tmp_path: Path, sandbox_kind: Sandbox) -> None:
    source, output = tmp_path / "hostile.jsonl", tmp_path / "out.jsonl"
    count = hostile_dataset(source)
    command = [
        sys.executable,
        "-m",
        "engine",
        "score",
        str(source),
        "-o",
        str(output),
        "-q",
        *sandbox_kind.cli_flags(),
        "--details",
        "all",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    records = [json.loads(line) for line in output.read_bytes().split(b"\n") if line]
    assert [r["line"] for r in records] == list(range(1, count + 1))
    by_id = {r["id"]: r for r in records}
    passed = ("before", "after", "cr", "big-number", "apps-big-number")
    assert [by_id[name].get("verdict") for name in passed] == ["passed"] * len(passed), records
    assert by_id["overflow"]["verdict"] == "wrong_answer" and by_id["surrogate-out"]["verdict"] == "runtime_error"
    too_long, deep, not_utf8 = records[3], records[4], records[7]
    for record in (too_long, deep, not_utf8):
        assert "error" in record and "verdict" not in record, record
    assert "1000001 digits" in too_long["error"]
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(output.read_bytes().split(b"\n")) == count + 1


# -- 12. airlock run passes the program's terminal escapes to the operator's terminal ------------------------


def test_a_program_cannot_drive_the_operators_terminal(tmp_path: Path, sandbox_kind: Sandbox) -> None:
    program = tmp_path / "escape.py"
    program.write_text(
        "import sys\nprint('\\x1b]52;c;aGVsbG8=\\x07\\x1b]0;owned\\x07\\x1b[2Jvisible')\n"
        "print('\\x1b[31mred\\x9b2J', file=sys.stderr)\n"
    )
    pid, terminal = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-m", "engine", "run", str(program), *sandbox_kind.cli_flags()])
    seen = b""
    while True:
        ready, _, _ = select.select([terminal], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(terminal, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.waitpid(pid, 0)
    text = seen.decode("utf-8", errors="replace")
    assert "visible" in text and "red" in text
    for sequence in ("\x1b]52;", "\x1b]0;", "\x1b[2J", "\x1b[31m", "\x9b", "\x07"):
        assert sequence not in text, repr(sequence)


# -- 13. the first worker is a fork of the harness ------------------------------------------------------------

SECRET_PREFIX = "airlock-whitebox-secret-"
MEMORY_AND_DESCRIPTORS = f"""
import ctypes, json, os, re, time
PREFIX = {SECRET_PREFIX!r}.encode()
CONTROL = PREFIX + b"c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"  # in the source: shows that the scan works

def probe():
    # Undumpable, the process cannot open its own /proc/self/mem: it reads its memory directly,
    # every readable private region that no file backs (the heap, the stacks, anonymous maps).
    found = set()
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if not fields[1].startswith("r") or (len(fields) > 5 and fields[5] not in ("[heap]", "[stack]")):
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        data = ctypes.string_at(start, end - start)
        found.update(m.group(1).decode() for m in re.finditer(re.escape(PREFIX) + rb"([0-9a-f]{{32}})", data))
    descriptors = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            descriptors.append(os.readlink(f"/proc/self/fd/{{fd}}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    print(json.dumps([sorted(found), sorted(descriptors)]))
    return True

def sleep_forever():
    time.sleep(60)
"""


def test_the_forked_worker_holds_nothing_of_the_request_or_the_harness(engine: SyncEngine) -> None:
    """The first worker is forked from the harness before the request is read: the program must
    find neither the test code (its expected answers) in its memory, nor the harness's stdin
    (the request) or its report among its descriptors. The first probe runs in that worker; the
    last, after a timeout took it down, in a fresh interpreter started after the request came."""
    secret = os.urandom(16).hex()
    tests = [
        AssertTest(code=f"assert probe()  # {SECRET_PREFIX}{secret}"),
        AssertTest(code="sleep_forever()"),
        AssertTest(code=f"assert probe()  # {SECRET_PREFIX}{secret}"),
    ]
    result = engine.judge(Submission(code=MEMORY_AND_DESCRIPTORS, tests=tests, limits=Limits(wall_time_s=3)))
    first, timed_out, fresh = result.tests
    assert timed_out.verdict == "timeout", timed_out
    for probe in (first, fresh):
        assert probe.verdict == "passed", probe
        found, descriptors = json.loads(probe.stdout)
        assert "c0" * 16 in found, f"the scan did not see the program's own memory: {found}"
        assert secret not in found, "the test code reached the program's memory"
        assert not [d for d in descriptors if d.startswith("pipe:")], descriptors
        assert len([d for d in descriptors if d.startswith("socket:")]) <= 1, descriptors
