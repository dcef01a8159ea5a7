"""What Ray costs: the same submissions judged by ``Engine`` in this process and by ``RayEngine``
on a one-node Ray cluster on this machine (loopback), same runtime and slots, alternated twice so
that a noisy neighbour hits both sides alike.

Prints submissions per second each way, their ratio (1.0: dispatch is free), the driver's CPU
per submission under Ray (what bounds one driver), and the throughput model that follows:
``rate(n nodes) = min(n * node rate, 1 / driver CPU per submission)``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

# Ray's single-machine mode (everything on 127.0.0.1); read when Ray is imported.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import anyio

from engine import Engine, Judge, Settings, StdinTest, Submission
from engine.distributed import RayEngine

NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 100)


def workload(count: int) -> list[Submission]:
    return [
        Submission(code="print(int(input()) * 2)", tests=[StdinTest(input=str(n), expected_output=str(2 * n))])
        for n in range(count)
    ]


async def measured(judge: Judge, count: int) -> tuple[float, float]:
    """Submissions per second, and this process's CPU seconds per submission."""
    submissions = workload(count)
    wall, cpu = time.perf_counter(), time.process_time()
    results = await judge.judge_many(submissions)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(results) == count
    return count / wall, cpu / count


async def main_async(count: int, runtime: str) -> None:
    import ray
    from ray.cluster_utils import Cluster

    settings = Settings(runtime=runtime)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    local_rates, ray_rates, driver_cpu = [], [], []
    try:
        async with Engine(settings) as engine, RayEngine(cluster.address, settings) as cluster_engine:
            await engine.judge_many(workload(settings.max_concurrency * 2))  # warm both pools
            await cluster_engine.judge_many(workload(settings.max_concurrency * 2))
            for _ in range(2):
                rate, _ = await measured(engine, count)
                local_rates.append(rate)
                rate, cpu = await measured(cluster_engine, count)
                ray_rates.append(rate)
                driver_cpu.append(cpu)
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
    local, remote, cpu = statistics.mean(local_rates), statistics.mean(ray_rates), statistics.mean(driver_cpu)
    print(f"{count} one-test submissions, {runtime} runtime, {settings.max_concurrency} slots, 2 rounds each")
    print(f"  Engine in this process     {local:6.1f} /s   (rounds: {', '.join(f'{r:.1f}' for r in local_rates)})")
    print(f"  RayEngine, one local node  {remote:6.1f} /s   (rounds: {', '.join(f'{r:.1f}' for r in ray_rates)})")
    print(f"  ratio Ray / local          {remote / local:6.2f}")
    print(f"  driver CPU per submission  {cpu * 1000:6.2f} ms  (ceiling of one driver: {1 / cpu:.0f} /s)")
    print("model: rate(n) = min(n * node rate, 1 / driver CPU per submission), node rate as measured here")
    for nodes in NODE_COUNTS:
        modelled = min(nodes * remote, 1 / cpu)
        bound = "driver" if nodes * remote > 1 / cpu else "nodes"
        print(f"  {nodes:4d} nodes  {modelled:8.0f} /s  (bound by the {bound})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200, help="submissions per round (default 200)")
    default = "oci" if os.geteuid() == 0 and shutil.which("runc") else "docker"
    parser.add_argument("--runtime", choices=["docker", "oci"], default=default)
    args = parser.parse_args()
    anyio.run(main_async, args.count, args.runtime)


if __name__ == "__main__":
    main()
