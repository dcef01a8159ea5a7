"""The harness's runners inside the sandbox, through the low-level layer: the process runner
compiles once and starts one process per test, under the same supervision as the Python runner."""

from __future__ import annotations

import pytest

from engine import Limits, SyncEngine
from engine.lowlevel import HarnessRequest, ProcessCommands, Status, limit_fields

pytestmark = pytest.mark.docker

LIMITS = Limits(time_s=2, compile_time_s=5)


def request(code: str, stdins: list[str], compile: tuple[str, ...] | None = None) -> HarnessRequest:
    return HarnessRequest(
        runner="process",
        mode="script",
        code=code,
        tests=[{"stdin": stdin} for stdin in stdins],
        **limit_fields(LIMITS),
        process=ProcessCommands(source="main.py", compile=compile, run=("python3", "{source}")),
    )


def test_a_compiled_program_runs_once_per_test(engine: SyncEngine) -> None:
    code = "import os\nprint(int(input()) * 3, os.getpid())\n"
    compile = ("python3", "-m", "py_compile", "{source}")
    run = engine.run_harness("python", request(code, ["1", "2", "3"], compile), LIMITS)
    assert [o.status for o in run.observations] == [Status.OK] * 3
    assert [o.stdout.split()[0] for o in run.observations] == ["3", "6", "9"]
    assert len({o.stdout.split()[1] for o in run.observations}) == 3  # a process of its own each


def test_a_compile_error_carries_the_compilers_message(engine: SyncEngine) -> None:
    run = engine.run_harness(
        "python", request("def (:\n", ["", ""], ("python3", "-m", "py_compile", "{source}")), LIMITS
    )
    assert [o.status for o in run.observations] == [Status.COMPILE_ERROR] * 2
    error = run.observations[0].error
    assert error is not None and "SyntaxError" in error.message


def test_what_one_test_leaves_is_gone_for_the_next(engine: SyncEngine) -> None:
    code = (
        "import os\nif input() == 'write':\n    open('/tmp/left', 'w').write('x')\nprint(os.path.exists('/tmp/left'))\n"
    )
    run = engine.run_harness("python", request(code, ["write", "look"]), LIMITS)
    assert [o.stdout for o in run.observations] == ["True\n", "False\n"]
