"""Throughput and latency of Airlock's two runtimes against the baselines users would pick.

Run through ``scripts/bench`` (which sets everything up). Workloads: trivial programs, 10-test
stdin problems, 10-test call problems, HumanEval's 164 canonical solutions (assert mode).
Systems, all on this machine in this one run:

- ``airlock-docker`` / ``airlock-oci``: the engine (warm pool, all tests in one container);
- ``docker-ceiling``: create + start + wait + remove of a container running ``true`` from the
  same image with the same policy through the Docker API, one per submission, best concurrency;
- ``naive-run-per-test``: one plain ``docker run`` per test;
- ``naive-run-per-submission``: one plain ``docker run`` per submission, running its tests inside;
- ``unsafe-reference``: verl's ``prime_code.check_correctness`` in a process pool on the host
  (HumanEval: the same in-process ``exec`` its own harness does), no isolation at all.

Prints a table (submissions/s, p50/p95 latency, ratios), writes it as JSON, draws throughput
against concurrency as a PNG, and measures the warm latency of one trivial submission and the
engine's memory with 32 submissions in flight.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import anyio  # noqa: E402
import docker  # noqa: E402
import psutil  # noqa: E402
from compat.external import humaneval_problems, reference_python  # noqa: E402

from engine import AssertTest, CallTest, Engine, Limits, Settings, StdinTest, Submission  # noqa: E402
from engine._settings import RuntimeName  # noqa: E402
from engine.judge._datasets import to_submission  # noqa: E402
from engine.runtime import ContainerSpec, choose_docker_runtime  # noqa: E402
from engine.runtime._docker import container_config  # noqa: E402
from engine.runtime._labels import Owner  # noqa: E402
from engine.runtime._policy import Policy  # noqa: E402

STDIN_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
CALL_CODE = "def add(a, b):\n    return a + b\n"


# -- workloads ---------------------------------------------------------------------------------------


def workloads(count: int) -> dict[str, list[Submission]]:
    trivial = [
        Submission(id=f"t{i}", code=f"print({i})", tests=[StdinTest(expected_output=str(i))]) for i in range(count)
    ]
    stdin10 = [
        Submission(
            id=f"s{i}",
            code=STDIN_CODE,
            tests=[StdinTest(input=f"{i} {j}", expected_output=str(i + j)) for j in range(10)],
        )
        for i in range(count)
    ]
    call10 = [
        Submission(
            id=f"c{i}", code=CALL_CODE, fn_name="add", tests=[CallTest(args=[i, j], expected=i + j) for j in range(10)]
        )
        for i in range(count)
    ]
    humaneval = [
        to_submission({**p, "completion": p["canonical_solution"]}, p["task_id"]) for p in humaneval_problems()
    ]
    return {"trivial": trivial, "stdin10": stdin10, "call10": call10, "humaneval": humaneval}


@dataclass
class Point:
    system: str
    workload: str
    concurrency: int
    submissions: int
    per_second: float
    p50_ms: float
    p95_ms: float


def point(system: str, workload: str, concurrency: int, latencies: list[float], wall: float) -> Point:
    ordered = sorted(latencies)
    return Point(
        system,
        workload,
        concurrency,
        len(latencies),
        round(len(latencies) / wall, 2),
        round(statistics.median(ordered) * 1000, 1),
        round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
    )


# -- Airlock -------------------------------------------------------------------------------------------


def calls(submission: Submission) -> list[CallTest]:
    return [t for t in submission.tests if isinstance(t, CallTest)]


def assert_code(submission: Submission) -> str:
    test = submission.tests[0]
    assert isinstance(test, AssertTest)
    return test.code


def airlock(runtime: RuntimeName, workload: str, submissions: list[Submission], concurrency: int) -> Point:
    async def main() -> Point:
        settings = Settings(runtime=runtime, max_concurrency=concurrency, pool_size=concurrency)
        async with Engine(settings, limits=Limits(wall_time_s=10)) as engine:
            # Warm the caches (and unpack the image for the OCI runtime); then measure right away, so
            # the pool has to keep up with the load rather than serve a stock prepared beforehand.
            warm = await engine.judge_many(submissions[:2])
            assert all(r.ok for r in warm), [r.first_failure for r in warm if not r.ok][:1]
            latencies: list[float] = []
            gate = anyio.Semaphore(concurrency)

            async def one(submission: Submission) -> None:
                async with gate:
                    started = time.perf_counter()
                    result = await engine.judge(submission)
                    latencies.append(time.perf_counter() - started)
                    assert result.ok, result.first_failure

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for submission in submissions:
                    group.start_soon(one, submission)
            return point(f"airlock-{runtime}", workload, concurrency, latencies, time.perf_counter() - started)

    return anyio.run(main)


# -- Docker baselines -------------------------------------------------------------------------------------


def threaded(system: str, workload: str, items: list[Any], concurrency: int, work: Callable[[Any], None]) -> Point:
    latencies: list[float] = []

    def timed(item: Any) -> None:
        started = time.perf_counter()
        work(item)
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(timed, items))
    return point(system, workload, concurrency, latencies, time.perf_counter() - started)


def docker_ceiling(image: str, workload: str, count: int, concurrency: int) -> Point:
    client = docker.from_env(version="auto", max_pool_size=concurrency + 4)
    api = client.api
    policy = Policy.for_purpose(Limits(), "runc").model_copy(update={"command": ("true",)})
    owner = Owner()
    spec = ContainerSpec(image=image, policy=policy, labels=owner.labels("bench"))
    # The OCI runtime the engine's Docker runtime would choose, so that both sides start the same way.
    oci_runtime = choose_docker_runtime(set(api.info()["Runtimes"]))
    config = container_config(api, spec, 65534, oci_runtime)

    def one(_: int) -> None:
        created = api.create_container_from_config(config)["Id"]  # type: ignore[no-untyped-call]
        api.start(created)
        api.wait(created)
        api.remove_container(created, force=True)

    try:
        return threaded("docker-ceiling", workload, list(range(count)), concurrency, one)
    finally:
        client.close()
        owner.release()


DRIVER = r"""
import json, subprocess, sys
job = json.load(sys.stdin)
outputs = []
if job["kind"] == "call":
    namespace = {}
    exec(job["code"], namespace)
    outputs = [namespace[job["fn_name"]](*test) for test in job["tests"]]
