"""Runs corpus cases through the real reference (verl 0.9.1 ``prime_code``) and prints outcomes.

Started by the differential test with the reference's own interpreter (a cached virtual
environment with numpy, outside the repository). Reads JSON cases on stdin, writes one JSON
outcome per line. Every case runs in a fresh scratch directory, because the reference runs
programs in the caller's working directory.

Usage: python reference_runner.py REFERENCE_SRC_DIR < cases.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, sys.argv[1])

import normalize
from prime_code import compute_score
from prime_code.utils import check_correctness


def main() -> None:
    cases = json.load(sys.stdin)
    home = os.getcwd()
    # The reference (and the programs it runs) print on stdout; outcomes go to a private copy of it.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for case in cases:
        with tempfile.TemporaryDirectory() as scratch:
            os.chdir(scratch)
            if case["layer"] == "check_correctness":
                outcome = normalize.check_correctness_outcome(
                    lambda c=case: check_correctness(c["in_outs"], c["code"], timeout=c["timeout"], debug=False)
                )
            else:
                outcome = normalize.compute_score_outcome(
                    lambda c=case: compute_score(c["code"], c["in_outs"], continuous=c["continuous"])
                )
            os.chdir(home)
        print(json.dumps({"name": case["name"], "outcome": outcome}), file=out, flush=True)


if __name__ == "__main__":
    main()
