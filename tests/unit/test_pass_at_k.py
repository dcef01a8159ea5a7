"""pass@k from a result file: the unbiased estimator of the HumanEval paper, per task, averaged."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from engine.judge._score import summarise_output


def write(path: Path, samples: Mapping[str, Sequence[bool | None]]) -> Path:
    lines = []
    for task, outcomes in samples.items():
        for passed in outcomes:
            if passed is None:  # a line that could not be judged
                lines.append({"id": task, "error": "tests.0: Field required"})
            else:
                lines.append({"id": task, "verdict": "passed" if passed else "wrong_answer"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def reference(n: int, c: int, k: int) -> float:
    return 1.0 if n - c < k else 1 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize(("n", "c"), [(20, 0), (20, 5), (20, 19), (20, 20), (200, 7)])
def test_one_task_matches_the_closed_form(tmp_path: Path, n: int, c: int) -> None:
    outcomes: list[bool | None] = [*([True] * c), *([False] * (n - c))]
    path = write(tmp_path / "r.jsonl", {"t": outcomes})
    summary = summarise_output(path, (1, 10, 100))
    tasks, estimates = summary.tasks, summary.pass_at_k
    assert tasks == 1
    for k in (1, 10, 100):
        if k <= n:
            assert estimates[k] == pytest.approx(reference(n, c, k), rel=1e-12)
        else:
            assert k not in estimates


def test_tasks_are_averaged_and_unjudged_lines_are_failures(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", {"a": [True, False, None, False], "b": [True, True, True, None]})
    summary = summarise_output(path, (1, 2, 5))
    tasks, estimates = summary.tasks, summary.pass_at_k
    assert tasks == 2
    assert estimates == {
        1: pytest.approx((0.25 + 0.75) / 2),
        2: pytest.approx((reference(4, 1, 2) + reference(4, 3, 2)) / 2),
    }
