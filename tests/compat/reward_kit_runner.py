"""Runs reward cases through the real reward-kit 0.4.1 and prints each outcome as a JSON line.

Started by the differential test with reward-kit on its path (installed outside the
repository), in a scratch directory, with no standard input (the reference's programs inherit
the caller's). Reads JSON cases on stdin: ``{"name", "module", "function", "kwargs"}``.

Usage: python reward_kit_runner.py < cases.json
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import normalize


def main() -> None:
    cases = json.load(sys.stdin)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the programs' stdin for the whole run
    for case in cases:
        module = importlib.import_module(f"reward_kit.rewards.{case['module']}")
        function = getattr(module, case["function"])
        outcome = normalize.reward_outcome(lambda f=function, c=case: f(**c["kwargs"]))
        print(json.dumps({"name": case["name"], "outcome": outcome}), file=out, flush=True)


if __name__ == "__main__":
    main()
