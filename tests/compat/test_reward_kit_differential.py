"""Differential test: ``engine.compat.reward_kit`` against the real reward-kit 0.4.1.

The reference runs the corpus's programs on the host (they are benign), in a child process with
no standard input; ours run in sandboxes. Scores, validity, metric names and reasons must be
the same; the texts of errors (tracebacks, file names) are cut off before comparing. Where the
reference touches the host, we differ on purpose and say why.
"""

from __future__ import annotations

import concurrent.futures
import importlib
from typing import Any

import pytest

from . import normalize
from .external import reward_kit_outcomes
from .reward_kit_corpus import CASES

pytestmark = pytest.mark.docker

DEVIATIONS: dict[str, str] = {}


def _ours(case: dict[str, Any]) -> Any:
    module = importlib.import_module(f"engine.compat.reward_kit.{case['module']}")
    function = getattr(module, case["function"])
    return normalize.reward_outcome(lambda: function(**case["kwargs"]))


def test_reward_kit_agrees_case_by_case() -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as background:
        theirs_future = background.submit(reward_kit_outcomes, CASES)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            ours = dict(zip((c["name"] for c in CASES), pool.map(_ours, CASES), strict=True))
        theirs = theirs_future.result()
    differing = {
        name: {"ours": ours[name], "theirs": theirs[name]}
        for name in ours
        if ours[name] != theirs[name] and name not in DEVIATIONS
    }
    assert not differing, differing
    assert len(CASES) - len(DEVIATIONS) >= 40
