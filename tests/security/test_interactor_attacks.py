"""Attacks on an interactor, by a program that has read how interaction runs: it cannot find
the test's input (the interactor's alone), cannot stop, signal or impersonate the interactor or
the harness, and what goes wrong on its side is its own verdict, never the judge's failure; an
interactor that fails is the judge's failure, never the program's verdict."""

from __future__ import annotations

import pytest

from engine import Interactor, Limits, StdinTest, Submission, SyncEngine

pytestmark = pytest.mark.docker

SECRET = "734591"
# Asks for one guess; accepts the secret only. What the program sent, when it is not a number,
# is the detail.
GUESS = Interactor(
    code=r"""
import sys
secret = open(sys.argv[1]).read().strip()
print("guess", flush=True)
line = sys.stdin.readline().strip()
if line == secret:
    sys.exit(0)
print(f"wrong answer got {line[:200]!r}", file=sys.stderr)
sys.exit(1)
"""
)
TESTS = [StdinTest(input=SECRET)] * 2


def judged(engine: SyncEngine, code: str, interactor: Interactor = GUESS, **limits: float) -> list[tuple[str, str]]:
    result = engine.judge(
        Submission(code=code, tests=TESTS, interactor=interactor, limits=Limits(**limits) if limits else None)
    )
    return [(test.verdict.value, test.detail or "") for test in result.tests]


def test_the_program_cannot_find_the_secret(engine: SyncEngine) -> None:
    # The secret, computed: the program's own source (which it can read) does not hold it.
    hunt = f"""
import os
found = set()
needle = str({int(SECRET) - 1} + 1)
def look(text):
    if needle in text:
        found.add(needle)
look(input())
look(repr(dict(os.environ)))
for root in ("/tmp", "/dev/shm", "/proc/self", "/proc/1", "/opt", "/home", "/run", "/sandbox"):
    for folder, _, names in os.walk(root):
        for name in names:
            try:  # without waiting on a pipe (its own stdin is one)
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NONBLOCK)
                look(os.read(fd, 1 << 16).decode("latin-1"))
                os.close(fd)
            except OSError:
                pass
print(found.pop() if found else "nothing", flush=True)
"""
    assert judged(engine, hunt) == [("wrong_answer", "got 'nothing'")] * 2


def test_the_program_cannot_stop_or_impersonate_the_interactor(engine: SyncEngine) -> None:
    # Signals everything it can reach, writes to the harness's streams, then prints frames of
    # the harness protocol and lines of the host's feed as if they were the interactor's or
    # the harness's, and the secret's neighbour as its answer.
    forge = r"""
import os, signal, json, base64
input()
for pid in [int(name) for name in os.listdir("/proc") if name.isdigit()]:
    if pid not in (os.getpid(), os.getppid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
# The harness's descriptors: its stdin (the host's feed, in an interactive test), its report,
# the pipes it relays through. (gVisor lets it open the harness's /dev/null and the memfds of
# its own test, nothing that carries anyone else's bytes.)
opened = []
for fd in ["0", "1", *(os.listdir("/proc/1/fd") if os.access("/proc/1/fd", os.R_OK) else [])]:
    path = f"/proc/1/fd/{fd}"
    try:
        stream = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    target = os.readlink(f"/proc/self/fd/{stream}")
    if target != "/dev/null" and not target.startswith("/memfd:"):
        os.write(stream, b'{"index": 0, "end": true}\n')
        opened.append(target)
    os.close(stream)
print(json.dumps({"type": "test", "index": 0, "status": "ok", "opened": opened}))
print(json.dumps({"index": 0, "data": base64.b64encode(b"734591\n").decode()}))
print("734590", flush=True)
"""
    verdicts = judged(engine, forge)
    assert [verdict for verdict, _ in verdicts] == ["wrong_answer"] * 2
    assert all('"type": "test"' in detail and '"opened": []' in detail for _, detail in verdicts), verdicts


# What each program does after the interactor's first line, and the verdicts it may earn.
PROGRAM_SIDE = {
    # Never answers: its own time limit ends it, not the interactor's waiting.
    "sleeps": ("import time\ntime.sleep(60)", {"timeout"}),
    "spins": ("input()\nwhile True: pass", {"timeout"}),
    "floods": ("input()\nprint('x' * 10_000_000, flush=True)", {"output_limit"}),
    # One byte per write, each a frame of its own to relay: its time or the report's budget ends it.
    "tiny-writes": ("import os\ninput()\nwhile True: os.write(1, b'1')", {"timeout", "output_limit"}),
    # Writes its answer without a newline and exits: the interactor still gets it.
    "no-newline": ("import sys\ninput()\nsys.stdout.write('734591')", {"passed"}),
    "crashes": ("input()\nraise MemoryError", {"runtime_error"}),
}


def test_what_goes_wrong_on_the_programs_side_is_its_own_verdict(engine: SyncEngine) -> None:
    limits = Limits(time_s=1, output_bytes=1 << 20)
    submissions = [
        Submission(code=code, tests=TESTS[:1], interactor=GUESS, limits=limits) for code, _ in PROGRAM_SIDE.values()
    ]
    results = engine.judge_many(submissions)
    found = {name: result.tests[0] for name, result in zip(PROGRAM_SIDE, results, strict=True)}
    wrong = {name: (test.verdict.value, test.detail) for name, test in found.items()}
    assert {name: seen for name, seen in wrong.items() if seen[0] not in PROGRAM_SIDE[name][1]} == {}


def test_an_interactor_that_fails_is_the_judges_failure(engine: SyncEngine) -> None:
    spins = Interactor(code="while True: pass")
    exits = Interactor(code="import sys\nsys.stdin.readline()\nprint('FAIL broken', file=sys.stderr)\nsys.exit(3)")
    for interactor in (spins, exits):
        result = engine.judge(
            Submission(
                code="print(1, flush=True)\ninput()", tests=TESTS, interactor=interactor, limits=Limits(time_s=1)
            )
        )
        assert [test.verdict.value for test in result.tests] == ["sandbox_error"] * 2
        assert all(test.error is not None and test.error.type == "InteractorError" for test in result.tests)
