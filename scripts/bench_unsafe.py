"""The unsafe in-process baseline, run by the reference's own interpreter (see scripts/bench.py).

Reads jobs (JSON) on stdin; judges them in a process pool of the given size on the host, with
no isolation: verl's prime_code ``check_correctness`` for stdin and call jobs, a plain ``exec``
(what HumanEval's own harness does) for assert jobs. Prints the wall time and each latency.
Usage: python bench_unsafe.py PRIME_CODE_PARENT_DIR POOL_SIZE < jobs.json
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from typing import Any

sys.path.insert(0, sys.argv[1])


def judge(job: dict[str, Any]) -> float:
    started = time.perf_counter()
    if job["kind"] == "exec":
        exec(job["code"], {"__name__": "__main__"})  # noqa: S102 - this baseline is the unsafe one
    else:
        from prime_code.utils import check_correctness

        results, _ = check_correctness(job["in_outs"], job["code"], timeout=10, debug=False)
        assert all(r is True for r in results), results
    return time.perf_counter() - started


def main() -> None:
    jobs = json.load(sys.stdin)
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(int(sys.argv[2])) as pool:
        latencies = list(pool.map(judge, jobs))
    print(json.dumps({"wall": time.perf_counter() - started, "latencies": latencies}))


if __name__ == "__main__":
    main()
