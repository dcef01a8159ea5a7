"""The benchmarks that count rounds answer ``--help`` and name a bad ROUNDS, before any setup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
COUNTING_ROUNDS = ["bench_judge.py", "bench_languages.py", "bench_profile.py", "bench_startup.py"]


@pytest.mark.parametrize("script", COUNTING_ROUNDS)
def test_help_and_a_bad_rounds_get_answers_not_tracebacks(script: str) -> None:
    helped = subprocess.run([sys.executable, SCRIPTS / script, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "[rounds]" in helped.stdout, helped.stderr
    for bad in ("x", "0", "-3"):
        refused = subprocess.run([sys.executable, SCRIPTS / script, bad], capture_output=True, text=True, check=False)
        assert refused.returncode == 2, refused
        assert f"ROUNDS must be a whole number of at least 1, not '{bad}'" in refused.stderr
        assert "Traceback" not in refused.stderr
