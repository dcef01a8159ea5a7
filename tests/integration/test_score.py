"""``airlock score`` on data sets: order, invalid lines, resume after a kill, the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "score"


def score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", "score", *args], capture_output=True, text=True, timeout=600)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bundled_examples_score_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    completed = score(str(EXAMPLES / "mixed.jsonl"), "-o", str(out), "-q")
    assert completed.returncode == 0, completed.stderr
    records = lines(out)
    source = [json.loads(line) for line in (EXAMPLES / "mixed.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [s["id"] for s in source]
    verdicts = {r["id"]: r.get("verdict") for r in records}
    assert verdicts["sum-right"] == "passed" and verdicts["sum-wrong"] == "wrong_answer"
    assert verdicts["slow"] == "timeout" and verdicts["cheat-exit"] == "wrong_answer"
    assert verdicts["two-sum-crash"] == "runtime_error" and verdicts["assert-style"] == "passed"
    malformed = next(r for r in records if r["id"] == "malformed")
    assert "expected_output" in malformed["error"] and "verdict" not in malformed
    assert "wrong_answer" in completed.stderr and "invalid input" in completed.stderr


@pytest.mark.parametrize("layout", ["apps.jsonl", "humaneval.jsonl"])
def test_other_layouts(tmp_path: Path, layout: str) -> None:
    out = tmp_path / "out.jsonl"
    assert score(str(EXAMPLES / layout), "-o", str(out), "-q", "--details", "summary").returncode == 0
    records = lines(out)
    assert len(records) == 2 and all("verdict" in r for r in records)


def test_resume_completes_a_cut_off_run_with_exactly_one_line_per_input(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    rows = [
        {"id": f"p{i}", "code": f"print({i})", "tests": [{"kind": "stdin", "expected_output": str(i)}]}
        for i in range(6)
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert score(str(source), "-o", str(out), "-q").returncode == 0
    full = out.read_text().splitlines()
    # A run killed mid-write: two complete lines and half of the third.
    out.write_text(full[0] + "\n" + full[1] + "\n" + full[2][: len(full[2]) // 2])
    completed = score(str(source), "-o", str(out), "-q", "--resume")
    assert completed.returncode == 0
    records = lines(out)
    assert [r["id"] for r in records] == [f"p{i}" for i in range(6)]
    assert "already in output" in completed.stderr


def test_bad_arguments(tmp_path: Path) -> None:
    missing = score(str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    same = tmp_path / "same.jsonl"
    same.write_text("")
    assert "must not be the input" in score(str(same), "-o", str(same)).stderr


def test_a_deadline_ends_the_run_in_time_and_marks_what_it_could_not_judge(tmp_path: Path) -> None:
    source, output, summary = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "summary.json"
    quick = {"code": "print(1)", "tests": [{"kind": "stdin", "expected_output": "1"}]}
    sleepy = {"code": "import time\ntime.sleep(60)", "tests": [{"kind": "stdin", "expected_output": ""}]}
    records = [{**quick, "id": "task"}] + [{**sleepy, "id": "task"}] * 3 + [{**quick, "id": "task"}]
    source.write_text("".join(json.dumps(record) + "\n" for record in records))
    completed = score(str(source), "-o", str(output), "-q", "--deadline-s", "6", "--summary-json", str(summary))
    assert completed.returncode == 0, completed.stderr
    written = lines(output)
    assert [r["line"] for r in written] == [1, 2, 3, 4, 5]
    assert [r["verdict"] for r in written] == ["passed", "sandbox_error", "sandbox_error", "sandbox_error", "passed"]
    assert [r["retryable"] for r in written] == [False, True, True, True, False]
    assert "deadline of 6 s" in written[1]["error"]["message"]
    report = json.loads(summary.read_text())
    # Not judged is no sample: pass@1 of the two judged ones.
    assert report["not_judged"] == 3 and report["pass_at_k"] == {"1": 1.0}


def test_tests_share_a_process_unless_asked_or_a_record_says_otherwise(tmp_path: Path) -> None:
    counter = "calls = []\ndef f():\n    calls.append(1)\n    return len(calls)\n"
    tests = [{"kind": "call", "args": [], "expected": 1}, {"kind": "call", "args": [], "expected": 1}]
    rows = [
        {"id": "default", "code": counter, "fn_name": "f", "tests": tests},
        {"id": "one process", "code": counter, "fn_name": "f", "tests": tests, "process_per_test": False},
    ]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert score(str(source), "-o", str(out), "-q").returncode == 0
    # The second call in one process finds the first one's list: 2, where each test expects 1.
    assert [r["verdict"] for r in lines(out)] == ["wrong_answer", "wrong_answer"]
    assert score(str(source), "-o", str(out), "-q", "--process-per-test").returncode == 0
    assert [r["verdict"] for r in lines(out)] == ["passed", "wrong_answer"]
