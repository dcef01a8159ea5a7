"""Faults around the sandbox: a daemon restart, a container killed from outside, the engine
itself killed. Every job must end with exactly one result, and nothing may be left behind."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from leftovers import our_containers
from sandboxes import OCI, Sandbox

import engine._engine as engine_core
from engine import Checker, Interactor, Limits, Settings, StdinTest, Submission, SubmissionResult, SyncEngine, Verdict
from engine.runtime._labels import PURPOSE

pytestmark = [
    pytest.mark.docker,
    # While the daemon is down, docker-py drops the socket of every refused connection without
    # closing it (docker/transport/unixconn.py); the garbage collector closes it, with a warning.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(autouse=True)
def collect_dropped_sockets() -> Iterator[None]:
    """Collect them while this module's warning filter still applies."""
    yield
    gc.collect()


def slow(i: int, seconds: float = 1.5) -> Submission:
    return Submission(
        id=f"job-{i}", code=f"import time\ntime.sleep({seconds})\nprint({i})", tests=[StdinTest(expected_output=str(i))]
    )


def systemd_runs_docker() -> bool:
    if not shutil.which("systemctl"):
        return False
    check = subprocess.run(["systemctl", "is-active", "--quiet", "docker"], capture_output=True)
    return check.returncode == 0


