"""Verdicts under load: one data set judged quietly, then under six submissions in flight per core
beside one CPU hog per core (a trainer's data loaders), both through ``airlock score``.

The data set: programs that each use a set share of their CPU time limit (1 s), from 5% to 95%
and some past it (150%, 300%), and programs that sleep past the wall-clock backstop. Prints the
verdict agreement (the goal: identical), the spread of CPU and wall time per program in both
runs, and what the wall-clock backstop caught.

Usage: scripts/bench load [--count N] [--runtime docker|oci]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('ok')\n"
SLEEPY = "import time\ntime.sleep({seconds})\nprint('ok')\n"
LIMIT_S = 1.0
SHARES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.5, 3.0)


def data_set(count: int) -> list[dict[str, Any]]:
    records = []
    for number in range(count):
        share = SHARES[number % len(SHARES)]
        code = BUSY.format(seconds=share * LIMIT_S)
        if number % 20 == 19:
            share, code = -1.0, SLEEPY.format(seconds=10)
        records.append(
            {
                "id": f"{number}:{share}",
                "code": code,
                "tests": [{"kind": "stdin", "input": "", "expected_output": "ok"}],
                "limits": {"time_s": LIMIT_S},
            }
        )
    return records


def _hog() -> None:
    while True:
        pass


def judged(source: Path, concurrency: int, runtime: str, hogs: int) -> tuple[list[dict[str, Any]], float]:
    output = source.with_name(f"out-{concurrency}.jsonl")
    spinning = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for process in spinning:
        process.start()
    try:
        started = time.perf_counter()
        command = [sys.executable, "-m", "engine", "score", str(source), "-o", str(output), "-q"]
        subprocess.run([*command, "--concurrency", str(concurrency), "--runtime", runtime], check=True)
        elapsed = time.perf_counter() - started
    finally:
        for process in spinning:
            process.kill()
            process.join()
    return [json.loads(line) for line in output.read_text().splitlines()], elapsed


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"min {ordered[0]:.2f}  median {statistics.median(ordered):.2f}  max {ordered[-1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60, help="submissions in the data set (60)")
    parser.add_argument("--runtime", default="oci", choices=["docker", "oci"])
    args = parser.parse_args()
    cores = multiprocessing.cpu_count()
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "load.jsonl"
        source.write_text("".join(json.dumps(record) + "\n" for record in data_set(args.count)))
        quiet, quiet_s = judged(source, 1, args.runtime, hogs=0)
        loaded, loaded_s = judged(source, 6 * cores, args.runtime, hogs=cores)
    print(f"{args.count} submissions, CPU time limit {LIMIT_S:g} s, {args.runtime} runtime, {cores} cores")
    print(
        f"quiet: concurrency 1, {quiet_s:.0f} s; "
        f"loaded: concurrency {6 * cores} beside {cores} CPU hogs, {loaded_s:.0f} s"
    )
    differing = [
        (alone["id"], alone["verdict"], crowded["verdict"])
        for alone, crowded in zip(quiet, loaded, strict=True)
        if alone["verdict"] != crowded["verdict"]
    ]
    print(f"verdicts identical: {len(quiet) - len(differing)}/{len(quiet)}")
    for identity, before, after in differing:
        print(f"  {identity} (id = number:share of the limit): quiet {before}, loaded {after}")
    for name, results in (("quiet", quiet), ("loaded", loaded)):
        cpu = [
            r["tests"][0]["usage"]["cpu_time_s"] for r in results if r["tests"][0]["usage"]["cpu_time_s"] is not None
        ]
        wall = [
            r["tests"][0]["usage"]["wall_time_s"] for r in results if r["tests"][0]["usage"]["wall_time_s"] is not None
        ]
        ratio = [
            w / c
            for r in results
            if (c := r["tests"][0]["usage"]["cpu_time_s"]) and (w := r["tests"][0]["usage"]["wall_time_s"]) and c > 0.1
        ]
        backstop = sum("backstop" in (r["tests"][0].get("detail") or "") for r in results)
        cpu_limit = sum("CPU time limit" in (r["tests"][0].get("detail") or "") for r in results)
        print(f"{name}: CPU s per program {spread(cpu)}; wall s {spread(wall)}; wall/CPU {spread(ratio)}")
        print(f"{name}: stopped at the CPU time limit {cpu_limit}, by the wall-clock backstop {backstop}")


if __name__ == "__main__":
    main()
