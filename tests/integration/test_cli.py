"""The ``airlock`` command as a user types it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker


def airlock(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args], capture_output=True, text=True, input=stdin, timeout=120
    )


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text("print(input()[::-1])\n")
    return path


def test_run_prints_the_program_output(program: Path, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("stressed\n")
    completed = airlock("run", str(program), "--stdin", str(tmp_path / "in.txt"))
    assert completed.returncode == 0
    assert completed.stdout == "desserts\n"
    assert "outcome=ok" in completed.stderr


def test_run_json(program: Path, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("abc\n")
    completed = airlock("run", str(program), "--stdin", str(tmp_path / "in.txt"), "--json")
    result = json.loads(completed.stdout)
    assert result["outcome"] == "ok" and result["stdout"] == "cba\n" and result["exit_code"] == 0


def test_run_reports_failure_in_its_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "loop.py"
    path.write_text("while True: pass\n")
    completed = airlock("run", str(path), "--wall-time-s", "1", "--json")
    assert completed.returncode == 1
    assert json.loads(completed.stdout)["outcome"] == "timeout"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["run", "/nonexistent/prog.py"], "does not exist"),
        (["run", "{program}", "--stdin", "/nonexistent/input"], "does not exist"),
        (["run", "{program}", "--memory-mb", "-5"], "memory_mb"),
        (["run", "{program}", "--wall-time-s", "99999999"], "wall_time_s"),
        (["run", "{program}", "--tmpfs-mb", "600"], "tmpfs_mb"),
    ],
)
def test_bad_input_gets_a_clear_error(program: Path, args: list[str], complaint: str) -> None:
    completed = airlock(*[a.format(program=program) for a in args])
    assert completed.returncode == 2
    assert complaint in completed.stderr
    assert "Traceback" not in completed.stderr


def test_unknown_language_is_refused(program: Path) -> None:
    completed = airlock("run", str(program), "--language", "cobol")
    assert completed.returncode == 2
    assert "invalid choice: 'cobol'" in completed.stderr


def test_images_build_is_quiet_when_up_to_date() -> None:
    completed = airlock("images", "build")
    assert completed.returncode == 0
    assert completed.stdout == "" and completed.stderr == ""


def test_gc_and_doctor() -> None:
    assert airlock("gc").returncode == 0
    doctor = airlock("doctor")
    assert doctor.returncode == 0, doctor.stdout
    for check in ("seccomp profile applied", "network off", "memory limit enforced", "pids limit enforced"):
        assert check in doctor.stdout