def restart_dockerd() -> None:
    """Stop the Docker daemon and start it again the way scripts/setup does."""
    if systemd_runs_docker():
        subprocess.run(["systemctl", "restart", "docker"], check=True)
    else:
        pid = int(Path("/var/run/docker.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline, "dockerd did not stop"
            time.sleep(0.1)
        # Through a shell that exits at once, so that dockerd is nobody's child here.
        subprocess.run(["sh", "-c", "nohup dockerd >>/var/log/airlock-dockerd.log 2>&1 &"], check=True)
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "dockerd did not come back"
        time.sleep(0.5)


def can_restart_dockerd() -> bool:
    if systemd_runs_docker():
        return os.geteuid() == 0
    return os.geteuid() == 0 and Path("/var/run/docker.pid").exists() and shutil.which("dockerd") is not None


def judge_in_background(
    engine: SyncEngine, submissions: list[Submission]
) -> tuple[threading.Thread, list[SubmissionResult]]:
    results: list[SubmissionResult] = []
    thread = threading.Thread(target=lambda: results.extend(engine.judge_many(submissions)), daemon=True)
    thread.start()
    return thread, results


@pytest.mark.skipif(not can_restart_dockerd(), reason="needs root and a dockerd this test may restart")
def test_daemon_restart_mid_batch_loses_and_duplicates_nothing() -> None:
    submissions = [slow(i) for i in range(16)]
    with SyncEngine(Settings(max_concurrency=4)) as engine:
        thread, results = judge_in_background(engine, submissions)
        time.sleep(2.5)
        restart_dockerd()
        thread.join(timeout=300)
        assert not thread.is_alive(), "a job hangs"
    assert [r.id for r in results] == [s.id for s in submissions]
    verdicts = [r.verdict for r in results]
    assert set(verdicts) <= {Verdict.PASSED, Verdict.SANDBOX_ERROR}
    assert verdicts.count(Verdict.PASSED) >= len(submissions) // 2, verdicts  # the retries worked
    assert our_containers() == []


JOBS: dict[str, str | list[str] | bool] = {"label": f"{PURPOSE}=job"}


def running_job(client: docker.DockerClient, image: str = "airlock/", after_s: float = 0.5) -> Any:
    """The container of the one job in flight from an image named ``image...``, ``after_s``
    after it was seen running."""

    def running() -> list[Any]:
        jobs = client.containers.list(filters=JOBS, ignore_removed=True)
        return [job for job in jobs if job.attrs["Config"]["Image"].startswith(image)]

    deadline = time.monotonic() + 30
    while not (found := running()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(after_s)
    return found[0]


def test_a_container_killed_from_outside_is_retried() -> None:
    client = docker.from_env(version="auto")
    with SyncEngine() as engine:
        thread, results = judge_in_background(engine, [slow(1, seconds=3)])
        running_job(client).kill()
        thread.join(timeout=120)
    client.close()
    assert len(results) == 1
    assert results[0].verdict in (Verdict.PASSED, Verdict.SANDBOX_ERROR)
    assert results[0].verdict is Verdict.PASSED, results[0].error  # retried in a fresh container
    assert our_containers() == []


def test_an_interactive_programs_container_killed_from_outside_is_retried() -> None:
    """Its interactor sees its input end and reports on that: a report on nothing the program
    did, so the pair is retried, not judged."""
    client = docker.from_env(version="auto")
    interactor = Interactor(
        code="import sys\nprint('go', flush=True)\nsys.exit(0 if sys.stdin.readline().strip() == '7' else 1)"
    )
    program = (
        "require('readline').createInterface({input: process.stdin})"
        ".on('line', () => setTimeout(() => console.log(7), 3000))"
    )
    submission = Submission(language="javascript", code=program, tests=[StdinTest(input="")], interactor=interactor)
    with SyncEngine() as engine:
        thread, results = judge_in_background(engine, [submission])
        running_job(client, image="airlock/javascript").kill()
        thread.join(timeout=120)
    client.close()
    assert len(results) == 1
    assert results[0].verdict is Verdict.PASSED, results[0].tests  # retried in fresh containers
    assert our_containers() == []


@pytest.mark.parametrize("whose", ["program", "checker"])
def test_a_sandbox_lost_midway_is_resumed_for_the_tests_it_did_not_reach(whose: str) -> None:
    """Each test starts from the program as loaded, and a checker is the judge's own code: when
    a container dies after some tests were reported, the others run in a new one, and every test
    gets a verdict (not the sandbox's failure)."""
    client = docker.from_env(version="auto")
    tests = [StdinTest(input="quick", expected_output="7"), StdinTest(input="slow", expected_output="7")]
    slow_on_its_input = "import sys, time\nif sys.stdin.read().strip() == 'slow':\n    time.sleep(4)\nprint(7)\n"
    if whose == "program":
        submission = Submission(code=slow_on_its_input, tests=tests)
    else:
        checker = Checker(
            code="import time\ndef check(input, expected, output):\n"
            "    if input == 'slow':\n        time.sleep(4)\n    return output.strip() == expected\n"
        )
        # The program in JavaScript: the one Python container is the checker's.
        submission = Submission(language="javascript", code="console.log(7)", tests=tests, checker=checker)
    with SyncEngine(Settings(pool_size=0)) as engine:
        thread, results = judge_in_background(engine, [submission])
        running_job(client, image="airlock/python", after_s=2).kill()
        thread.join(timeout=120)
    client.close()
    assert len(results) == 1
    assert [t.verdict for t in results[0].tests] == [Verdict.PASSED] * 2, results[0].tests
    assert our_containers() == []


def test_a_sandbox_that_stops_running_is_given_up_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen container (as a wedged gVisor sandbox is: alive, never answering) ends its job
    once its harness has been silent past the allowance, not at the job's stretched deadline
    minutes later, and the job is retried in a fresh one."""
    # The mechanism, not the allowance's size: a short one keeps the test short.
    monkeypatch.setattr(engine_core, "SILENCE_ALLOWANCE_S", 10.0)
    client = docker.from_env(version="auto")
    submission = slow(1, seconds=2).model_copy(update={"limits": Limits(wall_time_s=3)})
    with SyncEngine(Settings(pool_size=0)) as engine:
        started = time.monotonic()
        thread, results = judge_in_background(engine, [submission])
        running_job(client).pause()
        thread.join(timeout=240)
        elapsed = time.monotonic() - started
    client.close()
    assert len(results) == 1
    assert results[0].verdict is Verdict.PASSED, results[0].error  # retried in a fresh container
    assert elapsed < engine_core.SILENCE_ALLOWANCE_S + 3 + 15, elapsed
    assert our_containers() == []


def test_a_sandbox_that_never_reads_its_request_is_given_up_at_the_greeting_allowance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A harness says hello as soon as it has read its request: a warm container whose harness
    never does (stopped before its job came; a gVisor sandbox whose harness never got its request)
    is given up at the short greeting allowance, not the long silence one, and the job is retried."""
    monkeypatch.setattr(engine_core, "SILENCE_ALLOWANCE_S", 200.0)
    monkeypatch.setattr(engine_core, "GREETING_ALLOWANCE_S", 5.0)
    client = docker.from_env(version="auto")
    with SyncEngine(Settings(pool_size=1)) as engine:
        assert engine.judge(slow(0, seconds=0)).verdict is Verdict.PASSED  # the pool then keeps one warm
        deadline = time.monotonic() + 30
        while engine.statistics().pool.ready != 1 or len(jobs := client.containers.list(filters=JOBS)) != 1:
            assert time.monotonic() < deadline, (engine.statistics(), jobs)  # the first job's is being removed
            time.sleep(0.1)
        # The warm one's harness, stopped while it waits for a request (Docker's pause would refuse
        # the attach itself, which is retried at once).
        os.kill(jobs[0].attrs["State"]["Pid"], signal.SIGSTOP)
        started = time.monotonic()
        result = engine.judge(slow(1, seconds=0))
        elapsed = time.monotonic() - started
    client.close()
    assert result.verdict is Verdict.PASSED, result.error  # retried in a fresh container
    assert engine_core.GREETING_ALLOWANCE_S <= elapsed < engine_core.GREETING_ALLOWANCE_S + 30, elapsed
    assert our_containers() == []


def test_a_killed_engine_is_completed_by_resume(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    rows = [
        {
            "id": f"p{i}",
            "code": f"import time\ntime.sleep(0.6)\nprint({i})",
            "tests": [{"kind": "stdin", "expected_output": str(i)}],
        }
        for i in range(24)
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "engine", "score", str(source), "-o", str(out), "-q", "--concurrency", "3"]
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while not out.exists() or out.read_text().count("\n") < 6:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert out.read_text().count("\n") < len(rows)
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert all(r["verdict"] == "passed" for r in records)
    assert our_containers() == []  # the resumed run removed what the killed one left


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


@pytest.mark.skipif(not can_restart_dockerd(), reason="needs root and a dockerd this test may stop")
def test_a_stuck_daemon_never_stalls_a_batch_past_its_deadline() -> None:
    """dockerd stopped (SIGSTOP) mid-batch answers nothing: by the batch's deadline every
    submission has a result, those it could not finish marked not judged, never a verdict."""
    # At least ten rounds of half a second at concurrency 4: still running when dockerd stops,
    # however fast this machine is.
    submissions = [slow(i, seconds=0.5) for i in range(40)]
    pid = int(Path("/var/run/docker.pid").read_text())
    with SyncEngine(Settings(max_concurrency=4, pool_size=0)) as engine:
        started = time.monotonic()
        thread = threading.Thread(target=lambda: results.extend(engine.judge_many(submissions, deadline_s=15)))
        results: list[SubmissionResult] = []
        thread.start()
        time.sleep(2)
        os.kill(pid, signal.SIGSTOP)
        try:
            thread.join(timeout=60)
            elapsed = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert not thread.is_alive(), "the batch outlived its deadline by a minute"
    assert elapsed < 15 + 5, elapsed
    assert [r.id for r in results] == [s.id for s in submissions]
    assert {r.verdict for r in results} <= {Verdict.PASSED, Verdict.SANDBOX_ERROR}
    not_judged = [r for r in results if r.verdict is Verdict.SANDBOX_ERROR]
    assert not_judged and all(r.retryable for r in not_judged), results
    assert all(not r.retryable for r in results if r.verdict is Verdict.PASSED)
    deadline = time.monotonic() + 60
    while our_containers():
        assert time.monotonic() < deadline, our_containers()
        time.sleep(0.5)


def test_a_batch_of_fork_bombs_ends_by_its_deadline() -> None:
    bombs = [Submission(id=f"bomb-{i}", code=FORK_BOMB, tests=[StdinTest(expected_output="")]) for i in range(6)]
    with SyncEngine(Settings(max_concurrency=2, pool_size=0)) as engine:
        started = time.monotonic()
        results = engine.judge_many(bombs, deadline_s=8)
        elapsed = time.monotonic() - started
    assert elapsed < 8 + 5, elapsed
    assert [r.id for r in results] == [b.id for b in bombs]
    for result in results:
        judged = result.verdict in (Verdict.TIMEOUT, Verdict.MEMORY_LIMIT, Verdict.RUNTIME_ERROR)
        assert judged or (result.verdict is Verdict.SANDBOX_ERROR and result.retryable), result
    assert any(r.retryable for r in results)  # six bombs of 10 s do not fit in 8 s on two slots
    assert our_containers() == []


@pytest.mark.parametrize("sandbox", [Sandbox("docker", "runc"), OCI], ids=lambda sandbox: sandbox.id)
def test_a_host_process_that_changes_its_environment_loses_no_job(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    """Another thread of the process that judges (pytest itself, a trainer) may set and unset
    environment variables at any moment. A docker-py call that iterated os.environ meanwhile
    raised KeyError in a removal, which ended the engine's background tasks: every later job
    waited for a slot forever (CI's 90-minute hang)."""
    submissions = [slow(i, seconds=0) for i in range(30)]
    churning = threading.Event()

    def churn() -> None:
        while not churning.is_set():
            os.environ["AIRLOCK_CHURN"] = "1"
            del os.environ["AIRLOCK_CHURN"]

    thread = threading.Thread(target=churn, daemon=True)
    switch_interval = sys.getswitchinterval()
    with SyncEngine(sandbox.require().settings(max_concurrency=4)) as engine:
        # Threads switch often, so that a switch lands inside another thread's pass over os.environ.
        sys.setswitchinterval(1e-5)
        thread.start()
        try:
            results = engine.judge_many(submissions)
        finally:
            churning.set()
            thread.join()
            sys.setswitchinterval(switch_interval)
        # Retirements of the batch's containers are done or failed by now; a slot lost to one
        # would make this wait forever.
        after = engine.judge_many([slow(i, seconds=0) for i in range(8)])
    assert [r.verdict for r in results] == [Verdict.PASSED] * len(submissions), [r.error for r in results]
    assert [r.verdict for r in after] == [Verdict.PASSED] * 8
    assert "background task" not in caplog.text  # a removal that failed and left its container
    assert our_containers() == []
