"""Safe scoring against the unsafe reference, end to end, and how cost grows with the work.

1. End to end, as a user runs it: ``airlock score`` (a subprocess, default concurrency) on COUNT
   ten-test stdin submissions and COUNT ten-test call submissions of a small program, and COUNT/3
   RL-like ones (50 tests that each compute about 2 ms; then the same mixed with C++), on the OCI
   runtime and on the Docker runtime, against verl's ``check_correctness`` in a 4-process pool
   on the same submissions (the unsafe reference). Prints submissions/s, the ratios and, for
   the OCI runtime, the CPU per submission of the whole run (the engine, the OCI runtime and
   the containers; the reference's is its interpreter's and its pool's); by default a Python
   submission's tests run one after another in one process, as the reference runs them, in a
   container of its own. Then ``airlock score --process-per-test`` on the OCI runtime: each test in
   a process of its own, forked from the loaded program. Then the same
   submissions through verl's ``prime_code`` drop-in (``engine.compat.prime_code``), as an RL
   trainer's reward function calls it: a submission's tests share one process there, as in the
   reference, and each submission still gets a container of its own.
2. Growth, one submission at a time on the OCI runtime: CPU (this process, and its children:
   the OCI runtime and the containers) and wall time per submission against the number of
   tests (1 to 3,000), the size of each test's input and output (1 KB to 10 MB, one test) and
   the program's imports (nothing, numpy, pandas), with the cost of each added unit: no step
   may grow faster than the work.
3. Bounds, one submission of each end-to-end workload at a time on the OCI runtime: its CPU
   split into the submission's floor (the container, the harness, the program loaded, the host's
   share: the submission with one test, less that test's own CPU), the tests' own CPU (as the
   harness measured it) and the bookkeeping around each test (the harness's and the host's), and
   the best ratio this design could reach against the reference's CPU per submission (its pool's
   cores over its rate): were the bookkeeping free, and were every test free. A target above the
   second needs more than one submission in a container.

Usage: scripts/bench speed [--count N] [--skip-docker]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

import anyio  # noqa: E402
from bench import STDIN_CODE, prime_in_outs, unsafe_reference, workloads  # noqa: E402
from bench_profile import children_cpu_s  # noqa: E402

from engine import Engine, Limits, Settings, StdinTest, Submission  # noqa: E402
from engine.compat import prime_code  # noqa: E402

REFERENCE_POOL = 4
MIB = 1 << 20


def _own_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


# -- 1. end to end ----------------------------------------------------------------------------------------


def score(runtime: str, submissions: list[Submission], *flags: str) -> tuple[float, float]:
    """``airlock score`` (with ``flags``) on the submissions: submissions/s and CPU ms per
    submission of the run."""
    with tempfile.TemporaryDirectory() as folder:
        source, output = Path(folder) / "in.jsonl", Path(folder) / "out.jsonl"
        source.write_text("".join(s.model_dump_json() + "\n" for s in submissions))
        command = [sys.executable, "-m", "engine", "score", str(source), "-o", str(output), "-q"]
        cpu_before, started = children_cpu_s(), time.perf_counter()
        subprocess.run([*command, "--runtime", runtime, *flags], check=True, capture_output=True)
        wall, cpu = time.perf_counter() - started, children_cpu_s() - cpu_before
        records = [json.loads(line) for line in output.read_text().splitlines()]
        assert [r.get("verdict") for r in records] == ["passed"] * len(submissions), records[:1]
    return len(submissions) / wall, cpu / len(submissions) * 1000


def through_prime_code(runtime: str, submissions: list[Submission]) -> tuple[float, float]:
    """The drop-in's ``check_correctness`` on the submissions, from as many threads as the engine
    has containers in flight (``airlock score``'s default): submissions/s and CPU ms per
    submission (this process and its children, the OCI runtime and the containers)."""
    os.environ["AIRLOCK_RUNTIME"] = runtime
    jobs = [(prime_in_outs(submission), submission.code) for submission in submissions]
    try:
        prime_code.check_correctness(jobs[0][0], jobs[0][1], timeout=10)  # the engine opens; the image is found
        cpu_before, started = _own_cpu_s() + children_cpu_s(), time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(Settings().max_concurrency) as pool:
            results = list(pool.map(lambda job: prime_code.check_correctness(job[0], job[1], timeout=10)[0], jobs))
        wall, cpu = time.perf_counter() - started, _own_cpu_s() + children_cpu_s() - cpu_before
    finally:
        prime_code.close()
        del os.environ["AIRLOCK_RUNTIME"]
    assert all(all(r is True for r in result) for result in results), results[:1]
    return len(submissions) / wall, cpu / len(submissions) * 1000


# Like an RL step's problems: 50 tests that each compute for real (about 2 ms of Python).
RL_TESTS = 50
RL_PYTHON = "n = int(input())\nprint(sum(pow(i, 3, 1000003) for i in range(n)))\n"
# The same sums in C++, computed REPEAT times over so that its tests compute for real too.
REPEAT = 400
RL_CPP = f"""#include <cstdio>
int main() {{
    long long n, total = 0;
    if (std::scanf("%lld", &n) != 1) return 1;
    for (int r = 0; r < {REPEAT}; ++r)
        for (long long i = 0; i < n; ++i) total += i * i % 1000003 * i % 1000003;
    std::printf("%lld\\n", total / {REPEAT});
}}
"""


def rl_workload(count: int, language: str = "python") -> list[Submission]:
    """``count`` submissions of RL_TESTS computing tests each."""
    submissions = []
    for i in range(count):
        sizes = [8000 + 17 * i + j for j in range(RL_TESTS)]
        tests = [StdinTest(input=str(n), expected_output=str(sum(pow(k, 3, 1000003) for k in range(n)))) for n in sizes]
        code = RL_PYTHON if language == "python" else RL_CPP
        submissions.append(Submission(id=f"rl-{language}-{i}", language=language, code=code, tests=tests))
    return submissions


END_TO_END = ("stdin10", "call10", "rl50")
FORKING = "airlock score oci, process per test"


def process_per_test(runtime: str, submissions: list[Submission]) -> tuple[float, float]:
    return score(runtime, submissions, "--process-per-test")


def end_to_end(count: int, runtimes: list[str]) -> list[dict[str, Any]]:
    load = workloads(count)
    load["rl50"] = rl_workload(count // 3)
    rows = []
    print(f"\nend to end: `airlock score` against the unsafe reference ({count} ten-test submissions, ", flush=True)
    print(f"{count // 3} of {RL_TESTS} computing tests)")
    print(f"  {'workload':9} {'system':35} {'per s':>8} {'CPU ms/sub':>11} {'ratio':>7}")
    for workload in END_TO_END:
        cpu_before = children_cpu_s()
        reference = unsafe_reference(workload, load[workload], REFERENCE_POOL)
        reference_cpu = (children_cpu_s() - cpu_before) / len(load[workload]) * 1000
        label = f"unsafe reference ({REFERENCE_POOL})"
        print(f"  {workload:9} {label:35} {reference.per_second:8.1f} {reference_cpu:11.1f} {'1.00x':>7}", flush=True)
        systems = [(f"airlock score {runtime}", runtime, score) for runtime in runtimes]
        others = [(FORKING, "oci", process_per_test), ("prime_code drop-in oci", "oci", through_prime_code)]
        for label, runtime, judge in [*systems, *others]:
            rate, cpu = judge(runtime, load[workload])
            ratio = rate / reference.per_second
            shown = f"{cpu:11.1f}" if runtime == "oci" else f"{'(daemon)':>11}"
            print(f"  {workload:9} {label:35} {rate:8.1f} {shown} {ratio:6.2f}x", flush=True)
            rows.append({"workload": workload, "system": label, "per_second": rate, "ratio": ratio, "cpu_ms": cpu})
        rows.append({"workload": workload, "system": "reference", "per_second": reference.per_second})
    # The mix the reference cannot run: half of the RL problems in C++ (compiled once per submission).
    mixed = [s for pair in zip(load["rl50"], rl_workload(count // 3, "cpp"), strict=True) for s in pair]
    for runtime in runtimes:
        rate, cpu = score(runtime, mixed)
        shown = f"{cpu:11.1f}" if runtime == "oci" else f"{'(daemon)':>11}"
        print(f"  {'rl50 mix':9} {'airlock score ' + runtime:35} {rate:8.1f} {shown} {'(py+c++)':>7}", flush=True)
        rows.append({"workload": "rl50-mix", "system": f"airlock score {runtime}", "per_second": rate, "cpu_ms": cpu})
    return rows


# -- 2. growth ----------------------------------------------------------------------------------------------


def adder(tests: int) -> Submission:
    return Submission(
        code=STDIN_CODE, tests=[StdinTest(input=f"{i} {i}", expected_output=str(2 * i)) for i in range(tests)]
    )


def echo(size: int) -> Submission:
    data = ("0123456789abcdef" * (size // 16 + 1))[:size]
    code = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    return Submission(code=code, tests=[StdinTest(input=data, expected_output=data)])


def importer(module: str | None) -> Submission:
    code = (f"import {module}\n" if module else "") + STDIN_CODE
    return Submission(code=code, tests=adder(10).tests)


def growth(rounds: int) -> list[dict[str, Any]]:
    limits = Limits(output_bytes=16 * MIB, memory_mb=1024)
    few = max(2, rounds // 5)  # for the points that take seconds each
    curves: list[tuple[str, str, list[tuple[str, float, Submission, int]]]] = [
        ("tests", "test", [(str(n), n, adder(n), rounds if n <= 10 else few) for n in (1, 10, 100, 1000, 3000)]),
        (
            "I/O per test",
            "MB",
            [
                (label, size / MIB, echo(size), rounds if size <= MIB // 10 else few)
                for label, size in (("1 KB", 1024), ("100 KB", 100 * 1024), ("1 MB", MIB), ("10 MB", 10 * MIB))
            ],
        ),
        ("imports", "", [(name or "nothing", 0, importer(name), rounds) for name in (None, "numpy", "pandas")]),
    ]
    rows: list[dict[str, Any]] = []

    async def main() -> None:
        async with Engine(Settings(runtime="oci", max_concurrency=2), limits=limits) as engine:
            for _ in range(3):
                await engine.judge(adder(10))  # the pool learns the kind; the image is unpacked
            for curve, unit, points in curves:
                print(f"\n  {curve}: ms per submission (one at a time, OCI runtime)", flush=True)
                previous: tuple[float, float] | None = None
                for label, amount, submission, repeat in points:
                    wall, host, container = await _measure(engine, submission, repeat)
                    cpu = host + container
                    added = ""
                    if previous is not None and unit and amount > previous[0]:
                        per_unit = (cpu - previous[1]) / (amount - previous[0])
                        added = f"  +{per_unit:.2f} ms CPU per added {unit}"
                    shares = f"CPU {cpu:8.1f} (host {host:7.1f}, OCI runtime and container {container:8.1f})"
                    print(f"    {label:>8}  wall {wall:8.1f}  {shares}{added}", flush=True)
                    rows.append(
                        {"curve": curve, "point": label, "wall_ms": wall, "host_ms": host, "container_ms": container}
                    )
                    previous = (amount, cpu)

    anyio.run(main)
    return rows


async def _measure(engine: Engine, submission: Submission, rounds: int) -> tuple[float, float, float]:
    """Wall, host CPU (this process) and container CPU (its children: the OCI runtime and the
    containers) in ms per submission."""
    host_before, children_before, started = _own_cpu_s(), children_cpu_s(), time.perf_counter()
    for _ in range(rounds):
        result = await engine.judge(submission)
        assert result.ok, result.first_failure
    await anyio.sleep(0.3)  # the last container's removal finishes inside the window
    wall = (time.perf_counter() - started - 0.3) / rounds * 1000
    host = (_own_cpu_s() - host_before) / rounds * 1000
    return wall, host, (children_cpu_s() - children_before) / rounds * 1000


# -- 3. bounds ----------------------------------------------------------------------------------------------


def bounds(end_to_end_rows: list[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    load = workloads(3)
    load["rl50"] = rl_workload(1)
    cores = os.cpu_count() or 1
    reference_rate = {r["workload"]: r["per_second"] for r in end_to_end_rows if r["system"] == "reference"}
    scored = [r for r in end_to_end_rows if r["system"] == "airlock score oci" and r["workload"] in END_TO_END]
    measured = {r["workload"]: r["ratio"] for r in scored}
    rows: list[dict[str, Any]] = []
    print("\nbounds: ms of CPU per submission, one at a time on the OCI runtime, and the best ratio of this design")
    print(f"  {'workload':9} {'reference':>9} {'ours':>7} {'floor':>7} {'tests':>7} {'bookkeeping':>16} ", end="")
    print(f"{'measured':>9} {'if bookkeeping free':>20} {'if tests free':>14}")

    async def main() -> None:
        async with Engine(Settings(runtime="oci", max_concurrency=2)) as engine:
            for workload in END_TO_END:
                whole = load[workload][0]
                first = whole.model_copy(update={"tests": whole.tests[:1]})
                for _ in range(3):
                    await engine.judge(whole)
                all_cpu, all_tests = await _split(engine, whole, rounds)
                one_cpu, one_test = await _split(engine, first, rounds)
                count = len(whole.tests)
                floor = one_cpu - one_test
                bookkeeping = (all_cpu - one_cpu - (all_tests - one_test)) / (count - 1)
                reference = cores / reference_rate[workload] * 1000
                free_bookkeeping, free_tests = reference / (floor + all_tests), reference / floor
                print(
                    f"  {workload:9} {reference:9.1f} {all_cpu:7.1f} {floor:7.1f} {all_tests:7.1f} "
                    f"{bookkeeping:9.2f} per test {measured[workload]:8.2f}x {free_bookkeeping:19.2f}x "
                    f"{free_tests:13.2f}x",
                    flush=True,
                )
                rows.append(
                    {
                        "workload": workload,
                        "reference_ms": reference,
                        "ours_ms": all_cpu,
                        "floor_ms": floor,
                        "tests_ms": all_tests,
                        "bookkeeping_per_test_ms": bookkeeping,
                        "ratio_if_bookkeeping_free": free_bookkeeping,
                        "ratio_if_tests_free": free_tests,
                    }
                )

    anyio.run(main)
    return rows


async def _split(engine: Engine, submission: Submission, rounds: int) -> tuple[float, float]:
    """CPU ms per submission (this process's and its children's), and of that its tests' own
    processes, as the harness measured them."""
    own_before, children_before = _own_cpu_s(), children_cpu_s()
    tests_s = 0.0
    for _ in range(rounds):
        result = await engine.judge(submission)
        assert result.ok, result.first_failure
        tests_s += sum(test.usage.cpu_time_s or 0.0 for test in result.tests)
    await anyio.sleep(0.3)  # the last container's removal finishes inside the window
    cpu = _own_cpu_s() - own_before + children_cpu_s() - children_before
    return cpu / rounds * 1000, tests_s / rounds * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=300, help="submissions per end-to-end workload")
    parser.add_argument("--rounds", type=int, default=20, help="submissions per growth point")
    parser.add_argument("--skip-docker", action="store_true", help="end to end on the OCI runtime only")
    args = parser.parse_args()
    runtimes = ["oci"] if args.skip_docker else ["oci", "docker"]
    measured = end_to_end(args.count, runtimes)
    results = {"end_to_end": measured, "growth": growth(args.rounds), "bounds": bounds(measured, args.rounds)}
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    path = out / f"bench-speed-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
