"""Problems scored by subtasks (IOI's way): a subtask earns its points when all its tests pass,
scaled by the least partial score among them; the result's points are the sum, and `airlock
score` reports their mean. Judged through `airlock score` as a data set's author writes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandboxes import cheapest

pytestmark = pytest.mark.docker

# Sum the numbers on the line. Subtask 0 has small numbers only; subtask 1 has large ones.
TESTS = [
    {"input": "1 2 3\n", "expected_output": "6\n"},
    {"input": "5\n", "expected_output": "5\n"},
    {"input": "7 7\n", "expected_output": "14\n"},
    {"input": "1000000 2000000\n", "expected_output": "3000000\n"},
    {"input": "999999 1\n", "expected_output": "1000000\n"},
]
SUBTASKS = [{"tests": [0, 1, 2], "points": 30}, {"tests": [3, 4], "points": 70}]
PROGRAMS = {
    "full": "print(sum(map(int, input().split())))",
    # Right while every number is small: the first subtask only.
    "small-only": "print(sum(x for x in map(int, input().split()) if x < 1000))",
    "none": "print(0)",
    # Wrong on one test of the second subtask: that subtask earns nothing, however many others pass.
    "one-large-wrong": "xs = list(map(int, input().split()))\nprint(sum(xs) if xs[0] != 999999 else 0)",
}
# Half the points for an answer off by one, on the test that asks for 5.
HALF_CHECKER = """
def check(input, expected, output):
    if output.strip() == expected.strip():
        return True
    return 0.5 if abs(int(output) - int(expected)) == 1 else False
"""


def record(name: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"id": name, "code": code, "tests": [{"kind": "stdin", **t} for t in TESTS], "subtasks": SUBTASKS, **extra}


def test_subtask_points_through_airlock_score(tmp_path: Path) -> None:
    records = [record(name, code) for name, code in PROGRAMS.items()]
    records.append(
        record(
            "off-by-one",
            "n = sum(map(int, input().split()))\nprint(n + 1 if n == 5 else n)",
            checker={"code": HALF_CHECKER},
        )
    )
    records.append(record("beyond", "print(0)", subtasks=[{"tests": [0, 9], "points": 10}]))
    data, out, summary = tmp_path / "subtasks.jsonl", tmp_path / "results.jsonl", tmp_path / "summary.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    command = ["score", str(data), "-o", str(out), "-q", "--summary-json", str(summary), *cheapest().cli_flags()]
    completed = subprocess.run(
        [sys.executable, "-m", "engine", *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    results = {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}

    points = {name: (r["points"], r["max_points"]) for name, r in results.items() if "points" in r}
    assert points == {
        "full": (100, 100),
        "small-only": (30, 100),
        "none": (0, 100),
        "one-large-wrong": (30, 100),
        "off-by-one": (15 + 70, 100),
    }
    assert [s["verdict"] for s in results["small-only"]["subtasks"]] == ["passed", "wrong_answer"]
    # The verdict is still the first failure's.
    assert results["small-only"]["verdict"] == "wrong_answer"
    assert results["full"]["verdict"] == "passed"
    assert "subtask 0 names test 9; there are 5 tests" in results["beyond"]["error"]

    report = json.loads(summary.read_text())
    assert report["mean_points"] == pytest.approx((100 + 30 + 0 + 30 + 85) / 5)
    assert report["max_points"] == 100
    assert "mean points 49.00 of 100.00" in completed.stderr
