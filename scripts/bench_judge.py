"""Per-test cost of judging, all tests of a submission in one container.

For a stdin problem and a call problem, judges the same submission with 1 and with 100 tests
(several rounds, medians) and prints the marginal cost of one more test, in milliseconds; for
an interactive problem, the cost of one more exchange between the program and its interactor
(1 and 1000 exchanges, each a line each way through the host). AIRLOCK_RUNTIME and
AIRLOCK_ISOLATION pick the sandbox. Usage: scripts/bench judge [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_rounds import rounds_argument

from engine import CallTest, Interactor, StdinTest, Submission, SyncEngine

STDIN_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
CALL_CODE = "def add(a, b):\n    return a + b\n"


def stdin_problem(tests: int) -> Submission:
    return Submission(
        code=STDIN_CODE, tests=[StdinTest(input=f"{i} {i}", expected_output=str(2 * i)) for i in range(tests)]
    )


def call_problem(tests: int) -> Submission:
    return Submission(
        code=CALL_CODE, fn_name="add", tests=[CallTest(args=[i, i], expected=2 * i) for i in range(tests)]
    )


def interactive_problem(exchanges: int) -> Submission:
    echo = f"import sys\nfor _ in range({exchanges}):\n    print(int(sys.stdin.readline()) + 1, flush=True)\n"
    count = (
        f"import sys\nfor i in range({exchanges}):\n    print(i, flush=True)\n"
        "    assert int(sys.stdin.readline()) == i + 1\n"
    )
    return Submission(code=echo, tests=[StdinTest(input="")], interactor=Interactor(code=count))


def median_time(engine: SyncEngine, submission: Submission, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = engine.judge(submission)
        times.append(time.perf_counter() - started)
        assert result.ok, result.first_failure
    return statistics.median(times)


def main() -> None:
    rounds = rounds_argument(__doc__, 5)
    with SyncEngine() as engine:
        engine.judge(stdin_problem(1))  # warm up
        for name, make in (("stdin", stdin_problem), ("call", call_problem)):
            one = median_time(engine, make(1), rounds)
            hundred = median_time(engine, make(100), rounds)
            print(
                f"{name:5} problem: 1 test {one * 1000:.0f} ms, 100 tests {hundred * 1000:.0f} ms, "
                f"per extra test {(hundred - one) / 99 * 1000:.1f} ms"
            )
        one = median_time(engine, interactive_problem(1), rounds)
        thousand = median_time(engine, interactive_problem(1000), rounds)
        print(
            f"interactive: 1 exchange {one * 1000:.0f} ms, 1000 exchanges {thousand * 1000:.0f} ms, "
            f"per extra exchange {(thousand - one) / 999 * 1000:.2f} ms"
        )


if __name__ == "__main__":
    main()
