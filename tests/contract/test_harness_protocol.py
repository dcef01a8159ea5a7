"""The in-image harness, run directly as a local process (no Docker), read by the host's parser.

Running the same files the image carries, under the same launcher, keeps the host and the
image from drifting apart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.harness import codec
from engine.harness.protocol import HEARTBEAT_S, PROTOCOL_VERSION
from engine.judge._protocol import Observation, ReportReader

HARNESS_SOURCE = Path(__file__).resolve().parents[2] / "engine" / "harness"


@pytest.fixture(scope="module")
def harness_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("image")
    shutil.copytree(HARNESS_SOURCE, root / "airlock_harness", ignore=shutil.ignore_patterns("__pycache__"))
    yield root


def run_harness(harness_dir: Path, request: dict[str, Any] | bytes) -> tuple[list[Observation], list[bytes]]:
    launcher = f"import sys; sys.path.insert(0, {str(harness_dir)!r}); from airlock_harness.harness import main; main()"
    payload = request if isinstance(request, bytes) else json.dumps(request).encode()
    # A folder of the call's own for the harness's workspace: a request it refuses early ends it
    # before it cleans up, and what it left goes with the folder.
    with tempfile.TemporaryDirectory(prefix="airlock-contract-") as scratch:
        completed = subprocess.run(
            [sys.executable, "-I", "-c", launcher],
            input=payload,
            capture_output=True,
            timeout=60,
            env={**os.environ, "TMPDIR": scratch},
        )
    lines = completed.stdout.splitlines()
    return _observations(request, lines), lines


def _observations(request: dict[str, Any] | bytes, lines: list[bytes]) -> list[Observation]:
    if isinstance(request, bytes):
        return []
    reader = ReportReader(len(request["tests"]))
    for line in lines:
        reader(line)
    reader.check(b"")
    return reader.observations


def request(mode: str, code: str, tests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "protocol": PROTOCOL_VERSION,
        "mode": mode,
        "code": textwrap.dedent(code),
        "tests": tests,
        "time_limit_s": 2,
        "wall_limit_s": 5,
        "compile_time_limit_s": 5,
        "compile_wall_limit_s": 11,
        "output_limit_bytes": 10_000,
        **extra,
    }


def test_script_mode_observes_output_and_exit(harness_dir: Path) -> None:
    code = """
        import sys
        n = int(input())
        print(n * 2)
        print("note", file=sys.stderr)
        sys.exit(n % 2)
    """
    first, second = run_harness(harness_dir, request("script", code, [{"stdin": "4\n"}, {"stdin": "3"}]))[0]
    assert (first.status, first.stdout, first.stderr, first.exit_code) == ("ok", "8\n", "note\n", 0)
    assert (second.status, second.stdout, second.exit_code) == ("runtime_error", "6\n", 1)


def test_script_syntax_error_looks_like_the_interpreter(harness_dir: Path) -> None:
    (observation,) = run_harness(harness_dir, request("script", "print(1", [{"stdin": ""}]))[0]
    assert observation.status == "compile_error"
    assert observation.exit_code == 1
    assert "SyntaxError" in observation.stderr


def test_each_test_gets_a_clean_directory(harness_dir: Path) -> None:
    code = """
        import os
        print(sorted(os.listdir(".")))
        open("left-behind", "w").write("x")
    """
    observations = run_harness(harness_dir, request("script", code, [{"stdin": ""}, {"stdin": ""}]))[0]
    assert [o.stdout for o in observations] == ["[]\n", "[]\n"]


def test_call_mode_returns_typed_values_from_fresh_state(harness_dir: Path) -> None:
    code = """
        calls = 0
        def pair(a, b):
            global calls
            calls += 1
            return (a + b, calls)
    """
    tests = [{"args": codec.encode([1, 2])}, {"args": codec.encode([3, 4])}]
    observations = run_harness(harness_dir, request("call", code, tests, entry="pair"))[0]
    assert [codec.decode(o.value) for o in observations] == [(3, 1), (7, 1)]


def test_call_mode_finds_solution_methods_and_reports_errors(harness_dir: Path) -> None:
    code = """
        class Solution:
            def halve(self, x):
                return 10 // x
    """
    tests = [{"args": codec.encode([5])}, {"args": codec.encode([0])}]
    ok, failed = run_harness(harness_dir, request("call", code, tests, entry="halve"))[0]
    assert ok.status == "ok" and codec.decode(ok.value) == 2
    assert failed.status == "runtime_error" and failed.error is not None and failed.error.type == "ZeroDivisionError"
    assert not failed.has_value


def test_call_mode_missing_function_is_a_load_failure(harness_dir: Path) -> None:
    observations = run_harness(harness_dir, request("call", "x = 1", [{"args": []}] * 2, entry="solve"))[0]
    assert [o.status for o in observations] == ["compile_error", "compile_error"]
    assert observations[0].error is not None and "solve" in observations[0].error.message


def test_unencodable_return_values_are_runtime_errors(harness_dir: Path) -> None:
    code = """
        class Sneaky:
            def __eq__(self, other):
                return True
        def solve():
            return Sneaky()
    """
    (observation,) = run_harness(harness_dir, request("call", code, [{"args": []}], entry="solve"))[0]
    assert observation.status == "runtime_error"
    assert "Sneaky" in (observation.error.message if observation.error else "")


def test_assert_mode_runs_test_code_against_the_program(harness_dir: Path) -> None:
    code = """
        def add(a, b):
            return a + b
        def helper(x):
            return x * 2
    """
    tests = [
        {"code": "assert candidate(1, 2) == 3\nassert helper(4) == 8\nprint('never reaches the report')"},
        {"code": "assert add(1, 2) == 4"},
        {"code": "add(1, 'x')"},
    ]
    passed, failed, crashed = run_harness(harness_dir, request("assert", code, tests, entry="add"))[0]
    assert passed.status == "ok"
    assert failed.status == "assertion_failed"
    assert crashed.status == "runtime_error" and crashed.error is not None and crashed.error.type == "TypeError"


def test_timeouts_kill_only_the_test(harness_dir: Path) -> None:
    code = """
        def solve(n):
            while n:
                pass
            return n
    """
    tests = [{"args": [1]}, {"args": [0]}]
    slow, fast = run_harness(harness_dir, request("call", code, tests, entry="solve", time_limit_s=0.5))[0]
    # The limit is CPU time: the test is ended soon after it used 0.5 s of it, however long that
    # took on a busy machine.
    assert slow.status == "timeout" and 0.5 <= (slow.usage.cpu_time_s or 0.0) < 1.5
    assert (slow.usage.wall_time_s or 0.0) >= 0.5
    assert fast.status == "ok" and codec.decode(fast.value) == 0


def test_a_harness_waiting_on_a_long_test_says_it_is_alive(harness_dir: Path) -> None:
    tests = [{"stdin": ""}]
    observations, lines = run_harness(harness_dir, request("script", "import time\ntime.sleep(2.5)\nprint(1)", tests))
    kinds = [json.loads(line)["type"] for line in lines]
    # A frame at least every HEARTBEAT_S: the host tells a slow test from a sandbox that stopped.
    assert kinds[:1] == ["hello"] and kinds[-2:] == ["test", "done"], kinds
    assert kinds.count("alive") >= int(2.5 / HEARTBEAT_S) - 1, kinds
    assert observations[0].status == "ok" and observations[0].stdout == "1\n"


def test_stop_on_first_failure_ends_the_report_early(harness_dir: Path) -> None:
    code = "import sys\nsys.exit(int(input()))\n"
    tests = [{"stdin": "0"}, {"stdin": "1"}, {"stdin": "0"}]
    observations, lines = run_harness(harness_dir, request("script", code, tests, stop_on_first_failure=True))
    assert [o.status for o in observations] == ["ok", "runtime_error"]
    assert json.loads(lines[-1]) == {"type": "done", "tests": 2}


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        (b"not json", "not JSON"),
        (json.dumps({"protocol": 99}).encode(), "protocol 99"),
        (json.dumps(request("script", "", [{}])).encode(), "test 0 needs 'stdin'"),
        (json.dumps(request("call", "", [])).encode(), "entry"),
        (json.dumps({**request("script", "", []), "time_limit_s": -1}).encode(), "time_limit_s"),
    ],
)
def test_unusable_requests_get_one_error_frame(harness_dir: Path, payload: bytes, complaint: str) -> None:
    _, lines = run_harness(harness_dir, payload)
    assert len(lines) == 1
    frame = json.loads(lines[0])
    assert frame["type"] == "error" and complaint in frame["message"]


# -- the process runner: compile once, one process per test ------------------------------------------


def process(code: str, tests: list[dict[str, Any]], compile: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    commands = {"source": "main.py", "compile": compile, "run": [sys.executable, "{source}"]}
    return request("script", code, tests, runner="process", process=commands, **extra)


def test_the_process_runner_gives_each_test_its_own_process(harness_dir: Path) -> None:
    code = """
        import os, sys
        n = int(input())
        print(n * 2, os.getpid())
        sys.exit(n % 2)
    """
    observations, _ = run_harness(harness_dir, process(code, [{"stdin": "2"}, {"stdin": "3"}]))
    first, second = observations
    assert first.status == "ok" and first.stdout.split()[0] == "4" and first.exit_code == 0
    assert second.status == "runtime_error" and second.exit_code == 1
    assert first.stdout.split()[1] != second.stdout.split()[1]
    assert first.usage.cpu_time_s is not None and first.usage.peak_memory_kb


def test_a_failed_compile_is_every_tests_compile_error_with_the_compilers_message(harness_dir: Path) -> None:
    compile = [sys.executable, "-m", "py_compile", "{source}"]
    observations, _ = run_harness(harness_dir, process("print(1 +\n", [{"stdin": ""}] * 2, compile))
    assert [o.status for o in observations] == ["compile_error", "compile_error"]
    assert observations[0].error is not None and "SyntaxError" in observations[0].error.message
    built, _ = run_harness(harness_dir, process("print(input())\n", [{"stdin": "ok"}], compile))
    assert built[0].status == "ok" and built[0].stdout == "ok\n"


def test_compiling_has_its_own_time_limit(harness_dir: Path) -> None:
    slow_compiler = [sys.executable, "-c", "import time; time.sleep(30)"]
    started = time.monotonic()
    compiling = process("", [{"stdin": ""}], slow_compiler, compile_time_limit_s=0.5, compile_wall_limit_s=1)
    observations, _ = run_harness(harness_dir, compiling)
    assert observations[0].status == "compile_error"
    assert observations[0].error is not None and "backstop of 1 s" in observations[0].error.message
    assert time.monotonic() - started < 20


def test_the_process_runner_keeps_time_and_output_limits(harness_dir: Path) -> None:
    code = "import sys, time\nif input() == 'loop':\n    time.sleep(30)\nsys.stdout.write('x' * 50000)\n"
    tests = [{"stdin": "loop"}, {"stdin": "flood"}]
    slow, flood = run_harness(harness_dir, process(code, tests, time_limit_s=0.5, wall_limit_s=1))[0]
    assert slow.status == "timeout" and flood.status == "output_limit"
