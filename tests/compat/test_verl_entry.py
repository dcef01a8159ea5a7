"""verl's reward entry points (``engine.compat.verl``): the score verl's own default function
gives a code data source, from the real reference on the corpus's continuous reward cases, and
the batch form giving the same scores in the same order."""

from __future__ import annotations

import time

import pytest

from engine import NotJudged
from engine.compat import verl
from engine.compat._shared import deadline_at

from .corpus import CASES
from .external import reference_outcomes

pytestmark = pytest.mark.docker

# Continuous reward cases of the differential corpus (the verl path), a spread of outcomes.
SCORED = [c for c in CASES if c["layer"] == "compute_score" and c["continuous"]][:12]


def _verl_score(outcome: dict[str, object]) -> float:
    """What verl's ``default_compute_score`` returns for a reference outcome: float(res[0])."""
    success = outcome["success"]
    return 1.0 if success == "T" else 0.0 if success == "F" else float(success)  # type: ignore[arg-type]


@pytest.mark.reference
def test_code_sources_score_as_verls_default_does() -> None:
    assert len(SCORED) >= 8
    theirs = reference_outcomes(SCORED)
    expected = [_verl_score(theirs[case["name"]]) for case in SCORED]
    assert len(set(expected)) >= 2, "the cases should not all score alike"
    sources = [verl.CODE_SOURCES[i % len(verl.CODE_SOURCES)] for i in range(len(SCORED))]
    ours = [verl.compute_score(s, c["code"], c["in_outs"]) for s, c in zip(sources, SCORED, strict=True)]
    assert ours == pytest.approx(expected), [c["name"] for c in SCORED]
    batch = verl.compute_score_batch(sources, [c["code"] for c in SCORED], [c["in_outs"] for c in SCORED])
    assert batch == ours


def test_other_sources_and_a_ragged_batch_are_named() -> None:
    with pytest.raises(NotImplementedError, match="'openai/gsm8k' needs verl installed"):
        verl.compute_score("openai/gsm8k", "42", "42")
    with pytest.raises(ValueError, match="2 data sources, 1 solutions"):
        verl.compute_score_batch(["apps", "apps"], ["x"], ["y"])


def test_a_batch_past_its_deadline_is_not_scored_as_wrong() -> None:
    """Items the sandbox could not judge by the batch's deadline have no reward: verl's entry
    point raises NotJudged after every item has ended, or gives the value asked for instead."""
    cases = SCORED[:4]
    sources = ["apps"] * len(cases)
    codes, truths = [c["code"] for c in cases], [c["in_outs"] for c in cases]
    with pytest.raises(NotJudged, match="deadline"):
        verl.compute_score_batch(sources, codes, truths, deadline_s=0.001)
    assert verl.compute_score_batch(sources, codes, truths, deadline_s=0.001, not_judged=None) == [None] * 4
    with deadline_at(time.monotonic()), pytest.raises(NotJudged):
        verl.compute_score("apps", codes[0], truths[0])
    judged = verl.compute_score_batch(sources, codes, truths, deadline_s=300, not_judged=None)
    assert None not in judged
