"""Differential test: ``engine.compat.prime_code`` against the real verl 0.9.1 ``prime_code``.

The reference is installed at test time, outside the repository (see ``external.py``).
Both sides run every case of ``corpus.py``; what the reward sees must agree, except for the
deviations listed in ``DEVIATIONS`` (and in docs/prime-compat.md), each with its reason.
"""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path
from typing import Any

import pytest
from sandboxes import cheapest

from engine.compat import prime_code

from . import normalize
from .corpus import CASES
from .external import reference_outcomes

pytestmark = [pytest.mark.docker, pytest.mark.reference]

HERE = Path(__file__).resolve().parent

# Where the reference touches the host or is a security hole, we differ on purpose.
DEVIATIONS: dict[str, str] = {
    "c_float_subclass_eq_forgery": "security: a returned object's own __eq__ never runs on the host; compared by value",
    "c_list_subclass_eq_forgery": "security: a returned object's own __eq__ never runs on the host; compared by value",
    "c_patched_json_dumps": "security: the program cannot patch the judge; a set has no JSON form whatever it patches",
    "s_memory_beyond_the_sandbox": "host resources: the sandbox has a memory limit (1 GiB); the reference has none",
    "s_network_socket": "host reach: no network family exists in the sandbox",
    "s_write_outside_the_scratch_space": "host files: the sandbox's root file system is read-only",
    "s_many_threads": "host processes: the sandbox has a pids limit; the reference has none",
    "s_output_beyond_the_cap": "host resources: captured output is capped at 1 MiB; past it is a wrong answer",
    "s_slightly_over_timeout": "time: a test's timeout is CPU time here; this program sleeps 1.4 s past a 1 s one",
    "c_slightly_over_timeout": "time: a test's timeout is CPU time here; this function sleeps 1.4 s past a 1 s one",
}


def _our_outcome(case: dict[str, Any]) -> Any:
    if case["layer"] == "check_correctness":
        return normalize.check_correctness_outcome(
            lambda: prime_code.check_correctness(case["in_outs"], case["code"], timeout=case["timeout"], debug=False)
        )
    return normalize.compute_score_outcome(
        lambda: prime_code.compute_score(case["code"], case["in_outs"], continuous=case["continuous"])
    )


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[Any, Any]]:
    # What is compared is the judging, not the container around it: the cheapest sandbox here.
    with cheapest().chosen_by_environment():
        return _both_outcomes()


def _both_outcomes() -> dict[str, tuple[Any, Any]]:
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as background:
            theirs_future = background.submit(reference_outcomes, CASES)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                ours = dict(zip((c["name"] for c in CASES), pool.map(_our_outcome, CASES), strict=True))
            theirs = theirs_future.result()
    finally:
        prime_code.close()  # its warm containers are no other test's business
    return {name: (ours[name], theirs.get(name)) for name in ours}


def test_corpus_is_large_and_unique() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))
    assert len(names) >= 150


def test_agreement_with_the_reference(outcomes: dict[str, tuple[Any, Any]]) -> None:
    differing = {name: pair for name, pair in outcomes.items() if pair[0] != pair[1]}
    unexplained = {name: pair for name, pair in differing.items() if name not in DEVIATIONS}
    stale = sorted(name for name in DEVIATIONS if name not in differing)
    identical = len(outcomes) - len(differing)
    print(
        f"\nprime_code differential: {len(outcomes)} cases, {identical} identical, "
        f"{len(differing)} documented deviations"
    )
    assert not unexplained, json.dumps(unexplained, indent=1)
    assert not stale, f"listed as deviations but identical now: {stale}"
