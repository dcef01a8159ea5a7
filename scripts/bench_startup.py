"""Cost of one trivial sandboxed run against a bare `docker run` of the same image.

Alternates, in one process: `docker run --rm --network none --entrypoint true IMAGE` (the
bare container, through the docker CLI) and `SyncEngine.run("pass")` (a fully hardened
container with the harness, seccomp profile and limits), cold: without the warm pool, so that
both start a container on the clock (`scripts/bench` measures the warm latency). Prints the
medians and their ratio.
Usage: scripts/bench startup [ROUNDS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_rounds import rounds_argument

from engine import Outcome, Settings, SyncEngine


def main() -> None:
    rounds = rounds_argument(__doc__, 20)
    bare: list[float] = []
    ours: list[float] = []
    with SyncEngine(Settings(pool_size=0)) as engine:
        image = engine.image_for("python")
        engine.run("pass")  # warm the image cache and the code paths once
        subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "true", image], check=True)
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "true", image], check=True)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = engine.run("pass")
            ours.append(time.perf_counter() - started)
            assert result.outcome is Outcome.OK, result
    bare_median, ours_median = statistics.median(bare), statistics.median(ours)
    print(f"rounds: {rounds}")
    print(f"bare docker run --rm --network none IMAGE true:   median {bare_median * 1000:.0f} ms")
    print(f"airlock run, cold (hardened, harness, one test): median {ours_median * 1000:.0f} ms")
    print(f"ratio airlock / bare: {ours_median / bare_median:.2f}")


if __name__ == "__main__":
    main()