else:
    for stdin in job["tests"]:
        run = subprocess.run([sys.executable, "-c", job["code"]], input=stdin, capture_output=True, text=True)
        outputs.append(run.stdout)
print(json.dumps(outputs))
"""


def naive_docker_run(image: str, stdin: str, argv: list[str]) -> str:
    command = ["docker", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3", image, *argv]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=True).stdout


def naive_job(submission: Submission) -> dict[str, Any]:
    tests = submission.tests
    if submission.fn_name:
        return {
            "kind": "call",
            "code": submission.code,
            "fn_name": submission.fn_name,
            "tests": [t.args for t in tests if isinstance(t, CallTest)],
        }
    if submission.entry_point:
        program = submission.code + "\n" + assert_code(submission)
        return {"kind": "stdin", "code": program, "tests": [""]}
    return {"kind": "stdin", "code": submission.code, "tests": [t.input for t in tests if isinstance(t, StdinTest)]}


def naive_per_test(image: str, workload: str, submissions: list[Submission], concurrency: int) -> Point:
    def one(submission: Submission) -> None:
        job = naive_job(submission)
        for test in job["tests"]:
            if job["kind"] == "call":
                call = f"{job['code']}\nimport json, sys\nprint(json.dumps({job['fn_name']}(*json.load(sys.stdin))))"
                naive_docker_run(image, json.dumps(test), ["-c", call])
            else:
                naive_docker_run(image, test, ["-c", job["code"]])

    return threaded("naive-run-per-test", workload, submissions, concurrency, one)


def naive_per_submission(image: str, workload: str, submissions: list[Submission], concurrency: int) -> Point:
    def one(submission: Submission) -> None:
        naive_docker_run(image, json.dumps(naive_job(submission)), ["-c", DRIVER])

    return threaded("naive-run-per-submission", workload, submissions, concurrency, one)


# -- the unsafe reference ----------------------------------------------------------------------------------


def prime_in_outs(submission: Submission) -> dict[str, Any]:
    """A call or stdin submission's tests as verl's ``prime_code`` takes them."""
    if submission.fn_name:
        return {
            "fn_name": submission.fn_name,
            "inputs": ["\n".join(json.dumps(a) for a in t.args) for t in calls(submission)],
            "outputs": [json.dumps(t.expected) for t in calls(submission)],
        }
    return {
        "inputs": [t.input for t in submission.tests if isinstance(t, StdinTest)],
        "outputs": [t.expected_output for t in submission.tests if isinstance(t, StdinTest)],
    }


def unsafe_reference(workload: str, submissions: list[Submission], concurrency: int) -> Point:
    python, source = reference_python()
    jobs = [
        {"kind": "exec", "code": submission.code + "\n" + assert_code(submission)}
        if submission.entry_point
        else {"kind": "prime", "code": submission.code, "in_outs": prime_in_outs(submission)}
        for submission in submissions
    ]
    run = subprocess.run(
        [str(python), str(ROOT / "scripts" / "bench_unsafe.py"), str(source), str(concurrency)],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(run.stdout.splitlines()[-1])
    return point("unsafe-reference", workload, concurrency, measured["latencies"], measured["wall"])


# -- single-job latency and memory ------------------------------------------------------------------------------


def warm_latency(runtime: RuntimeName, rounds: int = 30) -> dict[str, float]:
    async def main() -> dict[str, float]:
        async with Engine(Settings(runtime=runtime, pool_size=2)) as engine:
            await engine.run("pass")
            times = []
            for _ in range(rounds):
                await anyio.sleep(0.3)  # the pool refills between jobs, as it would between requests
                started = time.perf_counter()
                result = await engine.run("print(42)")
                times.append(time.perf_counter() - started)
                assert result.ok, result
            ordered = sorted(times)
            return {
                "p50_ms": round(statistics.median(ordered) * 1000, 1),
                "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
            }

    return anyio.run(main)


def memory_in_flight(runtime: str, in_flight: int = 32) -> float:
    async def main() -> float:
        process = psutil.Process()
        peak = 0.0
        submissions = [
            Submission(code="import time\ntime.sleep(3)\nprint(1)", tests=[StdinTest(expected_output="1")])
            for _ in range(in_flight)
        ]
        async with Engine(Settings(runtime=runtime, max_concurrency=in_flight, pool_size=0)) as engine:
            async with anyio.create_task_group() as group:

                async def sample() -> None:
                    nonlocal peak
                    while True:
                        peak = max(peak, process.memory_info().rss / 2**20)
                        await anyio.sleep(0.1)

                group.start_soon(sample)
                results = await engine.judge_many(submissions)
                group.cancel_scope.cancel()
            assert all(r.ok for r in results)
        return round(peak, 1)

    return anyio.run(main)


# -- the run ---------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=48, help="submissions per point (HumanEval: all 164)")
    parser.add_argument("--out", default=str(ROOT / "results"), help="folder for the JSON and the PNG")
    parser.add_argument("--runtimes", default="docker,oci")
    args = parser.parse_args()
    runtimes = args.runtimes.split(",")
    load = workloads(args.count)
    image = docker.from_env().images.list(name="airlock/python")[0].tags[0]
    points: list[Point] = []

    def measure(make: Callable[..., Point], *arguments: Any) -> None:
        points.append(make(*arguments))
        p = points[-1]
        print(
            f"  {p.system:26} {p.workload:9} c={p.concurrency:<3} {p.per_second:7.2f}/s "
            f"p50 {p.p50_ms:7.1f} ms  p95 {p.p95_ms:7.1f} ms",
            flush=True,
        )

    few = max(8, args.count // 4)  # the naive per-test baseline is slow; fewer submissions suffice
    print("throughput against concurrency (10-test stdin problems):", flush=True)
    for concurrency in (1, 2, 4, 8, 16):
        for runtime in runtimes:
            # Several times the concurrency, so that a steady state is what gets measured.
            count = max(args.count, 4 * concurrency)
            measure(airlock, runtime, "stdin10", (load["stdin10"] * 2)[:count], concurrency)
        measure(docker_ceiling, image, "stdin10", args.count, concurrency)
        measure(naive_per_submission, image, "stdin10", load["stdin10"][:few], concurrency)
        measure(unsafe_reference, "stdin10", load["stdin10"], concurrency)
    print("every workload at concurrency 8:", flush=True)
    for workload in ("trivial", "call10", "humaneval"):
        for runtime in runtimes:
            measure(airlock, runtime, workload, load[workload], 8)
        measure(docker_ceiling, image, workload, args.count, 8)
        measure(naive_per_submission, image, workload, load[workload][:few], 8)
        measure(unsafe_reference, workload, load[workload], 8)
    for workload in ("trivial", "stdin10", "call10"):
        measure(naive_per_test, image, workload, load[workload][: max(4, few // 2)], 8)
    extras = {
        "warm_latency": {runtime: warm_latency(runtime) for runtime in runtimes},
        "memory_mb_with_32_in_flight": {runtime: memory_in_flight(runtime) for runtime in runtimes},
    }
    report(points, extras, Path(args.out))


def best(points: list[Point], system: str, workload: str) -> Point | None:
    found = [p for p in points if p.system == system and p.workload == workload]
    return max(found, key=lambda p: p.per_second) if found else None


def report(points: list[Point], extras: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    systems = [
        "airlock-docker",
        "airlock-oci",
        "docker-ceiling",
        "naive-run-per-test",
        "naive-run-per-submission",
        "unsafe-reference",
    ]
    baselines = ["docker-ceiling", "naive-run-per-test", "naive-run-per-submission", "unsafe-reference"]
    table = []
    print("\nbest throughput per system and workload (submissions/s, latency at that concurrency):")
    header = f"{'workload':10} {'system':26} {'c':>3} {'per s':>8} {'p50 ms':>8} {'p95 ms':>8}"
    print(f"{header}   ratios of airlock-docker / airlock-oci to it")
    for workload in ("trivial", "stdin10", "call10", "humaneval"):
        for system in systems:
            p = best(points, system, workload)
            if p is None:
                continue
            ratios = ""
            if system in baselines:
                ratios = "  ".join(
                    f"{(a.per_second / p.per_second):.2f}x" if (a := best(points, mine, workload)) else "-"
                    for mine in ("airlock-docker", "airlock-oci")
                )
            table.append({**asdict(p), "ratios": ratios})
            row = f"{workload:10} {system:26} {p.concurrency:>3} {p.per_second:8.2f} {p.p50_ms:8.1f} {p.p95_ms:8.1f}"
            print(f"{row}   {ratios}")
    print(f"\nwarm latency, one trivial submission from the async API: {extras['warm_latency']}")
    print(f"engine memory with 32 submissions in flight (peak RSS, MB): {extras['memory_mb_with_32_in_flight']}")
    data = {
        "points": [asdict(p) for p in points],
        "table": table,
        **extras,
        "machine": {"cpus": psutil.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
    }
    (out / f"bench-{stamp}.json").write_text(json.dumps(data, indent=2))
    chart(points, out / f"bench-{stamp}.png")
    print(f"\nwrote {out / f'bench-{stamp}.json'} and {out / f'bench-{stamp}.png'}")


def chart(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for system in sorted({p.system for p in points if p.workload == "stdin10"}):
        series = sorted((p.concurrency, p.per_second) for p in points if p.system == system and p.workload == "stdin10")
        if len(series) > 1:
            axes.plot([c for c, _ in series], [v for _, v in series], marker="o", label=system)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("submissions in flight")
    axes.set_ylabel("10-test stdin submissions per second")
    axes.set_title("Throughput against concurrency")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
