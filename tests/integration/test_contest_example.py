"""The README's contest example (examples/contest/problems.jsonl: a problem with many right
answers judged by a testlib checker, an interactive one judged by a testlib interactor, and one
scored by subtasks), judged the same in each way in: `airlock score`, the Python API and the
server's `/v1/judge`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration.serving import Server
from sandboxes import cheapest

from engine import Submission, SyncEngine

pytestmark = pytest.mark.docker

PROBLEMS = Path(__file__).parents[2] / "examples" / "contest" / "problems.jsonl"
RECORDS = [json.loads(line) for line in PROBLEMS.read_text().splitlines()]
# Each record's verdicts by test, and its points where it has subtasks.
EXPECTED: list[tuple[list[str], float | None]] = [
    (["passed"] * 3, None),  # split: "1 n-1" is one of many right answers
    (["wrong_answer"] * 3, None),  # split: 0 is not positive
    (["passed"] * 3, None),  # guess: binary search
    (["passed", "wrong_answer", "wrong_answer"], None),  # guess: counting up runs out of questions
    (["passed"] * 3, 100.0),  # sum
    (["passed", "passed", "wrong_answer"], 30.0),  # sum: small numbers only
]


def outcome(result: dict[str, Any]) -> tuple[list[str], float | None]:
    return [test["verdict"] for test in result["tests"]], result.get("points")


@pytest.fixture(scope="module")
def server(language_images: None) -> Iterator[Server]:
    running = Server("runc", api_key=None)
    yield running
    assert "Traceback" not in running.stop()


def test_through_airlock_score(tmp_path: Path, language_images: None) -> None:
    out = tmp_path / "results.jsonl"
    completed = subprocess.run(
        [sys.executable, "-m", "engine", "score", str(PROBLEMS), "-o", str(out), "-q", *cheapest().cli_flags()],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    assert [outcome(json.loads(line)) for line in out.read_text().splitlines()] == EXPECTED
    assert "mean points 65.00 of 100.00" in completed.stderr


def test_through_the_python_api(engine: SyncEngine, language_images: None) -> None:
    results = engine.judge_many([Submission.model_validate(record) for record in RECORDS])
    assert [outcome(result.model_dump(mode="json")) for result in results] == EXPECTED


def test_through_the_batch_api(server: Server) -> None:
    answer = httpx.post(f"{server.url}/v1/judge", json={"submissions": RECORDS}, timeout=600)
    assert answer.status_code == 200, answer.text
    assert [outcome(json.loads(line)) for line in answer.text.splitlines()] == EXPECTED
