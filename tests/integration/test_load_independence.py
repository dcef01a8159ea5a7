"""A verdict does not depend on how busy the machine is: the same programs judged alone and judged
twelve at a time beside two CPU hogs get the same verdicts, for every program that uses at most
40% of its CPU time limit (and for one far past it). ``scripts/bench load`` measures the same on
a whole data set. Nor on how busy the disk is: a program kept waiting for its reads is given that
time back."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandboxes import OCI, Sandbox, ids

from engine import CaseResult, Limits, Settings, StdinTest, Submission, SyncEngine, Verdict

pytestmark = pytest.mark.docker

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('ok')"


def _hog() -> None:
    while True:
        pass


@contextlib.contextmanager
def hogs() -> Iterator[None]:
    """One process spinning per core, as a trainer's data loaders do beside the reward."""
    spinning = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(max(1, multiprocessing.cpu_count()))]
    for process in spinning:
        process.start()
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.join()


def submissions() -> list[Submission]:
    limits = Limits(time_s=1)
    chosen = [0.4] * 8 + [0.05] * 3 + [3.0]
    return [
        Submission(
            id=str(seconds), code=BUSY.format(seconds=seconds), tests=[StdinTest(expected_output="ok")], limits=limits
        )
        for seconds in chosen
    ]


def test_verdicts_are_the_same_quiet_and_loaded() -> None:
    with SyncEngine(Settings(max_concurrency=1, pool_size=0)) as engine:
        quiet = engine.judge_many(submissions())
    with hogs(), SyncEngine(Settings(max_concurrency=12, pool_size=0)) as engine:
        loaded = engine.judge_many(submissions())
    assert [r.verdict.value for r in quiet] == ["passed"] * 11 + ["timeout"]
    # Only the programs judged differently, whole (a long list is cut short in the report).
    differ = [
        (r.id, r.verdict.value, r.tests[0].usage, r.tests[0].detail, r.error)
        for r, alone in zip(loaded, quiet, strict=True)
        if r.verdict is not alone.verdict
    ]
    assert not differ, differ
    for result in loaded[:8]:
        assert result.tests[0].usage.cpu_time_s is not None and result.tests[0].usage.cpu_time_s < 0.6


# Names itself and naps until the test has slowed its container's disk (a read then takes a
# quarter of a second), then reads past the page cache, using next to no CPU: {blocks} reads more,
# or without end.
WAITS_FOR_THE_DISK = r"""
import ctypes, itertools, mmap, os, sys, time
ctypes.CDLL(None).prctl(15, b"{name}", 0, 0, 0)
binary = os.open(os.path.realpath(sys.executable), os.O_RDONLY | os.O_DIRECT)
buffer = mmap.mmap(-1, 1 << 16)
def read(block):
    started = time.monotonic()
    os.preadv(binary, [buffer], (block % 16) << 16)
    return time.monotonic() - started
while read(0) < 0.1:
    time.sleep(0.05)
for block in itertools.islice(itertools.count(), {blocks}):
    read(block)
print("ok")
"""
THROTTLE_BPS = 256 * 1024


def throttle_the_disk_of(name: str, timeout_s: float = 10.0) -> None:
    """Find the process called ``name`` from the host and limit reads from this machine's disk in
    its container's blkio cgroup (that container's alone, for the beside part's sake)."""
    disk = os.stat("/var/lib").st_dev
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                    cgroup = next(
                        line.split(":", 2)[2]
                        for line in (entry / "cgroup").read_text().splitlines()
                        if line.split(":")[1] == "blkio"
                    )
                    device = f"{os.major(disk)}:{os.minor(disk)} {THROTTLE_BPS}"
                    Path(f"/sys/fs/cgroup/blkio{cgroup}/blkio.throttle.read_bps_device").write_text(device)
                    return
        time.sleep(0.01)
    raise AssertionError(f"no process called {name} appeared within {timeout_s} s")


# On gVisor the program's reads are its kernel's, done by the host's runsc, and no wait of them is
# the program's to see: the disk's waits are given back on the runc tier and the OCI runtime.
RUNC_KINDS = [Sandbox("docker", "runc"), OCI]


def judge_on_a_slow_disk(sandbox: Sandbox, blocks: int | None, limits: Limits) -> CaseResult:
    if Path("/proc/sys/kernel/task_delayacct").read_text().strip() != "1":
        pytest.fail("the kernel's delay accounting is off (scripts/setup turns it on: kernel.task_delayacct=1)")
    name = f"disk{os.getpid() % 100000}"
    code = WAITS_FOR_THE_DISK.format(name=name, blocks=blocks)
    submission = Submission(code=code, tests=[StdinTest(expected_output="ok")], limits=limits)
    with SyncEngine(sandbox.require().settings(pool_size=0)) as engine, ThreadPoolExecutor(1) as pool:
        throttled = pool.submit(throttle_the_disk_of, name)
        result = engine.judge(submission)
        throttled.result()
    (test,) = result.tests
    return test


@pytest.mark.parametrize("sandbox", RUNC_KINDS, ids=ids(RUNC_KINDS))
def test_waits_for_a_busy_disk_are_given_back(sandbox: Sandbox) -> None:
    test = judge_on_a_slow_disk(sandbox, 16, Limits(time_s=1))
    assert test.verdict is Verdict.PASSED, (test.detail, test.usage)
    # Past the backstop of 3 s, or the throttle slowed nothing and this proved nothing.
    assert test.usage.wall_time_s is not None and test.usage.wall_time_s > 4, test.usage
    assert test.usage.cpu_time_s is not None and test.usage.cpu_time_s < 0.5, test.usage


@pytest.mark.parametrize("sandbox", RUNC_KINDS, ids=ids(RUNC_KINDS))
def test_a_program_that_waits_for_the_disk_forever_still_ends(sandbox: Sandbox) -> None:
    """What a program gets back for its waits is at most ten times its backstop (1.4 s here)."""
    test = judge_on_a_slow_disk(sandbox, None, Limits(time_s=0.2))
    assert test.verdict is Verdict.TIMEOUT, (test.detail, test.usage)
    assert test.detail is not None and "wall-clock backstop of 1.4 s and 14.0 s given back" in test.detail, test.detail
    assert test.usage.wall_time_s is not None and 1.4 + 14 <= test.usage.wall_time_s < 1.4 + 14 + 3, test.usage
